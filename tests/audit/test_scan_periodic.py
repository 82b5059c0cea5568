"""The periodic scan's thread: it runs only while its replica leads, stops between objects, and
exports the last complete run's figures."""

from __future__ import annotations

import logging
import queue
import threading
from collections import Counter
from collections.abc import Callable, Iterator
from typing import cast

import pytest

from webhook.errors import ClusterError
from webhook.leader import LeaseElector, Timing
from webhook.metrics import Metrics
from webhook.scan.periodic import PeriodicScan, ScanJob, register_scan_gauges
from webhook.scan.run import ScanSummary
from webhook.scan.stream import ScanOutcome


class Elector:
    """Stands in for LeaseElector: the test decides who leads; every try is counted."""

    name, identity = "gpu-webhook-scan", "replica-a"
    timing = Timing(lease_seconds=5, renew_deadline=3, retry_seconds=0.01)

    def __init__(self) -> None:
        self.leading = False
        self.tries: queue.Queue[bool] = queue.Queue()

    def try_acquire_or_renew(self) -> bool:
        self.tries.put(self.leading)
        return self.leading

    def release(self) -> None:
        self.leading = False


class Job:
    """Stands in for ScanJob: each run reports itself, then judges `objects` objects."""

    def __init__(self, objects: int = 2, between: Callable[[], None] = lambda: None) -> None:
        self.objects = objects
        self.between = between
        self.runs: queue.Queue[ScanSummary] = queue.Queue()

    def run(self, keep_going: Callable[[], bool]) -> ScanOutcome:
        summary = ScanSummary("s", "test", "v", violations=Counter({("no-privileged", "deny"): 0}))
        for _ in range(self.objects):
            if not keep_going():
                summary.complete = False
                break
            summary.objects += 1
            summary.violations[("no-privileged", "deny")] += 1
            self.between()
        self.runs.put(summary)
        return ScanOutcome(summary, {})


@pytest.fixture
def messages() -> Iterator[queue.Queue[str]]:
    """What the scan logs, as it logs it: the events to await."""
    found: queue.Queue[str] = queue.Queue()

    class Handler(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            found.put(record.getMessage())

    logger, handler = logging.getLogger("webhook.scan"), Handler()
    logger.addHandler(handler)
    level = logger.level
    logger.setLevel(logging.INFO)
    yield found
    logger.removeHandler(handler)
    logger.setLevel(level)


def await_message(messages: queue.Queue[str], text: str) -> None:
    while messages.get(timeout=10) != text:
        pass


def periodic(job: Job, elector: Elector | None = None) -> PeriodicScan:
    return PeriodicScan(
        cast(ScanJob, job), 3600, elector=cast(LeaseElector, elector) if elector else None, duty=1.0
    )


def drain_tries(elector: Elector, count: int) -> None:
    for _ in range(count):
        elector.tries.get(timeout=10)


def test_a_follower_scans_once_it_leads_and_not_before() -> None:
    elector, job = Elector(), Job()
    scan = periodic(job, elector)
    scan.start()
    try:
        drain_tries(elector, 5)
        assert job.runs.empty()  # five rounds of the election as a follower: no run
        elector.leading = True
        assert job.runs.get(timeout=10).complete  # woken by the gain, not by the hour-long interval
    finally:
        scan.stop()


def test_losing_the_lease_stops_a_run_between_objects(messages: queue.Queue[str]) -> None:
    elector = Elector()
    lost = threading.Event()

    def lose() -> None:
        elector.leading = False
        lost.set()

    job = Job(objects=10, between=lose)
    elector.leading = True
    scan = periodic(job, elector)
    scan.start()
    try:
        summary = job.runs.get(timeout=10)
        assert lost.is_set() and not summary.complete and summary.objects == 1
        await_message(messages, "scan stopped before the end")
        assert scan.last is None  # a partial run is not reported as the cluster's state
    finally:
        scan.stop()


def samples(metrics: Metrics) -> list[str]:
    return [line for line in metrics.render().decode().splitlines() if line.startswith("gpu_webhook_scan")]


def test_gauges_show_the_last_complete_run_on_the_leader_only(messages: queue.Queue[str]) -> None:
    elector, job, metrics = Elector(), Job(objects=3), Metrics()
    scan = periodic(job, elector)
    register_scan_gauges(metrics, scan)
    assert samples(metrics) == ["gpu_webhook_scan_leader 0.0"]
    elector.leading = True
    assert samples(metrics) == ["gpu_webhook_scan_leader 1.0"]  # leading, but nothing scanned yet
    scan.start()
    try:
        await_message(messages, "scan finished")
        shown = samples(metrics)
        assert 'gpu_webhook_scan_violations{action="deny",policy="no-privileged"} 3.0' in shown
        assert "gpu_webhook_scan_objects 3.0" in shown and "gpu_webhook_scan_leader 1.0" in shown
        elector.leading = False
        assert samples(metrics) == ["gpu_webhook_scan_leader 0.0"]
    finally:
        scan.stop()


def test_without_an_election_the_scan_runs_at_start() -> None:
    job = Job()
    scan = periodic(job)
    scan.start()
    try:
        assert job.runs.get(timeout=10).objects == 2
        assert scan.leading
    finally:
        scan.stop()


def test_a_failed_run_is_counted_and_logged(messages: queue.Queue[str]) -> None:
    failures: queue.Queue[None] = queue.Queue()

    class Failing(Job):
        def run(self, keep_going: Callable[[], bool]) -> ScanOutcome:
            raise ClusterError("list deployments: HTTP 503 Service Unavailable")

    scan = PeriodicScan(cast(ScanJob, Failing()), 3600, on_failure=lambda: failures.put(None))
    scan.start()
    try:
        await_message(messages, "scan failed")
        failures.get(timeout=10)
        assert scan.last is None
    finally:
        scan.stop()
