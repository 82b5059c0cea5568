"""The append-only log file: chain head, writes, fsync, rotation and crash recovery.

Synchronous and thread-safe. Several processes (uvicorn workers) may share one log:
each batch is written under an exclusive flock on FILE.lock, after re-reading the
head if another process moved it, so there is one chain however many writers there are.

An append has two halves. `write` seals and writes a batch under the lock; in batch
mode `flush` then fsyncs it after the lock is released, so no writer holds the lock
across a batch's fsync and `try_write` can take it on the event loop without waiting
(writer.py). Only `always` mode, a torn-line repair and a rotation still flush under
the lock, and `try_write` gives way to a thread when it meets them. A failed flush
takes its batch back out of the log (`take_back`) unless another writer has already
chained records after it; see there.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import logging
import os
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import orjson

from webhook.audit.chain import GENESIS, Record, line_of, seal
from webhook.audit.checkpoint import Checkpointer
from webhook.audit.files import last_line, rotated
from webhook.errors import WebhookError

log = logging.getLogger("webhook.audit")

FsyncMode = Literal["always", "batch", "never"]
FILE_MODE = 0o640


class AuditWriteError(WebhookError):
    """The log cannot be written: disk full, permissions, a vanished directory."""


class AuditLogCorrupt(WebhookError):
    """The log ends in something that is not a record, so the chain cannot be continued."""


@dataclass(frozen=True)
class JournalOptions:
    path: Path
    fsync: FsyncMode = "batch"
    max_bytes: int = 0
    keep: int = 5
    copy_fd: int | None = None


@dataclass(frozen=True)
class Head:
    seq: int
    hash: str


@dataclass
class Written:
    """A batch in the file, and in the chain, whose callers must not hear of it yet.

    In batch mode `fd` is a duplicate of the log's descriptor (a reopen meanwhile cannot
    close it) for `flush`; `settle` or `take_back` closes it. -1 when nothing is left to flush.
    """

    records: list[Record]
    lines: list[bytes]
    start: int
    end: int
    before: Head
    fd: int = -1

    @property
    def needs_flush(self) -> bool:
        return self.fd >= 0


class _GiveWay(Exception):
    """try_write meets work that would flush under the lock (a torn-line repair, a rotation)."""


class Journal:
    def __init__(
        self,
        options: JournalOptions,
        *,
        checkpointer: Checkpointer | None = None,
        fsync: Callable[[int], None] = os.fsync,
    ) -> None:
        self.options = options
        self.path = options.path
        self.head = Head(0, GENESIS)
        self._checkpointer = checkpointer
        self._fsync = fsync
        self._mutex = threading.Lock()
        self._copy_mutex = threading.Lock()
        self._fd = -1
        self._lock_fd = -1
        self._end = -1
        self._tail = b""  # the last line at _end: proves the file is still the one we last saw

    def open(self) -> int:
        """Open the log and find the head; returns how many torn bytes were cut from its end."""
        _make_directory(self.path.parent)
        self._lock_fd = os.open(self.lock_path, os.O_RDWR | os.O_CREAT, FILE_MODE)
        with self._mutex, self._locked():
            self._reopen()
            return self._sync(quick=False)

    @property
    def lock_path(self) -> Path:
        return self.path.with_name(self.path.name + ".lock")

    def append(self, entries: Sequence[Mapping[str, Any]]) -> list[Record]:
        """Seal, write and (per the fsync mode) flush a batch; return the sealed records.

        Blocking: for any thread but the event loop's (which uses try_write, flush, settle).
        """
        return self.commit(self.write(entries))

    def write(self, entries: Sequence[Mapping[str, Any]]) -> Written:
        """The first half of append: seal and write a batch under the lock (waiting for it)."""
        with self._mutex, self._locked():
            return self._write_batch(entries, quick=False)

    def try_write(self, entries: Sequence[Mapping[str, Any]]) -> Written | None:
        """write, for the event loop: None, with nothing written, rather than wait for the lock or
        flush under it (`always` mode; in batch mode, a torn-line repair or a rotation)."""
        if self.options.fsync == "always" or not self._mutex.acquire(blocking=False):
            return None
        try:
            try:
                fcntl.flock(self._lock_fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                return None
            try:
                return self._write_batch(entries, quick=True)
            except _GiveWay:
                return None
            finally:
                fcntl.flock(self._lock_fd, fcntl.LOCK_UN)
        finally:
            self._mutex.release()

    def flush(self, written: Written) -> None:
        """The fsync of a written batch (batch mode), outside the lock; AuditWriteError if it fails."""
        if written.needs_flush:
            self._flush(written.fd)

    def settle(self, written: Written) -> list[Record]:
        """A written batch is flushed (or needs no flush): release it; return its records."""
        self._release(written)
        self._copy(written.lines)
        return written.records

    def commit(self, written: Written) -> list[Record]:
        """flush, then settle; a failed flush takes the batch back and raises."""
        try:
            self.flush(written)
        except BaseException:
            self.take_back(written)
            raise
        return self.settle(written)

    def take_back(self, written: Written) -> None:
        """Cut a batch whose flush failed: its callers hear of the failure, so the log must not claim it.

        Blocking (takes the lock). The batch is cut if it is still the end of the log. If
        another writer has chained records after it (it could, between our write and our
        failed fsync), cutting would break their chain and lose records that may already be
        acknowledged, so the batch stays, and an error names its seq range: the log then holds
        records whose callers were told they were not recorded (as after a timeout). A writer
        in another process usually gets the same disk error from its own fsync, and cuts its batch.
        """
        if not written.needs_flush:
            return
        try:
            with self._mutex, self._locked():
                self._cut_back(written)
        finally:
            self._release(written)

    def checkpoint(self) -> Record | None:
        """Write a checkpoint now if records were written since the last one (at shutdown)."""
        if self._checkpointer is None or self._checkpointer.pending == 0:
            return None
        with self._mutex, self._locked():
            self._sync(quick=False)
            written = self._put([self._seal_checkpoint(None)], quick=False)
        return self.commit(written)[0]

    def close(self) -> None:
        with self._mutex:
            for fd in (self._fd, self._lock_fd):
                if fd >= 0:
                    os.close(fd)
            self._fd = self._lock_fd = -1

    def _write_batch(self, entries: Sequence[Mapping[str, Any]], *, quick: bool) -> Written:
        self._sync(quick=quick)
        records = self._seal(entries)
        checkpointer = self._checkpointer
        state = checkpointer.state() if checkpointer is not None else None
        if checkpointer is not None and checkpointer.note(len(entries)):
            records.append(self._seal_checkpoint(records[-1] if records else None))
        try:
            return self._put(records, quick=quick)
        except _GiveWay:
            if checkpointer is not None and state is not None:
                checkpointer.restore(state)  # the batch is retried in a thread: count it once
            raise

    def _seal(self, entries: Sequence[Mapping[str, Any]]) -> list[Record]:
        records: list[Record] = []
        seq, prev = self.head.seq, self.head.hash
        for entry in entries:
            seq += 1
            record = seal(entry, seq, prev)
            prev = record["hash"]
            records.append(record)
        return records

    def _seal_checkpoint(self, after: Record | None) -> Record:
        assert self._checkpointer is not None
        seq, prev = (after["seq"], after["hash"]) if after else (self.head.seq, self.head.hash)
        return seal(self._checkpointer.fields(), seq + 1, prev, signer=self._checkpointer.sign)

    def _put(self, records: list[Record], *, quick: bool) -> Written:
        lines = [line_of(record) for record in records]
        size = sum(len(line) for line in lines)
        if self.options.max_bytes and self._end > 0 and self._end + size > self.options.max_bytes:
            if quick and self.options.fsync != "never":
                raise _GiveWay
            self._rotate()
        fd = self._dup() if self.options.fsync == "batch" else -1
        start, before = self._end, self.head
        try:
            self._write_lines(lines)
        except AuditWriteError:
            self._undo(start)
            if fd >= 0:
                os.close(fd)
            raise
        self.head = Head(records[-1]["seq"], records[-1]["hash"])
        self._tail = lines[-1]
        return Written(records, lines, start, self._end, before, fd)

    def _dup(self) -> int:
        try:
            return os.dup(self._fd)
        except OSError as e:
            raise AuditWriteError(f"cannot write the audit log {self.path}: {e.strerror or e}") from e

    def _write_lines(self, lines: list[bytes]) -> None:
        if self.options.fsync == "always":
            for line in lines:
                self._write_bytes(line)
                self._flush(self._fd)
        else:
            self._write_bytes(b"".join(lines))  # batch mode: flush() does the fsync, after the lock

    def _write_bytes(self, data: bytes) -> None:
        try:
            view = memoryview(data)
            while view:
                written = os.write(self._fd, view)
                view = view[written:]
                self._end += written
        except OSError as e:
            raise AuditWriteError(f"cannot write the audit log {self.path}: {e.strerror or e}") from e

    def _undo(self, start: int) -> None:
        """Cut a failed write (under the lock, so no other writer has seen it)."""
        try:
            os.ftruncate(self._fd, start)
            self._end = start
        except OSError:
            self._end = -1

    def _cut_back(self, written: Written) -> None:
        where = {"file": str(self.path), "first_seq": written.records[0]["seq"]}
        where["last_seq"] = written.records[-1]["seq"]
        self._end = -1  # whatever happens here, the next batch re-reads the head from the file
        try:
            stat = os.fstat(written.fd)
            if stat.st_size != written.end or os.stat(self.path).st_ino != stat.st_ino:
                log.error(
                    "audit records whose flush failed stay in the log: another writer has chained "
                    "records after them; their callers were told they were not recorded",
                    extra=where,
                )
                return
            os.ftruncate(written.fd, written.start)
        except OSError as e:
            log.error("audit records whose flush failed could not be cut", extra={**where, "error": str(e)})
            return
        self.head = written.before

    def _release(self, written: Written) -> None:
        if written.needs_flush:
            with contextlib.suppress(OSError):
                os.close(written.fd)
            written.fd = -1

    def _flush(self, fd: int) -> None:
        try:
            self._fsync(fd)
        except OSError as e:
            raise self.flush_error(e) from e

    def flush_error(self, error: OSError) -> AuditWriteError:
        """What a failed fsync of this log reports, wherever the fsync ran."""
        return AuditWriteError(f"cannot flush the audit log {self.path}: {error.strerror or error}")

    def _copy(self, lines: list[bytes]) -> None:
        if self.options.copy_fd is None:
            return
        with self._copy_mutex, contextlib.suppress(OSError):
            for line in lines:
                os.write(self.options.copy_fd, line)

    def _sync(self, *, quick: bool) -> int:
        """Catch up with the file: another writer may have appended, rotated or died mid-line."""
        try:
            current = os.stat(self.path).st_ino
        except FileNotFoundError:
            current = None
        if current != os.fstat(self._fd).st_ino:
            self._reopen()
        size = os.fstat(self._fd).st_size
        if size == self._end and self._still_ends_with_tail(size):
            return 0
        return self._load_head(size, quick=quick)

    def _still_ends_with_tail(self, size: int) -> bool:
        """Same size is not enough: a batch taken back and another of the same length would match."""
        if len(self._tail) > size:
            return False
        return not self._tail or os.pread(self._fd, len(self._tail), size - len(self._tail)) == self._tail

    def _load_head(self, size: int, *, quick: bool) -> int:
        line, end = last_line(self._fd, size)
        torn = size - end
        if torn:
            if quick and self.options.fsync != "never":
                raise _GiveWay
            log.warning(
                "audit log ends with a torn line; cutting it and continuing from the last whole record",
                extra={"file": str(self.path), "torn_bytes": torn},
            )
            self._cut(end)
        self._end = end
        self._tail = line
        self.head = _head_of(line, self.path) if line else self._head_before()
        return torn

    def _cut(self, end: int) -> None:
        try:
            os.ftruncate(self._fd, end)
            if self.options.fsync != "never":
                self._flush(self._fd)
        except OSError as e:
            raise AuditWriteError(f"cannot repair the audit log {self.path}: {e.strerror or e}") from e

    def _head_before(self) -> Head:
        """An empty file continues the chain of the newest rotated file, if there is one."""
        previous = rotated(self.path, 1)
        try:
            fd = os.open(previous, os.O_RDONLY)
        except FileNotFoundError:
            return Head(0, GENESIS)
        try:
            line, _ = last_line(fd, os.fstat(fd).st_size)
        finally:
            os.close(fd)
        return _head_of(line, previous) if line else Head(0, GENESIS)

    def _rotate(self) -> None:
        if self.options.fsync != "never":
            self._flush(self._fd)  # under the lock: no record may reach the new file before these
        keep = self.options.keep
        with contextlib.suppress(FileNotFoundError):
            os.unlink(rotated(self.path, keep))
        for index in range(keep - 1, 0, -1):
            with contextlib.suppress(FileNotFoundError):
                os.rename(rotated(self.path, index), rotated(self.path, index + 1))
        os.rename(self.path, rotated(self.path, 1))
        self._reopen()
        self._end = 0
        if self.options.fsync != "never":
            _fsync_directory(self.path.parent)
        log.info("audit log rotated", extra={"file": str(self.path), "seq": self.head.seq})

    def _reopen(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
        flags = os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC
        try:
            self._fd = os.open(self.path, flags, FILE_MODE)
        except OSError as e:
            raise AuditWriteError(f"cannot open the audit log {self.path}: {e.strerror or e}") from e
        self._end = -1
        self._tail = b""

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        fcntl.flock(self._lock_fd, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(self._lock_fd, fcntl.LOCK_UN)


def _head_of(line: bytes, path: Path) -> Head:
    try:
        record = orjson.loads(line)
        return Head(int(record["seq"]), str(record["hash"]))
    except (orjson.JSONDecodeError, KeyError, TypeError, ValueError) as e:
        raise AuditLogCorrupt(
            f"{path} ends with a line that is not an audit record; move the file aside "
            "(and check it with `gpu-webhook audit verify`) before starting again"
        ) from e


def _fsync_directory(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _make_directory(directory: Path) -> None:
    """mkdir -p, saying what is wrong when a file stands where a directory must be (mkdir's own
    "File exists" reads as if the log were there already)."""
    try:
        directory.mkdir(parents=True, exist_ok=True)
    except FileExistsError as e:
        reason = "a file stands where the audit log's directory must be"
        raise NotADirectoryError(errno.ENOTDIR, reason, e.filename) from e
