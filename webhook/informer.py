"""List, then watch, forever: keep one kind of the cluster cache current from a background thread.

The loop follows client-go's reflector:
- list (in pages) and swap the result into the cache whole; the list's
  resourceVersion is where the watch starts;
- apply each watch event; bookmarks and quietly ended watches confirm freshness;
- a watch that answers 410 Gone (ERROR event or HTTP status) means the history
  we need was compacted: list again, at once;
- any other failure: wait with exponential backoff and jitter, then resume the watch
  from the last resourceVersion seen (a relist follows only if that is too old).

The source is a protocol, so this module knows nothing of the kubernetes package.
"""

from __future__ import annotations

import logging
import random
import threading
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, Protocol

from webhook.cache import ClusterCache
from webhook.errors import ClusterError, ResourceExpired
from webhook.types import KubeObject

log = logging.getLogger(__name__)

EVENT_TYPES = frozenset({"ADDED", "MODIFIED", "DELETED"})
DEFAULT_WATCH_SECONDS = 300


@dataclass(frozen=True)
class Page:
    items: list[KubeObject]
    resource_version: str


class Source(Protocol):
    kind: str

    def list_pages(self) -> Iterator[Page]: ...

    def watch(self, resource_version: str, timeout_seconds: int) -> Iterator[dict[str, Any]]:
        """Open a watch (raising if the API refuses it), then iterate its events."""
        ...

    def interrupt(self) -> None:
        """Unblock a watch that is waiting for data, from another thread."""
        ...


@dataclass(frozen=True)
class Backoff:
    initial: float = 0.5
    maximum: float = 30.0
    factor: float = 2.0

    def delay(self, failures: int, rand: float) -> float:
        """Exponential, with 'equal jitter': half of it fixed, half random, so replicas spread out."""
        ceiling = min(self.maximum, self.initial * self.factor ** max(0, failures - 1))
        return ceiling / 2 + rand * ceiling / 2


class Informer:
    def __init__(
        self,
        source: Source,
        cache: ClusterCache,
        *,
        backoff: Backoff = Backoff(),
        watch_seconds: int = DEFAULT_WATCH_SECONDS,
        rand: Callable[[], float] = random.random,
    ) -> None:
        self.source = source
        self.cache = cache
        self.backoff = backoff
        self.watch_seconds = watch_seconds
        self._rand = rand
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._resource_version = ""
        self.lists = 0
        self.failures = 0
        self.delays: deque[float] = deque(maxlen=32)
        self.last_error = ""

    @property
    def kind(self) -> str:
        return self.source.kind

    @property
    def resource_version(self) -> str:
        """Where the next watch resumes: the last event or bookmark seen."""
        return self._resource_version

    def start(self) -> None:
        self._thread = threading.Thread(target=self.run, name=f"informer-{self.kind}", daemon=True)
        self._thread.start()

    def stop(self, timeout: float = 5.0) -> None:
        self._stop.set()
        self.source.interrupt()
        if self._thread is not None:
            self._thread.join(timeout)

    def run(self) -> None:
        while not self._stop.is_set():
            try:
                if not self._resource_version:
                    self._relist()
                self._watch()
            except ResourceExpired:
                log.info("watch history expired; listing again", extra={"kind": self.kind})
                self._resource_version = ""
            except Exception as e:
                if self._stop.is_set():
                    break
                self._fail(e)

    def _relist(self) -> None:
        versions: list[str] = []

        def items() -> Iterator[KubeObject]:
            for page in self.source.list_pages():
                versions.append(page.resource_version)
                yield from page.items

        try:
            self.cache.replace(self.kind, items())
        except ResourceExpired as e:  # a continue token outlived: back off rather than list in a loop
            raise ClusterError(f"list {self.kind} expired while paging: {e}") from e
        self.lists += 1
        self._resource_version = versions[0] if versions else ""
        self._recovered()
        if self.lists == 1:
            log.info("cache synced", extra={"kind": self.kind, "objects": self._count()})

    def _watch(self) -> None:
        events = self.source.watch(self._resource_version, self.watch_seconds)
        if self._stop.is_set():  # stop() came while the watch was opening: it may have missed it
            self.source.interrupt()
        self.cache.set_live(self.kind, True)
        self._recovered()
        try:
            for event in events:
                if self._stop.is_set():
                    return
                self._handle(event)
        finally:
            self.cache.set_live(self.kind, False)

    def _handle(self, event: dict[str, Any]) -> None:
        kind, obj = event.get("type"), event.get("object")
        if not isinstance(obj, dict):
            raise ClusterError(f"watch event without an object: {str(kind)[:40]}")
        if kind == "ERROR":
            if obj.get("code") == 410:
                raise ResourceExpired(str(obj.get("message", "expired"))[:200])
            raise ClusterError(f"watch error {obj.get('code')}: {str(obj.get('message', ''))[:200]}")
        if kind == "BOOKMARK":
            self.cache.confirm(self.kind)
        elif kind in EVENT_TYPES:
            self.cache.apply(self.kind, kind, obj)
        else:
            return
        version = (obj.get("metadata") or {}).get("resourceVersion")
        if isinstance(version, str) and version:
            self._resource_version = version
        self._recovered()

    def _fail(self, error: Exception) -> None:
        self.failures += 1
        self.last_error = _describe(error)
        delay = self.backoff.delay(self.failures, self._rand())
        self.delays.append(delay)
        log.warning(
            "cluster watch failed; backing off",
            extra={"kind": self.kind, "error": self.last_error, "failures": self.failures, "retry_in": delay},
        )
        self._stop.wait(delay)

    def _recovered(self) -> None:
        if self.failures:
            log.info("cluster watch recovered", extra={"kind": self.kind, "after_failures": self.failures})
        self.failures = 0
        self.last_error = ""

    def _count(self) -> int:
        stats = self.cache.stats()
        return {"pods": stats.pods, "nodes": stats.nodes}.get(self.kind, stats.namespaces)


def _describe(error: Exception) -> str:
    """A one-line reason without bodies: errors from the API may echo objects."""
    text = str(error).splitlines()[0] if str(error) else ""
    return f"{type(error).__name__}: {text[:200]}"
