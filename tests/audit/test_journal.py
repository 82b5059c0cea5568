"""The journal on disk: torn tails, rotation, shared files, fsync modes and a full disk."""

from __future__ import annotations

import fcntl
import logging
import os
from collections.abc import Callable
from pathlib import Path

import orjson
import pytest

from tests.audit.logs import entry, lines, numbered, records, rewrite, write_log
from webhook.audit.files import expand, family
from webhook.audit.journal import AuditLogCorrupt, AuditWriteError, FsyncMode, Journal, JournalOptions
from webhook.audit.verify import verify


def fsync_failing_once(error: OSError) -> Callable[[int], None]:
    """An fsync that raises `error` the first time, then succeeds."""
    failures = [error]

    def fsync(fd: int) -> None:
        if failures:
            raise failures.pop()

    return fsync


def test_a_torn_final_line_is_cut_reported_and_the_chain_continues(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    log = tmp_path / "audit.log"
    write_log(log, numbered(5))
    whole = log.read_bytes()
    torn = orjson.dumps(entry("torn"))[:37]
    log.write_bytes(whole + torn)
    assert not verify([log]).ok

    journal = Journal(JournalOptions(path=log))
    with caplog.at_level(logging.WARNING, logger="webhook.audit"):
        assert journal.open() == len(torn)
    assert any("torn" in r.getMessage() for r in caplog.records)
    assert log.read_bytes() == whole
    assert journal.head.seq == 5
    journal.append([entry("after-crash")])
    journal.close()

    result = verify([log], from_genesis=True)
    assert result.ok, result.describe()
    assert [r["seq"] for r in records(log)] == [1, 2, 3, 4, 5, 6]
    assert records(log)[-1]["uid"] == "after-crash"


def test_a_log_ending_in_garbage_refuses_to_start(tmp_path: Path) -> None:
    log = tmp_path / "audit.log"
    write_log(log, numbered(3))
    log.write_bytes(log.read_bytes() + b"not a record\n")
    with pytest.raises(AuditLogCorrupt, match="audit verify"):
        Journal(JournalOptions(path=log)).open()


@pytest.mark.parametrize("keep", [1, 3])
def test_rotation_keeps_the_chain_across_files(tmp_path: Path, keep: int) -> None:
    log = tmp_path / "audit.log"
    write_log(log, numbered(200), batch=7, max_bytes=20_000, keep=keep)
    files = family(log)
    assert len(files) == keep + 1
    assert all(p.stat().st_size <= 20_000 for p in files)
    result = verify(expand([log]))
    assert result.ok, result.describe()
    assert result.last_seq == 200
    assert result.first_seq is not None and result.first_seq > 1
    first_of = [records(p)[0] for p in files]
    last_of = [records(p)[-1] for p in files]
    for earlier, later in zip(last_of, first_of[1:], strict=False):
        assert later["prev"] == earlier["hash"]


def test_a_fresh_file_after_rotation_continues_from_the_rotated_one(tmp_path: Path) -> None:
    log = tmp_path / "audit.log"
    write_log(log, numbered(10))
    os.rename(log, tmp_path / "audit.log.1")
    write_log(log, numbered(3))
    assert [r["seq"] for r in records(log)] == [11, 12, 13]
    assert verify(expand([log]), from_genesis=True).ok


def test_two_writers_on_one_file_make_one_chain(tmp_path: Path) -> None:
    """Uvicorn workers are processes sharing one log: the flock and a re-read head keep one chain."""
    log = tmp_path / "audit.log"
    first, second = (
        Journal(JournalOptions(path=log, max_bytes=8_000)),
        Journal(JournalOptions(path=log, max_bytes=8_000)),
    )
    first.open()
    second.open()
    for i in range(40):
        (first if i % 3 else second).append([entry(f"uid-{i}")])
    first.close()
    second.close()
    result = verify(expand([log]), from_genesis=True)
    assert result.ok, result.describe()
    assert result.records == 40


@pytest.mark.parametrize(
    ("mode", "batches", "expected"),
    [("always", [5, 3], 8), ("batch", [5, 3], 2), ("never", [5, 3], 0)],
)
def test_fsync_modes(tmp_path: Path, mode: FsyncMode, batches: list[int], expected: int) -> None:
    calls: list[int] = []
    journal = Journal(JournalOptions(path=tmp_path / "audit.log", fsync=mode), fsync=calls.append)
    journal.open()
    for size in batches:
        journal.append(numbered(size))
    journal.close()
    assert len(calls) == expected


def test_a_full_disk_is_an_error_and_leaves_no_partial_record(tmp_path: Path) -> None:
    log = tmp_path / "audit.log"
    log.symlink_to("/dev/full")
    journal = Journal(JournalOptions(path=log))
    journal.open()
    with pytest.raises(AuditWriteError, match="No space left"):
        journal.append([entry("lost")])
    assert journal.head.seq == 0
    journal.close()


def test_a_failed_write_does_not_advance_the_chain(tmp_path: Path) -> None:
    log = tmp_path / "audit.log"
    journal = Journal(
        JournalOptions(path=log), fsync=fsync_failing_once(OSError(28, "No space left on device"))
    )
    journal.open()
    with pytest.raises(AuditWriteError, match="flush"):
        journal.append([entry("unflushed")])
    journal.append([entry("next")])
    journal.close()
    assert verify([log], from_genesis=True).ok
    assert [r["uid"] for r in records(log)] == ["next"]


def test_records_are_copied_to_the_copy_stream(tmp_path: Path) -> None:
    read_end, write_end = os.pipe()
    journal = Journal(JournalOptions(path=tmp_path / "audit.log", copy_fd=write_end))
    journal.open()
    journal.append(numbered(2))
    journal.close()
    os.close(write_end)
    copied = os.read(read_end, 1 << 20)
    os.close(read_end)
    assert copied == b"".join(lines(tmp_path / "audit.log"))


def test_rewrite_helper_roundtrip(tmp_path: Path) -> None:
    log = tmp_path / "audit.log"
    write_log(log, numbered(2))
    rewrite(log, lines(log))
    assert verify([log]).ok


def _lock_is_free(log: Path) -> bool:
    """What another process would find: flock conflicts between open files, even in one process."""
    fd = os.open(log.with_name(log.name + ".lock"), os.O_RDWR)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    finally:
        os.close(fd)
    return True


@pytest.mark.parametrize(("mode", "free"), [("batch", True), ("always", False)])
def test_only_always_mode_holds_the_lock_across_an_fsync(tmp_path: Path, mode: FsyncMode, free: bool) -> None:
    """The event loop may take the lock itself only because no batch-mode writer sits on it in an fsync."""
    log = tmp_path / "audit.log"
    seen: list[bool] = []
    journal = Journal(JournalOptions(path=log, fsync=mode), fsync=lambda fd: seen.append(_lock_is_free(log)))
    journal.open()
    journal.append(numbered(3))
    journal.close()
    assert seen
    assert set(seen) == {free}


@pytest.mark.parametrize(
    ("mode", "situation", "inline"),
    [
        ("batch", "idle", True),
        ("never", "idle", True),
        ("always", "idle", False),  # flushes every record under the lock
        ("batch", "locked elsewhere", False),
        ("never", "locked elsewhere", False),
        ("batch", "torn tail", False),  # the repair is flushed under the lock
        ("never", "torn tail", True),
        ("batch", "rotation due", False),  # so is the rotated file
        ("never", "rotation due", True),
    ],
)
def test_try_write_gives_way_rather_than_wait_for_the_lock_or_flush_under_it(
    tmp_path: Path, mode: FsyncMode, situation: str, inline: bool
) -> None:
    log = tmp_path / "audit.log"
    write_log(log, numbered(3))
    calls: list[int] = []
    max_bytes = log.stat().st_size + 10 if situation == "rotation due" else 0
    journal = Journal(JournalOptions(path=log, fsync=mode, max_bytes=max_bytes, keep=3), fsync=calls.append)
    journal.open()
    if situation == "torn tail":
        with log.open("ab") as stream:
            stream.write(orjson.dumps(entry("torn"))[:40])  # another writer died mid-line
    other = os.open(journal.lock_path, os.O_RDWR)
    if situation == "locked elsewhere":
        fcntl.flock(other, fcntl.LOCK_EX)
    before = [(p.name, p.read_bytes()) for p in family(log)]

    written = journal.try_write([entry("loop")])

    assert calls == [], "try_write never waits for the disk"
    os.close(other)
    if inline:
        assert written is not None
        journal.commit(written)
    else:
        assert written is None
        assert [(p.name, p.read_bytes()) for p in family(log)] == before, "nothing written or cut"
        journal.append([entry("loop")])
    journal.close()
    result = verify(expand([log]), from_genesis=True)
    assert result.ok, result.describe()
    assert result.last_seq == 4
    assert records(log)[-1]["uid"] == "loop"


@pytest.mark.parametrize(
    ("meanwhile", "kept"),
    [
        ("nothing", ["next"]),
        # Cutting our batch would break the other writer's chain: it stays, and an error says so.
        ("another writer appends", ["ours", "theirs", "next"]),
        ("another writer rotates", ["ours", "theirs", "next"]),
    ],
)
def test_a_batch_whose_flush_fails_is_taken_back_unless_another_writer_chained_on(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, meanwhile: str, kept: list[str]
) -> None:
    log = tmp_path / "audit.log"
    ours = Journal(JournalOptions(path=log), fsync=fsync_failing_once(OSError(5, "Input/output error")))
    max_bytes = 1 if meanwhile == "another writer rotates" else 0
    theirs = Journal(JournalOptions(path=log, max_bytes=max_bytes, keep=3), fsync=lambda fd: None)
    ours.open()
    theirs.open()
    written = ours.write([entry("ours")])
    if meanwhile != "nothing":
        theirs.append([entry("theirs")])
    with (
        caplog.at_level(logging.ERROR, logger="webhook.audit"),
        pytest.raises(AuditWriteError, match="flush"),
    ):
        ours.commit(written)
    assert any("stay in the log" in r.getMessage() for r in caplog.records) == (meanwhile != "nothing")
    ours.append([entry("next")])
    ours.close()
    theirs.close()
    result = verify(expand([log]), from_genesis=True)
    assert result.ok, result.describe()
    assert [r["uid"] for p in expand([log]) for r in records(p)] == kept


def test_a_taken_back_batch_replaced_by_one_of_the_same_size_is_noticed(tmp_path: Path) -> None:
    """Another writer that saw the batch before it was cut must not chain onto it: same size is not enough."""
    log = tmp_path / "audit.log"
    ours = Journal(JournalOptions(path=log), fsync=fsync_failing_once(OSError(5, "Input/output error")))
    ours.open()
    written = ours.write([entry("uid-a")])
    theirs = Journal(JournalOptions(path=log))
    theirs.open()  # its head is now the batch about to be taken back
    with pytest.raises(AuditWriteError):
        ours.commit(written)
    ours.append([entry("uid-b")])  # the same length as uid-a's line, at the same place
    theirs.append([entry("theirs")])
    ours.close()
    theirs.close()
    result = verify([log], from_genesis=True)
    assert result.ok, result.describe()
    assert [r["uid"] for r in records(log)] == ["uid-b", "theirs"]
