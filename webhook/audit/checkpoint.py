"""When to write a signed checkpoint, and what it says.

A checkpoint is an ordinary chained record whose `prev` is the head it vouches for;
its Ed25519 signature covers that head, so every record before it is vouched for too.
"""

from __future__ import annotations

import datetime as dt
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from webhook.audit.chain import SCHEMA_VERSION, Record
from webhook.audit.record import rfc3339
from webhook.audit.signing import SigningKey


@dataclass
class Checkpointer:
    key: SigningKey
    every_records: int = 1000
    every_seconds: float = 60.0
    instance: str = ""
    monotonic: Callable[[], float] = time.monotonic
    wall: Callable[[], dt.datetime] = field(default=lambda: dt.datetime.now(dt.UTC))
    _pending: int = 0
    _last: float = field(default=-1.0)

    def __post_init__(self) -> None:
        self._last = self.monotonic()

    def note(self, records: int) -> bool:
        """Count records just written; True when a checkpoint is due."""
        self._pending += records
        overdue = self.monotonic() - self._last >= self.every_seconds
        return self._pending >= self.every_records or (self._pending > 0 and overdue)

    def state(self) -> tuple[int, float]:
        """What note and fields change, for restore to put back when a batch is not written after all."""
        return self._pending, self._last

    def restore(self, state: tuple[int, float]) -> None:
        self._pending, self._last = state

    @property
    def pending(self) -> int:
        return self._pending

    def fields(self) -> Record:
        covered = self._pending
        self._pending = 0
        self._last = self.monotonic()
        return {
            "v": SCHEMA_VERSION,
            "type": "checkpoint",
            "time": rfc3339(self.wall()),
            "instance": self.instance,
            "keyId": self.key.key_id,
            "records": covered,
        }

    def sign(self, data: bytes) -> str:
        return self.key.sign(data)
