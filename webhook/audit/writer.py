"""Group commit: every request that arrives while one batch is being written joins the next batch.

Under load, N concurrent decisions cost one write and one fsync instead of N;
when idle, a lone record is written at once. A record's `append` returns only
once the journal holds it, so the response that follows is never ahead of the log.

Code running in the event loop calls `await writer.append(entry)`; code running
in its own thread (a background scan) may call `writer.journal.append([...])`.

With a journal helper (remote.py) running, `append` and `append_decision` hand the record to
that process, which does all of the below in its own journal; what follows is how the worker
writes when there is none.

A batch is sealed and written on the event loop itself when the journal's lock is free:
in a thread, every blocking call (stat, write, flock) would give up the GIL and wait for
the busy loop to hand it back. In batch mode only the fsync is handed off, after the lock
is released: to the fsync helper process when there is one (syncer.py), else to the writer
thread. `always` mode, a lock held elsewhere, a torn line or a rotation (which flush under
the lock) run the whole append in the thread.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from webhook.audit.chain import Record
from webhook.audit.journal import AuditWriteError, Journal, Written
from webhook.audit.remote import DEFAULT_TIMEOUT_SECONDS, HelperGone, JournalHelper
from webhook.audit.syncer import FsyncHelper, SyncerGone

MAX_BATCH = 1024
Pending = tuple[Mapping[str, Any], "asyncio.Future[Record]"]


class AuditWriter:
    def __init__(
        self,
        journal: Journal,
        *,
        timeout: float = DEFAULT_TIMEOUT_SECONDS,
        on_batch: Callable[[int], None] | None = None,
        syncer: FsyncHelper | None = None,
        helper: JournalHelper | None = None,
    ) -> None:
        self.journal = journal
        self._helper = helper
        self._syncer = syncer if journal.options.fsync == "batch" else None
        self._timeout = timeout
        self._on_batch = on_batch
        self._pending: list[Pending] = []
        self._flusher: asyncio.Task[None] | None = None
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="audit-writer")

    async def start(self) -> None:
        await asyncio.get_running_loop().run_in_executor(self._executor, self.journal.open)
        if self._syncer is not None:
            self._syncer.start()
        if self._helper is not None:
            await self._helper.start()

    @property
    def remote(self) -> bool:
        """Whether the journal helper writes this worker's records (remote.py)."""
        return self._helper is not None and self._helper.running

    async def append_decision(self, facts: bytes, body: bytes) -> None:
        """Have the journal helper build and write a decision's record (facts.py) and return once
        it is in the log; HelperGone, with nothing sent, when there is no helper."""
        if self._helper is None:
            raise HelperGone("no audit journal helper")
        await self._helper.append_decision(facts, body)

    async def append(self, entry: Mapping[str, Any]) -> Record:
        """Return the sealed record once it is in the log; raise AuditWriteError if it cannot be."""
        if self.remote:
            assert self._helper is not None
            try:
                return await self._helper.append(dict(entry))
            except HelperGone:
                pass  # gone since: the worker writes it itself
        loop = asyncio.get_running_loop()
        future: asyncio.Future[Record] = loop.create_future()
        future.add_done_callback(_retrieve)
        self._pending.append((entry, future))
        if self._flusher is None or self._flusher.done():
            self._flusher = loop.create_task(self._flush())
        timer = loop.call_later(self._timeout, _expire, future, self._timeout)
        try:
            return await future
        finally:
            timer.cancel()

    async def close(self) -> None:
        if self._flusher is not None:
            await self._flusher
        if self._helper is not None:
            await self._helper.close()  # after its last answer: it writes its own checkpoint
        loop = asyncio.get_running_loop()
        try:
            await loop.run_in_executor(self._executor, self.journal.checkpoint)
        finally:
            await loop.run_in_executor(self._executor, self.journal.close)
            self._executor.shutdown(wait=True)
            if self._syncer is not None:
                await self._syncer.close()

    async def _flush(self) -> None:
        while self._pending:
            batch, self._pending = self._pending[:MAX_BATCH], self._pending[MAX_BATCH:]
            entries = [entry for entry, _ in batch]
            try:
                records = await self._append(entries)
            except Exception as e:
                error = e if isinstance(e, AuditWriteError) else AuditWriteError(f"audit log failure: {e!r}")
                _settle(batch, error=error)
                continue
            _settle(batch, records=records)
            if self._on_batch is not None:
                self._on_batch(len(batch))

    async def _append(self, entries: list[Mapping[str, Any]]) -> list[Record]:
        loop, journal = asyncio.get_running_loop(), self.journal
        written = journal.try_write(entries)
        if written is None:  # the lock is busy, or this batch must flush under it
            return await loop.run_in_executor(self._executor, journal.append, entries)
        if not written.needs_flush:  # never mode
            return journal.settle(written)
        try:
            await self._flush_batch(written)
        except BaseException:
            await loop.run_in_executor(self._executor, journal.take_back, written)
            raise
        return journal.settle(written)

    async def _flush_batch(self, written: Written) -> None:
        if self._syncer is not None:
            try:
                await self._syncer.fsync(written.fd)
                return
            except SyncerGone:
                pass  # logged by the syncer; fsync is idempotent, so the thread simply does it
            except OSError as e:
                raise self.journal.flush_error(e) from e
        await asyncio.get_running_loop().run_in_executor(self._executor, self.journal.flush, written)


def _settle(
    batch: list[Pending], *, records: list[Record] | None = None, error: Exception | None = None
) -> None:
    for index, (_, future) in enumerate(batch):
        if future.done():
            continue
        if records is not None:
            future.set_result(records[index])
        else:
            assert error is not None
            future.set_exception(error)


def _expire(future: asyncio.Future[Record], timeout: float) -> None:
    if not future.done():
        future.set_exception(AuditWriteError(f"the audit log took longer than {timeout}s to accept a record"))


def _retrieve(future: asyncio.Future[Record]) -> None:
    """A caller that timed out no longer awaits its future; read the outcome so none is reported lost."""
    if not future.cancelled():
        future.exception()
