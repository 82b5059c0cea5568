"""The log on disk: a base file plus rotated siblings FILE.1 (newest) … FILE.N (oldest).

Readers stream line by line, so a million records never sit in memory at once.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import NamedTuple

import orjson

_ROTATED = re.compile(r"^(?P<base>.+)\.(?P<n>\d+)$")
TAIL_CHUNK = 64 * 1024
BLOCK = 4 * 1024 * 1024


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
        for entry in os.scandir(base.parent):
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
    with path.open("rb") as stream:
        carry = b""
        while chunk := stream.read(size):
            data = carry + chunk
            end = data.rfind(b"\n") + 1
            carry = data[end:]
            if end:
                yield data[:end]


def read_file(path: Path) -> Iterator[Line]:
    with path.open("rb") as stream:
        for number, data in enumerate(stream, start=1):
            yield Line(path, number, data, data.endswith(b"\n"))


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
