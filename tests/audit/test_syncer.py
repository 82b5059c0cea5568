"""The fsync helper process: real fsyncs in a real child, answers matched to requests, and a
writer that keeps every record when the helper fails or goes away."""

from __future__ import annotations

import asyncio
import errno
import os
import signal
import socket
import sys
import threading
from collections.abc import AsyncIterator, Callable, Coroutine
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

from tests.audit.logs import entry, numbered, records
from webhook.audit import fsyncd
from webhook.audit.journal import AuditWriteError, Journal, JournalOptions
from webhook.audit.syncer import FsyncHelper, SyncerGone
from webhook.audit.verify import verify
from webhook.audit.writer import AuditWriter


def run(scenario: Callable[[], Coroutine[Any, Any, None]]) -> None:
    asyncio.run(scenario())


@asynccontextmanager
async def helper() -> AsyncIterator[FsyncHelper]:
    syncer = FsyncHelper()
    syncer.start()
    try:
        yield syncer
    finally:
        await syncer.close()


def helper_pid(syncer: FsyncHelper) -> int:
    assert syncer.pid is not None
    return syncer.pid


async def exited(pid: int) -> int:
    """The helper's exit status, once it has exited (it is our child: waitpid reaps it)."""
    _, status = await asyncio.get_running_loop().run_in_executor(None, os.waitpid, pid, 0)
    return os.waitstatus_to_exitcode(status)


@asynccontextmanager
async def writing(log: Path, syncer: FsyncHelper, thread_fsyncs: list[int]) -> AsyncIterator[AuditWriter]:
    """A started batch-mode writer with `syncer`; the thread's fsyncs are counted, not run."""
    journal = Journal(JournalOptions(path=log, fsync="batch"), fsync=thread_fsyncs.append)
    writer = AuditWriter(journal, syncer=syncer)
    await writer.start()
    try:
        yield writer
    finally:
        await writer.close()


def test_a_file_is_fsynced_and_the_callers_descriptor_stays_open(tmp_path: Path) -> None:
    async def scenario() -> None:
        fd = os.open(tmp_path / "log", os.O_WRONLY | os.O_CREAT, 0o600)
        try:
            async with helper() as syncer:
                os.write(fd, b"record\n")
                await syncer.fsync(fd)
                os.write(fd, b"still ours\n")  # the helper closed only its own copy
        finally:
            os.close(fd)
        assert (tmp_path / "log").read_bytes() == b"record\nstill ours\n"

    run(scenario)


def test_concurrent_answers_go_to_their_own_requests(tmp_path: Path) -> None:
    """fsync of a pipe fails with EINVAL: interleaved with files, each caller gets its own outcome."""

    async def scenario() -> None:
        file_fd = os.open(tmp_path / "log", os.O_WRONLY | os.O_CREAT, 0o600)
        read_end, write_end = os.pipe()
        pattern = [file_fd, read_end, file_fd, file_fd, read_end, file_fd, read_end, read_end, file_fd]
        try:
            async with helper() as syncer:
                outcomes = await asyncio.gather(*(syncer.fsync(fd) for fd in pattern), return_exceptions=True)
        finally:
            for fd in (file_fd, read_end, write_end):
                os.close(fd)
        failed = [isinstance(o, OSError) and o.errno == errno.EINVAL for o in outcomes]
        assert failed == [fd == read_end for fd in pattern], outcomes
        assert all(o is None for o, bad in zip(outcomes, failed, strict=True) if not bad)

    run(scenario)


def test_a_killed_helper_makes_callers_flush_another_way(tmp_path: Path) -> None:
    async def scenario() -> None:
        fd = os.open(tmp_path / "log", os.O_WRONLY | os.O_CREAT, 0o600)
        try:
            async with helper() as syncer:
                await syncer.fsync(fd)
                pid = helper_pid(syncer)
                os.kill(pid, signal.SIGKILL)
                assert await exited(pid) == -signal.SIGKILL
                with pytest.raises(SyncerGone):
                    await syncer.fsync(fd)
                with pytest.raises(SyncerGone, match="not running"):
                    await syncer.fsync(fd)
        finally:
            os.close(fd)

    run(scenario)


def test_the_helper_ignores_sigterm_and_exits_when_closed(tmp_path: Path) -> None:
    """SIGTERM to the pod's processes is for the server, which flushes its last batch first."""

    async def scenario() -> None:
        fd = os.open(tmp_path / "log", os.O_WRONLY | os.O_CREAT, 0o600)
        syncer = FsyncHelper()
        syncer.start()
        pid = helper_pid(syncer)
        try:
            await syncer.fsync(fd)  # the helper is up, with its signal handlers set
            os.kill(pid, signal.SIGTERM)
            await syncer.fsync(fd)
        finally:
            os.close(fd)
            await syncer.close()
        with pytest.raises(ChildProcessError):
            os.waitpid(pid, os.WNOHANG)  # close() waited for it: gone, and reaped
        with pytest.raises(SyncerGone):
            await syncer.fsync(0)

    run(scenario)


def test_a_helper_that_cannot_start_leaves_the_fsyncs_to_the_thread(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The server still starts and records; only the hand-off is the slower one."""
    monkeypatch.setattr(sys, "executable", str(tmp_path / "no-such-python"))
    log = tmp_path / "audit.log"
    thread_fsyncs: list[int] = []

    async def scenario() -> None:
        syncer = FsyncHelper()
        async with writing(log, syncer, thread_fsyncs) as writer:
            assert syncer.pid is None
            assert (await writer.append(entry("recorded")))["seq"] == 1

    run(scenario)
    assert len(thread_fsyncs) == 1
    assert [r["uid"] for r in records(log)] == ["recorded"]


class FailingHelper(FsyncHelper):
    """The helper's answer for a disk error, without a failing disk."""

    def __init__(self, error: BaseException) -> None:
        super().__init__()
        self.error = error
        self.calls = 0

    async def fsync(self, fd: int) -> None:
        self.calls += 1
        raise self.error


def test_batches_are_flushed_by_the_helper_not_the_thread(tmp_path: Path) -> None:
    log = tmp_path / "audit.log"
    thread_fsyncs: list[int] = []

    async def scenario() -> None:
        async with writing(log, FsyncHelper(), thread_fsyncs) as writer:
            for _ in range(3):
                await asyncio.gather(*(writer.append(e) for e in numbered(5)))

    run(scenario)
    assert thread_fsyncs == []
    assert verify([log], from_genesis=True).records == 15


def test_the_writer_keeps_recording_when_the_helper_dies(tmp_path: Path) -> None:
    log = tmp_path / "audit.log"
    thread_fsyncs: list[int] = []

    async def scenario() -> None:
        syncer = FsyncHelper()
        async with writing(log, syncer, thread_fsyncs) as writer:
            await writer.append(entry("before"))
            pid = helper_pid(syncer)
            os.kill(pid, signal.SIGKILL)
            await exited(pid)
            assert (await writer.append(entry("after")))["seq"] == 2

    run(scenario)
    assert len(thread_fsyncs) == 1, "the batch after the helper's death was flushed in the thread"
    assert [r["uid"] for r in records(log)] == ["before", "after"]


def test_a_failed_fsync_in_the_helper_fails_its_batch_and_the_log_keeps_none_of_it(tmp_path: Path) -> None:
    log = tmp_path / "audit.log"
    thread_fsyncs: list[int] = []

    async def scenario() -> None:
        syncer = FailingHelper(OSError(errno.EIO, os.strerror(errno.EIO)))
        async with writing(log, syncer, thread_fsyncs) as writer:
            outcomes = await asyncio.gather(*(writer.append(e) for e in numbered(4)), return_exceptions=True)
            assert all(isinstance(o, AuditWriteError) for o in outcomes), outcomes
            assert all(f"cannot flush the audit log {log}: Input/output error" in str(o) for o in outcomes)

    run(scenario)
    assert thread_fsyncs == [], "a failed fsync is not retried elsewhere: the disk said no"
    assert records(log) == []


@pytest.mark.parametrize("mode", ["always", "never"])
def test_only_batch_mode_uses_the_helper(tmp_path: Path, mode: str) -> None:
    syncer = FailingHelper(AssertionError("the helper was used"))

    async def scenario() -> None:
        journal = Journal(JournalOptions(path=tmp_path / "audit.log", fsync=mode))  # type: ignore[arg-type]
        writer = AuditWriter(journal, syncer=syncer)
        await writer.start()
        await asyncio.gather(*(writer.append(e) for e in numbered(3)))
        await writer.close()

    run(scenario)
    assert syncer.calls == 0
    assert syncer.pid is None, "no helper process was started"


def test_the_helper_answers_each_message_and_stops_at_end_of_stream(tmp_path: Path) -> None:
    """fsyncd.serve on a thread: a message without a descriptor is EBADF, not a crash."""
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    server = threading.Thread(target=fsyncd.serve, args=(theirs,))
    server.start()
    file_fd = os.open(tmp_path / "log", os.O_WRONLY | os.O_CREAT, 0o600)
    read_end, write_end = os.pipe()
    try:
        answers = []
        for fds in ([file_fd], [], [read_end], [file_fd]):
            socket.send_fds(ours, [fsyncd.REQUEST], fds)
            answers.append(ours.recv(1)[0])
    finally:
        ours.close()
        server.join(timeout=30)
        theirs.close()
        for fd in (file_fd, read_end, write_end):
            os.close(fd)
    assert answers == [0, errno.EBADF, errno.EINVAL, 0]
    assert not server.is_alive()
