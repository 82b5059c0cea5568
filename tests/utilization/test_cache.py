"""The capacity cache: refreshed off the request path, degrading with a log line and a metric."""

from __future__ import annotations

import asyncio
import logging
import queue

import pytest

from tests.support.patience import PATIENCE
from tests.utilization.conftest import Fleet
from webhook.capacity import CapacitySnapshot, NodeCapacity
from webhook.config import PrometheusSettings, UtilizationSettings
from webhook.metrics import Metrics
from webhook.utilization.cache import CapacityCache, build_cache
from webhook.utilization.prometheus import PrometheusError

SNAPSHOT = CapacitySnapshot(1000.0, (NodeCapacity("n1", free_gpus=1),))


class Source:
    """Answers refreshes from a script: a snapshot, or an error to raise."""

    def __init__(self, *answers: CapacitySnapshot | Exception) -> None:
        self.answers = list(answers)
        self.calls: queue.Queue[int] = queue.Queue()

    def __call__(self) -> CapacitySnapshot:
        self.calls.put(len(self.answers))
        answer = self.answers.pop(0) if len(self.answers) > 1 else self.answers[0]
        if isinstance(answer, Exception):
            raise answer
        return answer


def value(metrics: Metrics, name: str) -> float | None:
    return metrics.registry.get_sample_value(name)


def cache(source: Source, metrics: Metrics, refresh: float = 3600) -> CapacityCache:
    return CapacityCache(source, metrics, refresh_seconds=refresh, max_age_seconds=60, source="test")


def test_a_good_refresh_is_what_requests_see_while_it_is_fresh() -> None:
    metrics = Metrics()
    found = cache(Source(SNAPSHOT), metrics)
    assert found.view(1000.0) is None and found.status(1000.0) == "no data yet"
    assert found.refresh()
    view = found.view(1030.0)
    assert view is not None and view.snapshot is SNAPSHOT and view.fresh
    assert found.view(1061.0) is not None and not found.view(1061.0).fresh  # type: ignore[union-attr]
    assert found.status(1030.0) == "fresh (30s old, 1 nodes)"
    assert found.status(1061.0).startswith("stale, placement hints off")
    assert value(metrics, "gpu_webhook_utilization_up") == 1
    assert value(metrics, "gpu_webhook_utilization_last_success_timestamp_seconds") == 1000.0
    assert value(metrics, "gpu_webhook_utilization_nodes") == 1


def test_failures_keep_the_last_snapshot_count_every_time_and_log_each_change_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    metrics = Metrics()
    down = PrometheusError("cannot reach Prometheus at http://p: refused")
    found = cache(Source(SNAPSHOT, down, down, down, SNAPSHOT), metrics)
    with caplog.at_level(logging.INFO, logger="webhook.utilization.cache"):
        results = [found.refresh() for _ in range(5)]
    assert results == [True, False, False, False, True]
    assert value(metrics, "gpu_webhook_utilization_refresh_errors_total") == 3
    messages = [(r.levelname, r.getMessage()) for r in caplog.records]
    assert messages == [
        ("INFO", "utilization source available"),
        ("WARNING", "utilization source unavailable; placement hints use older data while fresh, then stop"),
        ("INFO", "utilization source available"),
    ]
    assert caplog.records[1].error == str(down)  # type: ignore[attr-defined]


def test_while_down_requests_see_the_old_snapshot_and_readiness_says_why() -> None:
    metrics = Metrics()
    found = cache(Source(PrometheusError("cannot reach Prometheus")), metrics)
    assert not found.refresh()
    assert found.view(0) is None and found.status(0) == "no data yet: cannot reach Prometheus"
    assert value(metrics, "gpu_webhook_utilization_up") == 0


def test_the_background_task_refreshes_until_stopped() -> None:
    source = Source(SNAPSHOT)
    found = cache(source, Metrics(), refresh=0.01)

    async def run() -> None:
        await found.start()
        for _ in range(3):  # three refreshes happen without anyone asking
            await asyncio.to_thread(source.calls.get, True, PATIENCE)
        await found.stop()

    asyncio.run(run())
    assert found.view(1000.0) is not None


def test_an_unexpected_error_in_a_refresh_does_not_stop_the_task(caplog: pytest.LogCaptureFixture) -> None:
    source = Source(RuntimeError("bug"), SNAPSHOT)
    found = cache(source, Metrics(), refresh=0.01)

    async def run() -> None:
        await found.start()
        for _ in range(2):
            await asyncio.to_thread(source.calls.get, True, PATIENCE)
        await found.stop()

    with caplog.at_level(logging.ERROR, logger="webhook.utilization.cache"):
        asyncio.run(run())
    assert "refresh failed unexpectedly" in caplog.text


def test_the_cache_reads_spare_capacity_from_real_promql(fleet: Fleet) -> None:
    settings = UtilizationSettings(PrometheusSettings(fleet.url, timeout_seconds=PATIENCE), window="1m")
    found = build_cache(settings, Metrics())
    assert found.refresh()
    view = found.view(1e12)
    assert view is not None
    nodes = {n.node: n for n in view.snapshot.nodes}
    assert {name: n.free_gpus for name, n in nodes.items()} == {"node-a": 1, "node-b": 2, "node-c": 0}
    assert {name: dict(n.free_mig) for name, n in nodes.items()} == {
        "node-a": {},
        "node-b": {},
        "node-c": {"3g.40gb": 1},
    }
    assert nodes["node-b"].idle_share > nodes["node-a"].idle_share + 0.5 > 1.5 > nodes["node-c"].idle_share
    assert nodes["node-b"].products == ("NVIDIA-H100-80GB-HBM3",)
