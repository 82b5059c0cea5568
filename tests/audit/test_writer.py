"""Group commit: decisions that arrive while a write is in progress share the next write and fsync."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path

import pytest

from tests.audit.logs import numbered, records
from webhook.audit.journal import AuditWriteError, FsyncMode, Journal, JournalOptions
from webhook.audit.verify import verify
from webhook.audit.writer import AuditWriter


class GatedFsync:
    """An fsync that counts calls and holds the first one until the test opens the gate."""

    def __init__(self) -> None:
        self.calls = 0
        self.entered = threading.Event()
        self.gate = threading.Event()

    def __call__(self, fd: int) -> None:
        self.calls += 1
        self.entered.set()
        self.gate.wait(timeout=30)


async def _concurrent_appends(log: Path, mode: FsyncMode, count: int) -> tuple[GatedFsync, list[int]]:
    fsync = GatedFsync()
    batches: list[int] = []
    writer = AuditWriter(Journal(JournalOptions(path=log, fsync=mode), fsync=fsync), on_batch=batches.append)
    await writer.start()
    entries = numbered(count)
    first = asyncio.create_task(writer.append(entries[0]))
    await asyncio.get_running_loop().run_in_executor(None, fsync.entered.wait)
    rest = [asyncio.create_task(writer.append(e)) for e in entries[1:]]
    await asyncio.sleep(0)  # every waiting request has queued its record
    fsync.gate.set()
    sealed = await asyncio.gather(first, *rest)
    await writer.close()
    assert [r["uid"] for r in sealed] == [e["uid"] for e in entries]
    return fsync, batches


def test_concurrent_records_share_one_fsync(tmp_path: Path) -> None:
    log = tmp_path / "audit.log"
    fsync, batches = asyncio.run(_concurrent_appends(log, "batch", 50))
    assert batches == [1, 49]
    assert fsync.calls == 2
    assert verify([log], from_genesis=True).records == 50


def test_always_mode_pays_one_fsync_per_record(tmp_path: Path) -> None:
    fsync, batches = asyncio.run(_concurrent_appends(tmp_path / "audit.log", "always", 20))
    assert batches == [1, 19]
    assert fsync.calls == 20


def test_a_record_is_in_the_file_when_append_returns(tmp_path: Path) -> None:
    log = tmp_path / "audit.log"

    async def scenario() -> None:
        writer = AuditWriter(Journal(JournalOptions(path=log)))
        await writer.start()
        for item in numbered(3):
            sealed = await writer.append(item)
            assert records(log)[-1] == sealed
        await writer.close()

    asyncio.run(scenario())


def test_a_hung_disk_becomes_an_error_not_a_hang(tmp_path: Path) -> None:
    fsync = GatedFsync()

    async def scenario() -> None:
        writer = AuditWriter(Journal(JournalOptions(path=tmp_path / "audit.log"), fsync=fsync), timeout=0.2)
        await writer.start()
        with pytest.raises(AuditWriteError, match="longer than"):
            await writer.append(numbered(1)[0])
        fsync.gate.set()
        await writer.close()

    asyncio.run(scenario())
