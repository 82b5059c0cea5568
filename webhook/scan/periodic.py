"""`serve --scan-interval`: the scan in a background thread, on the replica that holds the Lease.

Off the request path: the thread reads the cluster (or the inventory), judges, and
streams records into the audit journal. Between objects it rests in proportion to
the time the last one took, so a scan uses about DUTY of one core and the event
loop serving admissions keeps getting the GIL.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from webhook.leader import LeaderLoop, LeaseElector
from webhook.metrics import Metrics
from webhook.policy.model import PolicySet
from webhook.review import ReviewSettings
from webhook.scan.publish import Publisher
from webhook.scan.run import ScanSummary
from webhook.scan.sources import Snapshot
from webhook.scan.stream import RecordSink, ScanOutcome, scan_once

log = logging.getLogger("webhook.scan")
DUTY = 0.5
STOP_SECONDS = 10.0


@dataclass(frozen=True)
class ScanJob:
    """What each run reads afresh: the objects, and the policy set in force when it starts.
    With a publisher, a run that completes writes its policy reports (one that stopped early
    would empty the reports of the namespaces it did not reach)."""

    snapshot: Callable[[], Snapshot]
    policies: Callable[[], PolicySet]
    settings: ReviewSettings
    sink: RecordSink | None = None
    publisher: Publisher | None = None

    def run(self, keep_going: Callable[[], bool]) -> ScanOutcome:
        policies = self.policies()
        outcome = scan_once(
            self.snapshot(),
            policies,
            self.settings,
            sink=self.sink,
            keep_going=keep_going,
            reports=self.publisher is not None,
        )
        if self.publisher is not None and outcome.summary.complete:
            self.publisher.publish(outcome, policies)
        return outcome


@dataclass(frozen=True)
class Completed:
    summary: ScanSummary
    finished_at: float  # Unix time


class PeriodicScan:
    def __init__(
        self,
        job: ScanJob,
        interval: float,
        *,
        elector: LeaseElector | None = None,
        duty: float = DUTY,
        on_failure: Callable[[], None] = lambda: None,
    ) -> None:
        self.job = job
        self.interval = interval
        self.duty = duty
        self.last: Completed | None = None
        self._on_failure = on_failure
        self._loop = LeaderLoop("scan", self._run, interval, elector=elector, join_seconds=STOP_SECONDS)

    @property
    def leading(self) -> bool:
        return self._loop.leading

    def start(self) -> None:
        self._loop.start()
        log.info(
            "background scan on",
            extra={"interval_seconds": self.interval, "leader_election": self._loop.leadership is not None},
        )

    def stop(self) -> None:
        """Ends a run between two objects; a list request in flight may hold it up to STOP_SECONDS."""
        self._loop.stop()

    def _run(self) -> None:
        try:
            outcome = self.job.run(Pace(self.duty, self._loop.stopping, self._keeps_going))
        except Exception as e:
            self._on_failure()
            log.error("scan failed", extra={"error_type": type(e).__name__, "error": str(e)[:300]})
            return
        summary = outcome.summary
        facts = _facts(summary)
        if not summary.complete:
            log.info("scan stopped before the end", extra=facts)
            return
        self.last = Completed(summary, time.time())
        log.info("scan finished", extra=facts)

    def _keeps_going(self) -> bool:
        return not self._loop.stopping.is_set() and self.leading


class Pace:
    """keep_going for a run: rests between objects in proportion to the last one, waking on stop."""

    def __init__(self, duty: float, stop: threading.Event, keeps_going: Callable[[], bool]) -> None:
        self._rest_per_busy = (1 - duty) / duty if 0 < duty < 1 else 0.0
        self._stop = stop
        self._keeps_going = keeps_going
        self._since: float | None = None

    def __call__(self) -> bool:
        if self._since is not None and self._rest_per_busy:
            self._stop.wait((time.monotonic() - self._since) * self._rest_per_busy)
        self._since = time.monotonic()
        return self._keeps_going()


def _facts(summary: ScanSummary) -> dict[str, object]:
    totals = summary.by_action()
    return {
        "scan": summary.scan_id,
        "source": summary.origin,
        "objects": summary.objects,
        "skipped": summary.skipped,
        "with_findings": summary.with_findings,
        "denied": summary.denied,
        "deny": totals["deny"],
        "warn": totals["warn"],
        "dryrun": totals["dryrun"],
        "seconds": round(summary.seconds, 3),
    }


def register_scan_gauges(metrics: Metrics, scan: PeriodicScan) -> None:
    """Per-policy findings of the last complete scan, exported by the replica that scans."""

    def last() -> Completed | None:
        return scan.last if scan.leading else None

    def violations() -> Iterable[tuple[Sequence[str], float]]:
        done = last()
        return [((p, a), n) for (p, a), n in sorted(done.summary.violations.items())] if done else []

    def single(value: Callable[[Completed], float]) -> Callable[[], Iterable[tuple[Sequence[str], float]]]:
        return lambda: [((), value(done))] if (done := last()) else []

    metrics.add_gauges(
        "gpu_webhook_scan_violations",
        "Findings of the last complete background scan, by policy and enforcement action.",
        ["policy", "action"],
        violations,
    )
    metrics.add_gauges(
        "gpu_webhook_scan_last_completed_timestamp_seconds",
        "Unix time the last complete background scan finished.",
        [],
        single(lambda d: d.finished_at),
    )
    metrics.add_gauges(
        "gpu_webhook_scan_objects",
        "Objects judged by the last complete scan.",
        [],
        single(lambda d: d.summary.objects),
    )
    metrics.add_gauges(
        "gpu_webhook_scan_denied_objects",
        "Objects the last complete scan found /validate would deny.",
        [],
        single(lambda d: d.summary.denied),
    )
    metrics.add_gauges(
        "gpu_webhook_scan_duration_seconds",
        "How long the last complete scan took.",
        [],
        single(lambda d: d.summary.seconds),
    )
    metrics.add_gauges(
        "gpu_webhook_scan_leader",
        "1 on the replica that runs the background scan, else 0.",
        [],
        lambda: [((), float(scan.leading))],
    )
