"""The append-only log file: chain head, writes, fsync, rotation and crash recovery.

Synchronous and thread-safe; writer.py drives it from one thread. Several processes
(uvicorn workers) may share one log: each batch is written under an exclusive
flock on FILE.lock, after re-reading the head if another process moved it, so
there is one chain however many writers there are.
"""

from __future__ import annotations

import contextlib
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
        self._fd = -1
        self._lock_fd = -1
        self._end = -1

    def open(self) -> int:
        """Open the log and find the head; returns how many torn bytes were cut from its end."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock_fd = os.open(self.lock_path, os.O_RDWR | os.O_CREAT, FILE_MODE)
        with self._mutex, self._locked():
            self._reopen()
            return self._sync()

    @property
    def lock_path(self) -> Path:
        return self.path.with_name(self.path.name + ".lock")

    def append(self, entries: Sequence[Mapping[str, Any]]) -> list[Record]:
        """Seal, write and (per the fsync mode) flush a batch; return the sealed records."""
        with self._mutex, self._locked():
            self._sync()
            records = self._seal(entries)
            if self._checkpointer is not None and self._checkpointer.note(len(entries)):
                records.append(self._seal_checkpoint(records[-1] if records else None))
            self._write(records)
            return records

    def checkpoint(self) -> Record | None:
        """Write a checkpoint now if records were written since the last one (at shutdown)."""
        if self._checkpointer is None or self._checkpointer.pending == 0:
            return None
        with self._mutex, self._locked():
            self._sync()
            record = self._seal_checkpoint(None)
            self._write([record])
            return record

    def close(self) -> None:
        with self._mutex:
            for fd in (self._fd, self._lock_fd):
                if fd >= 0:
                    os.close(fd)
            self._fd = self._lock_fd = -1

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

    def _write(self, records: list[Record]) -> None:
        lines = [line_of(record) for record in records]
        size = sum(len(line) for line in lines)
        if self.options.max_bytes and self._end > 0 and self._end + size > self.options.max_bytes:
            self._rotate()
        start = self._end
        try:
            self._write_lines(lines)
        except AuditWriteError:
            self._undo(start)
            raise
        self.head = Head(records[-1]["seq"], records[-1]["hash"])
        self._copy(lines)

    def _write_lines(self, lines: list[bytes]) -> None:
        if self.options.fsync == "always":
            for line in lines:
                self._write_bytes(line)
                self._flush()
        else:
            self._write_bytes(b"".join(lines))
            if self.options.fsync == "batch":
                self._flush()

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
        """Cut a failed batch: its callers hear of the failure, so the log must not claim it."""
        try:
            os.ftruncate(self._fd, start)
            self._end = start
        except OSError:
            self._end = -1

    def _flush(self) -> None:
        try:
            self._fsync(self._fd)
        except OSError as e:
            raise AuditWriteError(f"cannot flush the audit log {self.path}: {e.strerror or e}") from e

    def _copy(self, lines: list[bytes]) -> None:
        if self.options.copy_fd is None:
            return
        with contextlib.suppress(OSError):
            for line in lines:
                os.write(self.options.copy_fd, line)

    def _sync(self) -> int:
        """Catch up with the file: another writer may have appended, rotated or died mid-line."""
        try:
            current = os.stat(self.path).st_ino
        except FileNotFoundError:
            current = None
        if current != os.fstat(self._fd).st_ino:
            self._reopen()
        size = os.fstat(self._fd).st_size
        return 0 if size == self._end else self._load_head(size)

    def _load_head(self, size: int) -> int:
        line, end = last_line(self._fd, size)
        torn = size - end
        if torn:
            log.warning(
                "audit log ends with a torn line; cutting it and continuing from the last whole record",
                extra={"file": str(self.path), "torn_bytes": torn},
            )
            self._cut(end)
        self._end = end
        self.head = _head_of(line, self.path) if line else self._head_before()
        return torn

    def _cut(self, end: int) -> None:
        try:
            os.ftruncate(self._fd, end)
            if self.options.fsync != "never":
                self._flush()
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
            self._flush()
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
