"""The log on disk: a base file plus rotated siblings FILE.1 (newest) … FILE.N (oldest).

Readers stream line by line, so a million records never sit in memory at once.
"""

from __future__ import annotations

import codecs
import contextlib
import os
import re
import stat
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import NamedTuple

import orjson

from webhook.errors import WebhookError

_ROTATED = re.compile(r"^(?P<base>.+)\.(?P<n>\d+)$")
TAIL_CHUNK = 64 * 1024
BLOCK = 4 * 1024 * 1024
PROBE = 64 * 1024  # how much of a file's start check_log reads for a record


class LogFileError(WebhookError):
    """A file the readers cannot read, or one that is not an audit log; the message names it."""


class Line(NamedTuple):
    path: Path
    number: int
    data: bytes
    complete: bool


def rotated(base: Path, index: int) -> Path:
    return base.with_name(f"{base.name}.{index}")


def family(base: Path) -> list[Path]:
    """The base file and its rotated siblings that exist, oldest first."""
    siblings: list[tuple[int, Path]] = []
    if base.parent.is_dir():
        prefix = base.name + "."
        with reading(base.parent, "cannot list the directory of the audit log"):
            entries = list(os.scandir(base.parent))
        for entry in entries:
            suffix = entry.name[len(prefix) :]
            if entry.name.startswith(prefix) and suffix.isdigit():
                siblings.append((int(suffix), Path(entry.path)))
    ordered = [path for _, path in sorted(siblings, reverse=True)]
    return ordered + ([base] if base.exists() else [])


def expand(paths: Iterable[Path]) -> list[Path]:
    """Named files in log order: a base file brings its rotated siblings; duplicates are dropped."""
    chosen: dict[Path, Path] = {}
    for path in paths:
        members = family(path) if not _ROTATED.match(path.name) else [path]
        for member in members or [path]:
            chosen.setdefault(member.resolve(), member)
    return sorted(chosen.values(), key=_log_order)


def read_blocks(path: Path, size: int = BLOCK) -> Iterator[bytes]:
    """Whole lines in blocks of about `size` bytes, for searching many lines at once.

    A torn last line (a write in progress) is left out.
    """
    with reading(path), path.open("rb") as stream:
        carry = b""
        while chunk := stream.read(size):
            data = carry + chunk
            end = data.rfind(b"\n") + 1
            carry = data[end:]
            if end:
                yield data[:end]


def read_file(path: Path) -> Iterator[Line]:
    with reading(path), path.open("rb") as stream:
        for number, data in enumerate(stream, start=1):
            yield Line(path, number, data, data.endswith(b"\n"))


@contextlib.contextmanager
def reading(path: Path, what: str = "cannot read the audit log") -> Iterator[None]:
    """An OSError while reading `path` becomes one line that names it (no traceback)."""
    try:
        yield
    except OSError as e:
        raise LogFileError(f"{what} {path}: {e.strerror or e}") from e


def check_log(path: Path) -> None:
    """Refuse what is not a readable audit log file: a missing path, a directory, or a file with
    no record among the lines of its first PROBE bytes. An empty file is an empty log.

    One bad line among records is left to the chain check, which names it as edited."""
    with reading(path):
        mode = _mode(path)
        if mode is None:
            raise LogFileError(f"no audit log at {path}: no such file")
        if stat.S_ISDIR(mode):
            raise LogFileError(f"{path} is a directory; name the log file in it (serve --audit-log FILE)")
        if not stat.S_ISREG(mode):
            raise LogFileError(f"{path} is not a regular file, so not an audit log")
        with path.open("rb") as stream:
            head = stream.read(PROBE)
    lines = head.split(b"\n")
    if len(head) == PROBE and len(lines) > 1:
        lines = lines[:-1]  # the probe may have cut the last one
    if not head or any(is_record(line) for line in lines):
        return
    number, first = next((n, line) for n, line in enumerate(lines, start=1) if line.strip())
    raise LogFileError(f"{path}:{number}: not an audit log (line {number} {_what_it_is(first)})")


def is_record(line: bytes) -> bool:
    """Whether a line holds what the writer writes: a JSON object with its type, seq and hash."""
    try:
        record = orjson.loads(line)
    except orjson.JSONDecodeError:
        return False
    return (
        isinstance(record, dict)
        and type(record.get("seq")) is int
        and isinstance(record.get("type"), str)
        and isinstance(record.get("hash"), str)
    )


def _what_it_is(line: bytes) -> str:
    if b"\0" in line or not _is_text(line):
        return "is binary data"
    try:
        value = orjson.loads(line)
    except orjson.JSONDecodeError:
        return "is not JSON"
    if not isinstance(value, dict):
        return "is JSON but not an object"
    return "is a JSON object without the type, seq and hash of an audit record"


def _mode(path: Path) -> int | None:
    try:
        return path.stat().st_mode
    except (FileNotFoundError, NotADirectoryError):
        return None


def _is_text(data: bytes) -> bool:
    """UTF-8, allowing a character cut at the end (the probe may have cut it)."""
    try:
        codecs.getincrementaldecoder("utf-8")().decode(data, final=False)
    except UnicodeDecodeError:
        return False
    return True


def first_seq(path: Path) -> int | None:
    try:
        with path.open("rb") as stream:
            record = orjson.loads(stream.readline())
    except (OSError, orjson.JSONDecodeError):
        return None
    seq = record.get("seq") if isinstance(record, dict) else None
    return seq if type(seq) is int else None


def last_line(fd: int, size: int) -> tuple[bytes, int]:
    """The last newline-terminated line of the first `size` bytes, and the offset just after it.

    Returns (b"", 0) when no line is complete. Bytes after the last newline are a torn write.
    """
    end = _last_newline(fd, size)
    if end < 0:
        return b"", 0
    start = _last_newline(fd, end) + 1
    return os.pread(fd, end + 1 - start, start), end + 1


def _last_newline(fd: int, size: int) -> int:
    position = size
    while position > 0:
        start = max(0, position - TAIL_CHUNK)
        chunk = os.pread(fd, position - start, start)
        index = chunk.rfind(b"\n")
        if index >= 0:
            return start + index
        position = start
    return -1


def _log_order(path: Path) -> tuple[int, int, str]:
    seq = first_seq(path)
    match = _ROTATED.match(path.name)
    age = -int(match.group("n")) if match else 0
    return (0, seq, "") if seq is not None else (1, age, str(path))
