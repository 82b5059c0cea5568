"""Read the fleet from Prometheus: run the window queries and join the answers. The I/O edge."""

from __future__ import annotations

import time
from collections.abc import Mapping

from webhook.config import PodLabels
from webhook.utilization.prometheus import PrometheusClient, Sample, Series
from webhook.utilization.promql import Window, timeline_queries, window_queries
from webhook.utilization.usage import FleetReading, join_usage

TIMELINE_POINTS = 60


def read_fleet(
    client: PrometheusClient,
    window: Window,
    *,
    pod_labels: PodLabels = "auto",
    selector: str = "",
    at: float | None = None,
) -> FleetReading:
    """Every GPU's usage over `window` ending at `at` (default: now)."""
    when = time.time() if at is None else at
    answers: Mapping[str, list[Sample]] = {
        name: client.query(promql, at=when) for name, promql in window_queries(window, selector).items()
    }
    return FleetReading(when, window, tuple(join_usage(answers, pod_labels)))


def read_timeline(
    client: PrometheusClient, reading: FleetReading, selector: str = ""
) -> dict[str, list[Series]]:
    """Utilization series across the reading's window, TIMELINE_POINTS steps, each its step's mean."""
    start = reading.at - reading.window.seconds
    step = reading.window.seconds / TIMELINE_POINTS
    return {
        name: client.query_range(promql, start, reading.at, step)
        for name, promql in timeline_queries(step, selector).items()
    }
