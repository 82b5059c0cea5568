"""The capacity snapshot, refreshed off the request path; requests only read a reference.

A background task runs the (blocking) Prometheus queries in a thread every
`refresh_seconds`. A failed refresh keeps the previous snapshot, which placement
hints use only while it is younger than `max_age_seconds`; the failure is logged
once when the source goes down (and once when it comes back) and counted on every
attempt. Nothing here can make admission wait or fail.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable

from webhook.capacity import CapacitySnapshot, CapacityView
from webhook.config import UtilizationSettings
from webhook.metrics import Metrics
from webhook.utilization.prometheus import PrometheusClient, PrometheusError
from webhook.utilization.promql import Window
from webhook.utilization.source import read_fleet
from webhook.utilization.spare import capacity_snapshot

log = logging.getLogger(__name__)
Reader = Callable[[], CapacitySnapshot]


class CapacityCache:
    def __init__(
        self,
        read: Reader,
        metrics: Metrics,
        *,
        refresh_seconds: float,
        max_age_seconds: float,
        source: str = "prometheus",
    ) -> None:
        self._read = read
        self._metrics = metrics
        self._refresh_seconds = refresh_seconds
        self._max_age_seconds = max_age_seconds
        self._source = source
        self._snapshot: CapacitySnapshot | None = None
        self._healthy: bool | None = None
        self.last_error: str | None = None
        self._task: asyncio.Task[None] | None = None

    def view(self, now: float) -> CapacityView | None:
        """What a request may read: the latest snapshot with its age judged at `now`."""
        snapshot = self._snapshot
        return None if snapshot is None else CapacityView(snapshot, now, self._max_age_seconds)

    def status(self, now: float) -> str:
        view = self.view(now)
        if view is None:
            return f"no data yet{': ' + self.last_error if self.last_error else ''}"
        age = now - view.snapshot.taken_at
        state = "fresh" if view.fresh else "stale, placement hints off"
        return f"{state} ({age:.0f}s old, {len(view.snapshot.nodes)} nodes)"

    def refresh(self) -> bool:
        """One read; blocking. True when a new snapshot is in place."""
        try:
            snapshot = self._read()
        except PrometheusError as e:
            self._failed(str(e))
            return False
        self._snapshot = snapshot
        self.last_error = None
        self._metrics.utilization_up.set(1)
        self._metrics.utilization_last_success.set(snapshot.taken_at)
        self._metrics.utilization_nodes.set(len(snapshot.nodes))
        if self._healthy is not True:
            log.info(
                "utilization source available", extra={"source": self._source, "nodes": len(snapshot.nodes)}
            )
        self._healthy = True
        return True

    def _failed(self, reason: str) -> None:
        self.last_error = reason
        self._metrics.utilization_refresh_errors.inc()
        self._metrics.utilization_up.set(0)
        if self._healthy is not False:
            log.warning(
                "utilization source unavailable; placement hints use older data while fresh, then stop",
                extra={"source": self._source, "error": reason},
            )
        self._healthy = False

    async def start(self) -> None:
        self._task = asyncio.create_task(self._run(), name="utilization-cache")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    async def _run(self) -> None:
        while True:
            try:
                await asyncio.to_thread(self.refresh)
            except Exception:
                log.exception("utilization refresh failed unexpectedly; the last snapshot stays")
            await asyncio.sleep(self._refresh_seconds)


def build_cache(settings: UtilizationSettings, metrics: Metrics) -> CapacityCache:
    client = PrometheusClient(settings.prometheus)
    window = Window.parse(settings.window)

    def read() -> CapacitySnapshot:
        reading = read_fleet(client, window, pod_labels=settings.pod_labels, at=time.time())
        return capacity_snapshot(reading)

    return CapacityCache(
        read,
        metrics,
        refresh_seconds=settings.refresh_seconds,
        max_age_seconds=settings.max_age_seconds,
        source=client.url,
    )
