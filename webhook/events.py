"""`--emit-denial-events`: a Kubernetes Event (core/v1) for each denial, off the request path.

Shaped as Gatekeeper's --emit-admission-events writes them (pkg/webhook/policy.go): type Warning,
reason FailedAdmission, one per denying policy, in the webhook's own namespace (the legacy
Event validation wants the involved object's namespace to be the Event's), annotated with the
resource and the policy. Unlike Gatekeeper's, the message does not quote the finding: a finding
may quote the object (an environment value), and Events are read by more people than the
audit log is. The reason is in the audit log and in the answer the requester got.

The request path only puts a few strings on a bounded queue. One thread sends: a token bucket
for the whole process bounds how many writes reach the API server, and a denial repeated
within AGGREGATE_SECONDS (same policy, kind, namespace and name) raises the count of the Event
already written rather than writing a new one, as client-go's event correlator does.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import functools
import logging
import queue
import threading
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from webhook.decision import Decision, clean_text
from webhook.errors import ClusterError
from webhook.types import AdmissionRequest

COMPONENT = "gpu-webhook"
REASON = "FailedAdmission"
QUEUE_SIZE = 1000  # denials waiting for the sender; more are dropped, and counted
BURST = 20  # API writes the bucket holds
REFILL_PER_SECOND = 0.2  # writes it regains: 12 a minute once the burst is spent
AGGREGATE_SECONDS = 600.0  # client-go's correlator: repeats within ten minutes raise one count
FLUSH_SECONDS = 10.0  # how often raised counts are written
MAX_SERIES = 1000  # distinct denials remembered for aggregation
MAX_POLICIES_PER_DENIAL = 5
NAME_MAX = 253

log = logging.getLogger(__name__)


class EventWriter(Protocol):
    """webhook.cluster.EventStore: where Events go."""

    namespace: str

    def create(self, body: Mapping[str, Any]) -> None: ...

    def patch(self, name: str, body: Mapping[str, Any]) -> None: ...


@dataclass(frozen=True)
class Denial:
    """What an Event says: names only, each cut to a printable line."""

    policy: str
    kind: str
    api_version: str
    namespace: str
    name: str
    endpoint: str


def denials_of(request: AdmissionRequest, endpoint: str, decision: Decision) -> list[Denial]:
    """One per denying policy (at most MAX_POLICIES_PER_DENIAL), in review order."""
    policies = list(dict.fromkeys(f.policy for f in decision.findings if f.action == "deny"))
    kind = request.get("kind") or {}
    group, version = str(kind.get("group") or ""), str(kind.get("version") or "")
    name = request.get("name") or _generate_name(request)
    return [
        Denial(
            _text(policy),
            _text(str(kind.get("kind") or "")),
            f"{group}/{version}" if group else version,
            _text(request.get("namespace") or ""),
            _text(name),
            endpoint,
        )
        for policy in policies[:MAX_POLICIES_PER_DENIAL]
    ]


def _generate_name(request: AdmissionRequest) -> str:
    meta = (request.get("object") or {}).get("metadata")
    return str(meta.get("generateName") or "") if isinstance(meta, dict) else ""


def _text(value: str) -> str:
    return clean_text(str(value), NAME_MAX)


class TokenBucket:
    def __init__(self, burst: int, per_second: float, now: float) -> None:
        self.burst, self.per_second = burst, per_second
        self.tokens, self.at = float(burst), now

    def take(self, now: float) -> bool:
        self.tokens = min(self.burst, self.tokens + max(0.0, now - self.at) * self.per_second)
        self.at = now
        if self.tokens < 1:
            return False
        self.tokens -= 1
        return True


@dataclass
class _Series:
    """One Event written, and the repeats not yet written to it."""

    name: str
    first: dt.datetime
    last: dt.datetime
    count: int
    written: int
    seen: float  # monotonic time of the last repeat


class DenialEvents:
    """Aggregation and rate limits; `handle` and `flush` take the time, so tests need no clock."""

    def __init__(
        self,
        writer: EventWriter,
        *,
        clock: Callable[[], float] = time.monotonic,
        wall: Callable[[], dt.datetime] = lambda: dt.datetime.now(dt.UTC),
        on_dropped: Callable[[str], None] = lambda _: None,
    ) -> None:
        self.writer, self.clock, self.wall, self.on_dropped = writer, clock, wall, on_dropped
        self.bucket = TokenBucket(BURST, REFILL_PER_SECOND, clock())
        self.series: dict[Denial, _Series] = {}
        self._queue: queue.Queue[Denial | None] = queue.Queue(QUEUE_SIZE)
        self._thread: threading.Thread | None = None
        self._stopping = threading.Event()

    # The request path ----------------------------------------------------------------------

    def offer(self, request: AdmissionRequest, endpoint: str, decision: Decision) -> None:
        for denial in denials_of(request, endpoint, decision):
            try:
                self._queue.put_nowait(denial)
            except queue.Full:
                self.on_dropped("queue full")

    # The sender ----------------------------------------------------------------------------

    def handle(self, denial: Denial, now: float) -> None:
        series = self.series.get(denial)
        if series is not None and now - series.seen < AGGREGATE_SECONDS:
            series.count += 1
            series.last, series.seen = self.wall(), now
            return
        self._expire(now)
        if len(self.series) >= MAX_SERIES:
            self.on_dropped("too many distinct denials")
        elif not self.bucket.take(now):
            self.on_dropped("rate limited")
        else:
            self._create(denial, now)

    def flush(self, now: float) -> None:
        """Write the counts raised since the last flush, as tokens allow."""
        for series in self.series.values():
            if series.count == series.written:
                continue
            if not self.bucket.take(now):
                return  # the rest wait for the next flush: their counts only grow
            patch = {"count": series.count, "lastTimestamp": _timestamp(series.last)}
            if self._send(functools.partial(self.writer.patch, series.name, patch)):
                series.written = series.count

    def _create(self, denial: Denial, now: float) -> None:
        stamp = self.wall()
        series = _Series(f"{COMPONENT}.{uuid.uuid4().hex[:16]}", stamp, stamp, 1, 1, now)
        body = event_body(denial, series.name, self.writer.namespace, stamp)
        if self._send(functools.partial(self.writer.create, body)):
            self.series[denial] = series

    def _expire(self, now: float) -> None:
        for denial in [d for d, s in self.series.items() if now - s.seen >= AGGREGATE_SECONDS]:
            del self.series[denial]

    def _send(self, write: Callable[[], None]) -> bool:
        try:
            write()
        except ClusterError as e:
            log.warning("cannot write a denial event: %s", e)
            self.on_dropped("write failed")
            return False
        return True

    # Lifecycle -----------------------------------------------------------------------------

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="denial-events", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stopping.set()
        with contextlib.suppress(queue.Full):  # wakes the sender; a full queue wakes it anyway
            self._queue.put_nowait(None)
        if self._thread is not None:
            self._thread.join(timeout=5.0)

    def _run(self) -> None:
        next_flush = self.clock() + FLUSH_SECONDS
        while not self._stopping.is_set():
            try:
                item = self._queue.get(timeout=max(0.0, next_flush - self.clock()))
            except queue.Empty:
                item = _TICK
            now = self.clock()
            if item is not None and item is not _TICK:
                self.handle(item, now)
            if now >= next_flush:
                self.flush(now)
                next_flush = now + FLUSH_SECONDS
        self.flush(self.clock())


_TICK = Denial("", "", "", "", "", "")  # the queue had nothing before the next flush was due


def event_body(denial: Denial, name: str, namespace: str, stamp: dt.datetime) -> dict[str, Any]:
    where = f"{denial.namespace}/{denial.name}" if denial.namespace else denial.name
    message = (
        f"Admission webhook {COMPONENT} denied a request on /{denial.endpoint}: "
        f"{denial.kind} {where}, policy {denial.policy}"
    )
    return {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "annotations": {
                # Gatekeeper's annotation keys, so tools that read its admission events read ours.
                "process": "admission",
                "event_type": "violation",
                "constraint_name": denial.policy,
                "constraint_action": "deny",
                "resource_kind": denial.kind,
                "resource_api_version": denial.api_version,
                "resource_namespace": denial.namespace,
                "resource_name": denial.name,
            },
        },
        "involvedObject": {
            "kind": denial.kind,
            "name": denial.name,
            "namespace": namespace,
            "apiVersion": denial.api_version,
        },
        "reason": REASON,
        "type": "Warning",
        "message": clean_text(message, 1024),
        "source": {"component": COMPONENT},
        "reportingComponent": COMPONENT,
        "firstTimestamp": _timestamp(stamp),
        "lastTimestamp": _timestamp(stamp),
        "count": 1,
    }


def _timestamp(stamp: dt.datetime) -> str:
    return stamp.astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
