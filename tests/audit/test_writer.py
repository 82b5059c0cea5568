"""Group commit: decisions that arrive while a write is in progress share the next write and fsync."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from tests.audit.logs import entry, numbered, records
from webhook.audit.checkpoint import Checkpointer
from webhook.audit.files import expand
from webhook.audit.journal import AuditWriteError, FsyncMode, Journal, JournalOptions
from webhook.audit.signing import SigningKey
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


def test_batch_mode_acknowledges_after_the_fsync_which_runs_outside_the_lock(tmp_path: Path) -> None:
    log = tmp_path / "audit.log"
    fsync = GatedFsync()

    async def scenario() -> None:
        writer = AuditWriter(Journal(JournalOptions(path=log), fsync=fsync))
        await writer.start()
        pending = asyncio.create_task(writer.append(entry("ours")))
        await asyncio.get_running_loop().run_in_executor(None, fsync.entered.wait)
        assert [r["uid"] for r in records(log)] == ["ours"], "written before the fsync"
        other = Journal(JournalOptions(path=log, fsync="never"))  # another worker process
        other.open()
        written = other.try_write([entry("theirs")])
        assert written is not None, "the lock is free during the fsync"
        other.settle(written)
        other.close()
        assert not pending.done(), "not acknowledged before its fsync returns"
        fsync.gate.set()
        assert (await pending)["uid"] == "ours"
        await writer.close()

    asyncio.run(scenario())
    result = verify([log], from_genesis=True)
    assert result.ok, result.describe()
    assert [r["uid"] for r in records(log)] == ["ours", "theirs"]


@pytest.mark.parametrize(("mode", "failing_call"), [("batch", 2), ("always", 4)])
def test_a_failed_fsync_fails_every_caller_of_its_batch_and_the_log_keeps_none_of_it(
    tmp_path: Path, mode: FsyncMode, failing_call: int
) -> None:
    """The first record is written alone; the five that queue behind it share the next batch, which fails."""
    log = tmp_path / "audit.log"
    fsync = GatedFsync()

    def flaky(fd: int) -> None:
        fsync(fd)
        if fsync.calls == failing_call:
            raise OSError(5, "Input/output error")

    async def scenario() -> None:
        writer = AuditWriter(Journal(JournalOptions(path=log, fsync=mode), fsync=flaky))
        await writer.start()
        first = asyncio.create_task(writer.append(entry("first")))
        await asyncio.get_running_loop().run_in_executor(None, fsync.entered.wait)
        doomed = [asyncio.create_task(writer.append(e)) for e in numbered(5)]
        await asyncio.sleep(0)  # every waiting request has queued its record
        fsync.gate.set()
        assert (await first)["uid"] == "first"
        outcomes = await asyncio.gather(*doomed, return_exceptions=True)
        assert all(isinstance(o, AuditWriteError) and "flush" in str(o) for o in outcomes), outcomes
        assert (await writer.append(entry("next")))["seq"] == 2
        await writer.close()

    asyncio.run(scenario())
    result = verify([log], from_genesis=True)
    assert result.ok, result.describe()
    assert [r["uid"] for r in records(log)] == ["first", "next"]


@pytest.mark.parametrize("mode", ["batch", "never"])
def test_a_write_failure_on_the_loop_is_an_error_and_the_writer_carries_on(
    tmp_path: Path, mode: FsyncMode
) -> None:
    log = tmp_path / "audit.log"
    log.symlink_to("/dev/full")
    calls: list[int] = []

    async def scenario() -> None:
        writer = AuditWriter(Journal(JournalOptions(path=log, fsync=mode), fsync=calls.append))
        await writer.start()
        outcomes = await asyncio.gather(*(writer.append(e) for e in numbered(3)), return_exceptions=True)
        assert all(isinstance(o, AuditWriteError) and "No space left" in str(o) for o in outcomes), outcomes
        assert calls == [], "a batch that was not written is not flushed"
        log.unlink()
        log.symlink_to(tmp_path / "disk-replaced.log")  # the journal reopens the path it is given
        assert (await writer.append(entry("after")))["seq"] == 1
        await writer.close()

    asyncio.run(scenario())
    assert [r["uid"] for r in records(log)] == ["after"]
    assert verify([log], from_genesis=True).ok


def test_two_writers_on_one_file_interleave_into_one_chain(tmp_path: Path) -> None:
    """Two event loops in two threads stand in for two worker processes: flock cannot tell them apart."""
    log = tmp_path / "audit.log"
    per_writer = 60

    async def one_writer(name: str) -> None:
        writer = AuditWriter(Journal(JournalOptions(path=log, max_bytes=30_000, keep=50)))
        await writer.start()
        for round_ in range(per_writer // 6):
            await asyncio.gather(*(writer.append(entry(f"{name}-{round_}-{i}")) for i in range(6)))
        await writer.close()

    threads = [threading.Thread(target=asyncio.run, args=(one_writer(name),)) for name in ("a", "b")]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    files = expand([log])
    assert len(files) > 1, "rotated while both were writing"
    result = verify(files, from_genesis=True)
    assert result.ok, result.describe()
    assert result.records == 2 * per_writer


@pytest.mark.parametrize("max_bytes", [0, 6_000])
def test_checkpoints_count_each_record_once_when_a_batch_moves_to_the_thread(
    tmp_path: Path, max_bytes: int
) -> None:
    """A rotation sends a batch from the loop to the writer thread; it must not be counted twice."""
    log = tmp_path / "audit.log"
    checkpointer = Checkpointer(SigningKey(Ed25519PrivateKey.generate()), every_records=10, instance="t")

    async def scenario() -> None:
        journal = Journal(JournalOptions(path=log, max_bytes=max_bytes, keep=50), checkpointer=checkpointer)
        writer = AuditWriter(journal)
        await writer.start()
        for _ in range(5):
            await asyncio.gather(*(writer.append(e) for e in numbered(7)))
        await writer.close()

    asyncio.run(scenario())
    files = expand([log])
    assert (len(files) > 1) == bool(max_bytes)
    checkpoints = [r for p in files for r in records(p) if r.get("type") == "checkpoint"]
    assert [(c["seq"], c["records"]) for c in checkpoints] == [(15, 14), (30, 14), (38, 7)]
    assert verify(files, from_genesis=True).ok
