"""The journal helper process (started by remote.py): builds, seals, writes and fsyncs records.

A worker's event loop sends each decision's facts (facts.py) with the request body it read;
this process, on the other core, parses the body again, builds the record, chains it, writes
and fsyncs it through an ordinary Journal (so the flock, rotation, torn-line repair and
checkpoints are those of every other writer), and only then answers. Whatever arrived while
a batch was being written is the next batch: one write and one fsync for all of it.

The protocol, over a SOCK_STREAM Unix socket, in both directions: frames of a 4-byte
big-endian length and a body. A request's body is two big-endian 4-byte lengths (of its JSON
header and of the AdmissionReview body), the header, `{"id": n, "entry": {...}}` (a record's
fields, sealed as they are) or `{"id": n}`, and, for a decision, the AdmissionReview body and
then its facts. The helper answers each batch it wrote with one JSON frame: `batch`, how many
records it wrote, `ok`, the ids of the decisions recorded, `records`, `[id, sealed record]` for
each entry, `failed`, `[id, error]` for each request that could not be written (the journal's
own error), and `unbuilt`, `[id, error]` for each decision whose record could not be built.
Before any request it sends `{"ok": [0]}` once its journal is open, or `{"failed": [[0,
error]]}` and exits.

The helper ignores SIGINT and SIGTERM and, when its socket closes, writes a last checkpoint
(with a signing key) and exits, so it never outlives its worker.
"""

from __future__ import annotations

import errno
import signal
import socket
import struct
import sys
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import orjson

from webhook.audit.chain import Record
from webhook.audit.checkpoint import Checkpointer
from webhook.audit.facts import decode_record
from webhook.audit.journal import AuditWriteError, FsyncMode, Journal, JournalOptions
from webhook.audit.signing import SigningKey

LENGTH = struct.Struct(">I")
PARTS = struct.Struct(">II")
MAX_BATCH = 1024
_RECEIVE_BYTES = 1 << 18


@dataclass(frozen=True)
class HelperConfig:
    """What the helper needs to open the worker's log as the worker would."""

    path: str
    fsync: FsyncMode
    max_bytes: int
    keep: int
    copy_fd: int | None = None
    signing_key: str | None = None
    checkpoint_records: int = 1000
    checkpoint_seconds: float = 60.0
    instance: str = ""

    def encode(self) -> str:
        return orjson.dumps(asdict(self)).decode()

    @classmethod
    def decode(cls, text: str) -> HelperConfig:
        return cls(**orjson.loads(text))

    def journal(self) -> Journal:
        options = JournalOptions(Path(self.path), self.fsync, self.max_bytes, self.keep, self.copy_fd)
        return Journal(options, checkpointer=self._checkpointer())

    def _checkpointer(self) -> Checkpointer | None:
        if self.signing_key is None:
            return None
        return Checkpointer(
            SigningKey.load(Path(self.signing_key)),
            every_records=self.checkpoint_records,
            every_seconds=self.checkpoint_seconds,
            instance=self.instance,
        )


def frame(body: bytes) -> bytes:
    return LENGTH.pack(len(body)) + body


def request_frame(header: bytes, body: bytes = b"", facts: bytes = b"") -> bytes:
    return frame(b"".join((PARTS.pack(len(header), len(body)), header, body, facts)))


class Frames:
    """Splits a byte stream into frame bodies."""

    def __init__(self) -> None:
        self._buffer = bytearray()

    def feed(self, data: bytes) -> list[bytes]:
        self._buffer += data
        found: list[bytes] = []
        start = 0
        while len(self._buffer) - start >= LENGTH.size:
            (size,) = LENGTH.unpack_from(self._buffer, start)
            end = start + LENGTH.size + size
            if end > len(self._buffer):
                break
            found.append(bytes(self._buffer[start + LENGTH.size : end]))
            start = end
        del self._buffer[:start]
        return found


def serve(channel: socket.socket, journal: Journal) -> None:
    """The helper's loop: each time the socket has frames, build, write and answer all of them."""
    frames = Frames()
    waiting: list[bytes] = []
    while True:
        try:
            data = channel.recv(_RECEIVE_BYTES)
        except OSError:
            return  # the worker is gone: nobody is left to answer
        if not data:
            return
        waiting += frames.feed(data)
        waiting += frames.feed(_drain(channel))
        while waiting:
            batch, waiting = waiting[:MAX_BATCH], waiting[MAX_BATCH:]
            try:
                channel.sendall(frame(_answer(batch, journal)))
            except OSError:
                return


def _drain(channel: socket.socket) -> bytes:
    """Whatever else has arrived, without waiting: it joins this batch."""
    chunks: list[bytes] = []
    while True:
        try:
            data = channel.recv(_RECEIVE_BYTES, socket.MSG_DONTWAIT)
        except (BlockingIOError, InterruptedError):
            break
        if not data:
            break
        chunks.append(data)
    return b"".join(chunks)


def _answer(batch: list[bytes], journal: Journal) -> bytes:
    """Build and write a batch; the one answer that settles all of its requests."""
    failed: list[tuple[int, str]] = []
    unbuilt: list[tuple[int, str]] = []
    ids: list[int] = []
    entries: list[Record] = []
    returned: list[bool] = []  # an entry's caller gets its sealed record; a decision's, only the news
    for message in batch:
        ident, entry, error, is_decision = _entry(message)
        if entry is None:
            unbuilt.append((ident, error))
        else:
            ids.append(ident)
            entries.append(entry)
            returned.append(not is_decision)
    answer: Record = {"failed": failed, "unbuilt": unbuilt}
    if not entries:
        return orjson.dumps(answer)
    try:
        records = journal.append(entries)
    except Exception as e:  # the journal takes a failed batch back out of the log
        text = str(e) if isinstance(e, AuditWriteError) else f"audit log failure: {e!r}"
        failed += [(ident, text) for ident in ids]
        return orjson.dumps(answer)
    answer["batch"] = len(ids)
    answer["ok"] = [ident for ident, whole in zip(ids, returned, strict=True) if not whole]
    answer["records"] = [(ident, records[i]) for i, ident in enumerate(ids) if returned[i]]
    return orjson.dumps(answer)


def _entry(message: bytes) -> tuple[int, Record | None, str, bool]:
    """The record a request asks for, or why it cannot be built (reported to its caller only),
    and whether it is a decision's. A decision's message holds, after the header, the
    AdmissionReview body and then the facts."""
    header_size, body_size = PARTS.unpack_from(message)
    start = PARTS.size
    header: dict[str, Any] = orjson.loads(message[start : start + header_size])
    ident = int(header["id"])
    if "entry" in header:
        return ident, header["entry"], "", False
    body_start = start + header_size
    facts_start = body_start + body_size
    try:
        # The worker checked these very bytes (admission.parse_review) before it reviewed them.
        request = orjson.loads(message[body_start:facts_start])["request"]
        return ident, decode_record(message[facts_start:], request), "", True
    except Exception as e:
        return ident, None, f"audit record could not be built: {type(e).__name__}", True


def main(argv: list[str]) -> int:
    # A Ctrl-C or a SIGTERM to the process group is for the server, which stops the helper
    # by closing the socket once its last record is answered.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    with socket.socket(fileno=int(argv[0])) as channel:
        try:
            journal = HelperConfig.decode(argv[1]).journal()
            journal.open()
        except Exception as e:
            channel.sendall(frame(orjson.dumps({"failed": [(0, f"{type(e).__name__}: {e}")]})))
            return errno.EIO
        channel.sendall(frame(orjson.dumps({"ok": [0]})))
        try:
            serve(channel, journal)
        finally:
            _close(journal)
    return 0


def _close(journal: Journal) -> None:
    try:
        journal.checkpoint()
    except Exception as e:  # nothing to answer any more; stderr is the worker's
        print(f"gpu-webhook audit helper: final checkpoint not written: {e}", file=sys.stderr)
    journal.close()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
