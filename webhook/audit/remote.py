"""The event loop's side of the journal helper (journald.py): the hot path only sends and waits.

Building a decision record (scrubbing, the object's digest, the quota figures), sealing it
into the chain, writing and fsyncing it used to take about a fifth of a worker's request CPU.
Here a decision costs the worker one orjson encoding of its facts and one buffered write of
them, with the body it already read, to a socket; the helper does the rest on another core
and answers once the record is durable, so no decision is acknowledged before its record.

When the helper is not running (it could not start, or exited), `append*` raises HelperGone
before sending anything, and the caller writes through its own Journal instead. Requests
already sent to a helper that exits fail with AuditWriteError: whether they reached the log
is unknown, so their decisions follow --audit-failure-mode.
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
import subprocess
import sys
from collections.abc import Awaitable, Callable
from dataclasses import replace
from typing import Any

import orjson

from webhook.audit.chain import Record
from webhook.audit.journal import AuditWriteError
from webhook.audit.journald import Frames, HelperConfig, request_frame

log = logging.getLogger("webhook.audit")
DEFAULT_TIMEOUT_SECONDS = 5.0
START_SECONDS = 30.0  # a cold interpreter on a busy node imports the journal's modules
_STOP_SECONDS = 5.0


class HelperGone(Exception):
    """The helper is not running; nothing was sent, so the caller may write another way."""


class RecordNotBuilt(Exception):
    """The helper could not build a decision's record from what it was sent (a defect, not an
    outage of the log): the decision goes unrecorded, as when the worker cannot build one."""


class _Answers(asyncio.Protocol):
    def __init__(self, helper: JournalHelper) -> None:
        self._helper = helper
        self._frames = Frames()

    def data_received(self, data: bytes) -> None:
        for body in self._frames.feed(data):
            self._helper.answered(orjson.loads(body))

    def connection_lost(self, exc: Exception | None) -> None:
        self._helper.lost(f"the audit journal helper exited ({exc or 'end of stream'})")


class _Flight:
    """The requests sent in one write, and the one timer that fails those still unanswered."""

    __slots__ = ("idents", "left", "timer")

    def __init__(self) -> None:
        self.idents: list[int] = []
        self.left = 0
        self.timer: asyncio.TimerHandle | None = None


_Waiter = tuple["asyncio.Future[Record | None]", _Flight]


class JournalHelper:
    def __init__(
        self,
        config: HelperConfig,
        *,
        timeout: float = DEFAULT_TIMEOUT_SECONDS,
        on_batch: Callable[[int], None] | None = None,
    ) -> None:
        self._config = config
        self._timeout = timeout
        self._on_batch = on_batch
        self._process: subprocess.Popen[bytes] | None = None
        self._transport: asyncio.Transport | None = None
        self._waiters: dict[int, _Waiter] = {}
        self._next = 0
        self._outbox: list[bytes] = []
        self._flight = _Flight()

    @property
    def running(self) -> bool:
        return self._transport is not None

    @property
    def pid(self) -> int | None:
        return self._process.pid if self._process is not None else None

    async def start(self) -> None:
        """Start the helper and wait until its journal is open. A helper that cannot start is
        logged, not raised: the worker writes its records itself then."""
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        # The helper's copy of stdout (--audit-stdout) under a number of its own: its fd 1 is /dev/null.
        copy = os.dup(self._config.copy_fd) if self._config.copy_fd is not None else None
        config = replace(self._config, copy_fd=copy)
        with theirs:
            try:
                self._process = subprocess.Popen(
                    [sys.executable, "-m", "webhook.audit.journald", str(theirs.fileno()), config.encode()],
                    pass_fds=[theirs.fileno()] + ([copy] if copy is not None else []),
                    stdin=subprocess.DEVNULL,
                    stdout=subprocess.DEVNULL,
                    env={**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)},
                )
            except OSError as e:
                ours.close()
                log.error("audit journal helper cannot start; the worker writes", extra={"error": str(e)})
                return
            finally:
                if copy is not None:
                    os.close(copy)
        loop = asyncio.get_running_loop()
        ready: asyncio.Future[Record | None] = loop.create_future()
        self._waiters[0] = (ready, self._flight)
        self._transport, _ = await loop.create_unix_connection(lambda: _Answers(self), sock=ours)
        try:
            async with asyncio.timeout(START_SECONDS):
                await ready
        except (TimeoutError, AuditWriteError) as e:
            self._disconnect(f"the audit journal helper did not start: {e or 'no answer'}")
            log.error("audit journal helper did not start; the worker writes", extra={"error": str(e)})
            await self._reap()

    async def append(self, entry: Record) -> Record:
        """Seal and write `entry` (a record's fields); its sealed record, once durable."""
        ident = self._id()
        record = await self._send(ident, request_frame(orjson.dumps({"id": ident, "entry": entry})))
        assert record is not None
        return record

    def append_decision(self, facts: bytes, body: bytes) -> Awaitable[Record | None]:
        """Write the record the helper builds from a decision's facts and its request's body."""
        ident = self._id()
        return self._send(ident, request_frame(b'{"id":%d}' % ident, body, facts))

    def answered(self, batch: dict[str, Any]) -> None:
        """One frame per batch the helper wrote (journald.py)."""
        if "batch" in batch and self._on_batch is not None:
            self._on_batch(batch["batch"])
        for ident in batch.get("ok", ()):
            self._settle(ident, None, None)
        for ident, record in batch.get("records", ()):
            self._settle(ident, record, None)
        for ident, error in batch.get("failed", ()):
            self._settle(ident, None, AuditWriteError(error))
        for ident, error in batch.get("unbuilt", ()):
            self._settle(ident, None, RecordNotBuilt(error))

    def lost(self, why: str) -> None:
        if self._transport is not None:
            log.error("audit journal helper unavailable; the worker writes", extra={"error": why})
        self._disconnect(why)

    async def close(self) -> None:
        """Stop the helper once its answers are in: at the end of its stream it writes a last
        checkpoint and exits."""
        pending = [waiter for waiter, _ in self._waiters.values()]
        if pending:
            await asyncio.wait(pending, timeout=self._timeout)
        self._disconnect("the audit log is closing")
        await self._reap()

    def _send(self, ident: int, message: bytes) -> asyncio.Future[Record | None]:
        if self._transport is None:
            raise HelperGone("the audit journal helper is not running")
        loop = asyncio.get_running_loop()
        waiter: asyncio.Future[Record | None] = loop.create_future()
        flight = self._flight
        self._waiters[ident] = (waiter, flight)
        flight.idents.append(ident)
        flight.left += 1
        if not self._outbox:
            loop.call_soon(self._send_outbox)
        self._outbox.append(message)
        return waiter

    def _send_outbox(self) -> None:
        """One write for every record the requests of this loop iteration asked for: each write
        may wake the helper, which costs this core more than the write itself."""
        outbox, self._outbox = self._outbox, []
        flight, self._flight = self._flight, _Flight()
        flight.timer = asyncio.get_running_loop().call_later(self._timeout, self._expire, flight)
        if self._transport is not None:
            self._transport.write(b"".join(outbox))

    def _settle(self, ident: int, record: Record | None, error: Exception | None) -> None:
        found = self._waiters.pop(ident, None)
        if found is None:  # its caller timed out, or was cancelled
            return
        waiter, flight = found
        flight.left -= 1
        if flight.left == 0 and flight.timer is not None:
            flight.timer.cancel()
        if waiter.done():
            return
        if error is not None:
            waiter.set_exception(error)
        else:
            waiter.set_result(record)

    def _expire(self, flight: _Flight) -> None:
        slow = AuditWriteError(f"the audit log took longer than {self._timeout}s to accept a record")
        for ident in flight.idents:
            self._settle(ident, None, slow)

    def _id(self) -> int:
        self._next += 1
        return self._next

    def _disconnect(self, why: str) -> None:
        transport, self._transport = self._transport, None
        if transport is not None:
            transport.close()
        waiters, self._waiters = self._waiters, {}
        for waiter, flight in waiters.values():
            if flight.timer is not None:
                flight.timer.cancel()
            if not waiter.done():
                waiter.set_exception(AuditWriteError(why))

    async def _reap(self) -> None:
        process, self._process = self._process, None
        if process is None:
            return
        loop = asyncio.get_running_loop()
        try:
            await loop.run_in_executor(None, process.wait, _STOP_SECONDS)
        except subprocess.TimeoutExpired:
            process.kill()
            await loop.run_in_executor(None, process.wait)
