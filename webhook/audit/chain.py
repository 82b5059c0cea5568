"""The hash chain: canonical JSON, sealing a record into the chain, and checking a stream of records.

A record's `hash` is SHA-256 over its canonical JSON (without `hash`) followed by
its `prev`, the hash of the record before it. Because `seq` and `prev` are inside
the hashed text, an edit, a deletion or a swap shows up at the first record whose
link no longer holds. Pure: no files here (see files.py for reading them).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

import orjson

GENESIS = "0" * 64
SCHEMA_VERSION = 1
Record = dict[str, Any]
Signer = Callable[[bytes], str]
Reason = Literal["edited", "deleted", "reordered", "truncated", "signature"]
REORDER_LOOKAHEAD = 10_000


def canonical(value: Mapping[str, Any]) -> bytes:
    """Keys sorted, no whitespace, UTF-8: the same bytes for the same record on any machine."""
    return orjson.dumps(value, option=orjson.OPT_SORT_KEYS)


def record_hash(record: Mapping[str, Any]) -> str:
    body = {key: value for key, value in record.items() if key != "hash"}
    return hashlib.sha256(canonical(body) + str(record.get("prev", "")).encode()).hexdigest()


def signed_text(record: Mapping[str, Any]) -> bytes:
    """What a checkpoint's signature covers: everything but the signature and the hash."""
    return canonical({key: value for key, value in record.items() if key not in ("sig", "hash")})


def seal(fields: Mapping[str, Any], seq: int, prev: str, signer: Signer | None = None) -> Record:
    """Link `fields` into the chain after `prev`; a signer adds `sig` before the hash is taken."""
    record: Record = {**fields, "seq": seq, "prev": prev}
    if signer is not None:
        record["sig"] = signer(signed_text(record))
    record["hash"] = record_hash(record)
    return record


def line_of(record: Mapping[str, Any]) -> bytes:
    return canonical(record) + b"\n"


@dataclass(frozen=True)
class Location:
    file: str
    line: int

    def __str__(self) -> str:
        return f"{self.file}:{self.line}"


@dataclass(frozen=True)
class Problem:
    """The first bad record: where it is, which seq it has or should have, and why it is bad."""

    location: Location
    seq: int | None
    reason: Reason
    detail: str

    def __str__(self) -> str:
        seq = f" (seq {self.seq})" if self.seq is not None else ""
        return f"{self.location}{seq}: {self.reason}: {self.detail}"


@dataclass
class _Link:
    seq: int
    hash: str
    location: Location


SignatureCheck = Callable[[Record], str | None]


class ChainVerifier:
    """Feed records in file order; the first problem found is kept and later input ignored.

    A gap in `seq` is held open for a while: if the missing record turns up later
    the log was reordered, otherwise records were deleted.
    """

    def __init__(self, check_signature: SignatureCheck | None = None, *, from_genesis: bool = False) -> None:
        self.problem: Problem | None = None
        self.records = 0
        self.checkpoints = 0
        self.signatures = 0
        self.first_seq: int | None = None
        self.last: _Link | None = None
        self.last_checkpoint_seq: int | None = None
        self._check_signature = check_signature
        self._from_genesis = from_genesis
        self._gap: Problem | None = None
        self._gap_seen = 0
        self._file_start = False

    @property
    def ok(self) -> bool:
        return self.problem is None and self._gap is None

    def start_file(self) -> None:
        self._file_start = True

    def feed(self, location: Location, line: bytes, *, complete: bool = True) -> Record | None:
        """Check one line; returns the JSON object it holds (None when it holds none), so that a
        reader checking the chain as it goes parses each line once."""
        if not complete:
            detail = (
                "the final line is incomplete: cut, or torn by a crash (a running server may be writing it)"
            )
            self._fail(location, None, "truncated", detail)
            return None
        record = _parse(line)
        if self.problem is not None:
            return record
        if record is None or type(record.get("seq")) is not int:
            self._fail(location, None, "edited", "the line is not a JSON record with an integer seq")
            return record
        if self._gap is not None:
            self._watch_gap(record)
            return record
        self._link(location, record)
        self._file_start = False
        return record

    def finish(self) -> Problem | None:
        if self._gap is not None and self.problem is None:
            self.problem = self._gap
        return self.problem

    def _link(self, location: Location, record: Record) -> None:
        seq: int = record["seq"]
        if record_hash(record) != record.get("hash"):
            self._fail(location, seq, "edited", "its content does not match its hash")
            return
        if self.last is None and not self._starts(location, record):
            return
        if self.last is not None and not self._follows(location, record):
            return
        if record.get("type") == "checkpoint" and not self._checkpoint(location, record):
            return
        if self.first_seq is None:
            self.first_seq = seq
        self.records += 1
        self.last = _Link(seq, record["hash"], location)

    def _starts(self, location: Location, record: Record) -> bool:
        """Retention may have removed older files, so any start is fine unless genesis is required."""
        if self._from_genesis and (record["seq"] != 1 or record.get("prev") != GENESIS):
            self._fail(location, 1, "truncated", f"the log starts at seq {record['seq']}, not at seq 1")
            return False
        return True

    def _follows(self, location: Location, record: Record) -> bool:
        assert self.last is not None
        seq, expected = record["seq"], self.last.seq + 1
        if seq > expected:
            where = "the file before it ends early" if self._file_start else "records are missing"
            reason: Reason = "truncated" if self._file_start else "deleted"
            self._gap = Problem(location, expected, reason, f"seq {expected}..{seq - 1} not found; {where}")
            self._gap_seen = 0
            return False
        if seq < expected:
            self._fail(location, seq, "reordered", f"seq {seq} comes after seq {self.last.seq}")
            return False
        if record.get("prev") != self.last.hash:
            detail = f"its hash no longer matches the prev of seq {seq} at {location}"
            self._fail(self.last.location, self.last.seq, "edited", detail)
            return False
        return True

    def _checkpoint(self, location: Location, record: Record) -> bool:
        self.checkpoints += 1
        if self._check_signature is None:
            return True
        error = self._check_signature(record)
        if error is not None:
            self._fail(location, record["seq"], "signature", error)
            return False
        self.signatures += 1
        self.last_checkpoint_seq = record["seq"]
        return True

    def _watch_gap(self, record: Record) -> None:
        assert self._gap is not None and self._gap.seq is not None
        self._gap_seen += 1
        if record["seq"] <= self._gap.seq:
            gap = self._gap
            self._gap = None
            self._fail(gap.location, gap.seq, "reordered", f"seq {gap.seq} appears later in the log")
        elif self._gap_seen >= REORDER_LOOKAHEAD:
            self.problem, self._gap = self._gap, None

    def _fail(self, location: Location, seq: int | None, reason: Reason, detail: str) -> None:
        if self.problem is None:
            self.problem = Problem(location, seq, reason, detail)


def _parse(line: bytes) -> Record | None:
    try:
        record = orjson.loads(line)
    except orjson.JSONDecodeError:
        return None
    return record if isinstance(record, dict) else None
