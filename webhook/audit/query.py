"""Streaming readers: select records from any number of (rotated) files without loading them all.

A filter first rejects lines by a plain byte search on the canonical JSON, so most
non-matching lines are never parsed; this is what keeps a query over a million
records fast.
"""

from __future__ import annotations

import datetime as dt
import fnmatch
import functools
import os
import re
import time
from collections import deque
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from webhook.audit.chain import Record
from webhook.audit.files import check_log, expand, last_line, read_blocks, reading
from webhook.audit.record import rfc3339
from webhook.errors import WebhookError

DECISIONS = ("allowed", "denied", "warned")
_RELATIVE = re.compile(r"^(\d+(?:\.\d+)?)([smhd])$")
_UNIT_SECONDS = {"s": 1, "m": 60, "h": 3600, "d": 86400}
_BACK_CHUNK = 64 * 1024


class QueryError(WebhookError):
    """A query option or file the reader cannot use."""


@dataclass(frozen=True)
class Filter:
    """Every criterion that is set must hold; globs (* ? [..]) are allowed in names."""

    since: str | None = None
    until: str | None = None
    namespace: str | None = None
    user: str | None = None
    decision: str | None = None
    policy: str | None = None
    kind: str | None = None
    uid: str | None = None
    endpoint: str | None = None
    record_type: str | None = "decision"

    def maybe(self, data: bytes) -> bool:
        """A cheap necessary condition on raw bytes (a line or a whole block of lines)."""
        return all(needle in data for needle in self.needles)

    @functools.cached_property
    def needles(self) -> tuple[bytes, ...]:
        """The exact `"key":"value"` texts every matching line contains (canonical JSON)."""
        return tuple(_needle(key, value) for key, value in self._exact_fields())

    def matches(self, record: Record) -> bool:
        if self.since is not None or self.until is not None:
            moment = str(record.get("time", ""))
            if (self.since is not None and moment < self.since) or (
                self.until is not None and moment >= self.until
            ):
                return False
        for key, wanted in self._criteria:
            if not _same(wanted, record.get(key)):
                return False
        return self.policy is None or any(_same(self.policy, p) for p in policies(record))

    @functools.cached_property
    def _criteria(self) -> tuple[tuple[str, str], ...]:
        fields = {
            "type": self.record_type,
            "namespace": self.namespace,
            "user": self.user,
            "decision": self.decision,
            "kind": self.kind,
            "uid": self.uid,
            "endpoint": self.endpoint,
        }
        return tuple((key, value) for key, value in fields.items() if value is not None)

    def _exact_fields(self) -> Iterator[tuple[str, str]]:
        named = [*self._criteria, *([("policy", self.policy)] if self.policy is not None else [])]
        for key, value in named:
            if not _is_glob(value):
                yield key, value


def policies(record: Record) -> list[str]:
    findings = record.get("findings")
    if not isinstance(findings, list):
        return []
    return [str(f.get("policy", "")) for f in findings if isinstance(f, dict)]


def parse_time(text: str, *, now: dt.datetime | None = None) -> str:
    """RFC 3339, a date, or an age such as 15m, 2h, 7d; returned in the records' own format."""
    match = _RELATIVE.match(text.strip())
    if match:
        age = float(match.group(1)) * _UNIT_SECONDS[match.group(2)]
        return rfc3339((now or dt.datetime.now(dt.UTC)) - dt.timedelta(seconds=age))
    try:
        moment = dt.datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
    except ValueError as e:
        raise QueryError(f"not a time: {text!r} (use RFC 3339, a date, or an age like 15m, 2h, 7d)") from e
    return rfc3339(moment if moment.tzinfo else moment.replace(tzinfo=dt.UTC))


def log_files(paths: Iterable[Path]) -> list[Path]:
    """The named files and their rotated siblings, in log order, each checked to be an audit log."""
    named = list(paths)
    files = expand(named)
    if not files:
        raise QueryError(f"no audit log at {', '.join(str(p) for p in named)}")
    for path in files:
        check_log(path)
    return files


def log_groups(paths: Iterable[Path]) -> list[list[Path]]:
    """Each named log with its rotated siblings, in log order: one hash chain each, since the
    replicas of a StatefulSet each write their own (a file named twice is read once)."""
    seen: set[Path] = set()
    groups: list[list[Path]] = []
    for path in paths:
        files = [member for member in log_files([path]) if member.resolve() not in seen]
        seen.update(member.resolve() for member in files)
        if files:
            groups.append(files)
    return groups


def select(paths: Iterable[Path], where: Filter) -> Iterator[Record]:
    """Matching records in log order; a torn last line (a write in progress) is skipped."""
    return select_files(log_files(paths), where)


def select_files(files: Iterable[Path], where: Filter) -> Iterator[Record]:
    """Matching records of these files, in the order given, without checking the chain."""
    for path in files:
        for block in read_blocks(path):
            if not where.maybe(block):
                continue
            for data in block.split(b"\n"):
                if where.maybe(data):
                    record = _load(data)
                    if record is not None and where.matches(record):
                        yield record


@dataclass(frozen=True)
class Position:
    """Just after the last whole line of a file, so `last` and `follow` neither miss nor repeat one."""

    inode: int
    offset: int


def position(path: Path) -> Position:
    with reading(path):
        fd = os.open(path, os.O_RDONLY)
        try:
            stat = os.fstat(fd)
            return Position(stat.st_ino, last_line(fd, stat.st_size)[1])
        finally:
            os.close(fd)


def last(paths: Iterable[Path], where: Filter, count: int, *, upto: Position | None = None) -> list[Record]:
    """The last `count` matching records, read backwards from the end of the newest file."""
    found: deque[Record] = deque()
    for path in reversed(log_files(paths)):
        end = upto.offset if upto is not None and os.stat(path).st_ino == upto.inode else None
        for data in _lines_backwards(path, end):
            record = _load(data) if where.maybe(data) else None
            if record is not None and where.matches(record):
                found.appendleft(record)
                if len(found) >= count:
                    return list(found)
    return list(found)


def follow(
    base: Path, where: Filter, *, start: Position | None = None, poll_seconds: float = 0.5
) -> Iterator[Record]:
    """New records as they are appended, across rotations, until interrupted."""
    stream, inode = _open_at(base, start)
    pending = b""
    while True:
        chunk = stream.read()
        if chunk:
            pending += chunk
            *whole, pending = pending.split(b"\n")
            for data in whole:
                record = _load(data) if where.maybe(data) else None
                if record is not None and where.matches(record):
                    yield record
            continue
        if _rotated_away(base, inode):
            stream.close()
            with reading(base):
                stream, inode = open(base, "rb"), os.stat(base).st_ino  # noqa: SIM115
            continue
        time.sleep(poll_seconds)


def _open_at(base: Path, start: Position | None) -> tuple[Any, int]:
    check_log(base)
    with reading(base):
        stream = open(base, "rb")  # noqa: SIM115
    inode = os.fstat(stream.fileno()).st_ino
    if start is not None and start.inode == inode:
        stream.seek(start.offset)
    else:
        stream.seek(0, os.SEEK_END)
    return stream, inode


def _rotated_away(base: Path, inode: int) -> bool:
    try:
        return os.stat(base).st_ino != inode
    except FileNotFoundError:
        return False


def _lines_backwards(path: Path, end: int | None = None) -> Iterator[bytes]:
    """Whole lines from `end` (default: the end of the file) back to the start; a torn last one is skipped."""
    with reading(path), path.open("rb") as stream:
        position = stream.seek(0, os.SEEK_END) if end is None else end
        carry = b""
        at_end = True
        while position > 0:
            start = max(0, position - _BACK_CHUNK)
            stream.seek(start)
            parts = (stream.read(position - start) + carry).split(b"\n")
            position = start
            carry, complete = parts[0], parts[1:]
            if at_end and complete:
                complete, at_end = complete[:-1], False
            yield from reversed(complete)
        if carry and not at_end:
            yield carry


def _load(data: bytes) -> Record | None:
    try:
        record = orjson.loads(data)
    except orjson.JSONDecodeError:
        return None
    return record if isinstance(record, dict) else None


def _needle(key: str, value: str) -> bytes:
    return b'"' + key.encode() + b'":' + orjson.dumps(value)


def _is_glob(value: str) -> bool:
    return any(ch in value for ch in "*?[")


def _same(wanted: str, actual: Any) -> bool:
    if actual == wanted:
        return True
    return isinstance(actual, str) and _is_glob(wanted) and fnmatch.fnmatchcase(actual, wanted)
