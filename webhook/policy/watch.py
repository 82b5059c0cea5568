"""Hot reload: notice changed policy files and swap in the new set, off the request path.

Polling file identities rather than inotify: a ConfigMap volume update swaps the
`..data` symlink, which inotify on the visible names does not report, while a stat
through the symlinks sees the new files. Loading runs in a thread so compiling a
large set never stalls requests; the swap itself is one reference assignment.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os

from webhook.errors import PolicyError
from webhook.policy.sources import watched_files
from webhook.policy.store import PolicyStore

log = logging.getLogger(__name__)
Signature = tuple[tuple[str, int, int, int], ...] | None


class PolicyWatcher:
    def __init__(self, store: PolicyStore, interval: float) -> None:
        self._store = store
        self._interval = interval
        self._task: asyncio.Task[None] | None = None
        self._seen: Signature = None

    def signature(self) -> Signature:
        try:
            files = watched_files(self._store.sources)
            return tuple((str(f), *_identity(os.stat(f))) for f in files)
        except (PolicyError, OSError):
            return None

    async def check(self) -> bool:
        """Reload if the files changed since the last check; True if a new set is in force."""
        signature = await asyncio.to_thread(self.signature)
        if signature == self._seen:
            return False
        self._seen = signature
        return await asyncio.to_thread(self._store.load)

    async def start(self) -> None:
        self._seen = await asyncio.to_thread(self.signature)
        self._task = asyncio.create_task(self._run(), name="policy-watcher")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    async def _run(self) -> None:
        while True:
            await asyncio.sleep(self._interval)
            try:
                await self.check()
            except Exception:
                log.exception("policy reload check failed; the current set stays in force")


def _identity(stat: os.stat_result) -> tuple[int, int, int]:
    return (stat.st_ino, stat.st_mtime_ns, stat.st_size)
