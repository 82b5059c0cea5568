"""The running service as the HTTP layer sees it: built by the composition root, consumed by app.py."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field

from webhook.config import FailureMode
from webhook.decision import Decision
from webhook.metrics import Metrics
from webhook.types import AdmissionRequest, Endpoint

Hook = Callable[[], Awaitable[None]]
RecordHook = Callable[[AdmissionRequest, Endpoint, Decision, float], Awaitable[Decision]]


async def unrecorded(
    request: AdmissionRequest, endpoint: Endpoint, decision: Decision, seconds: float
) -> Decision:
    """The record hook when no audit log is configured: the decision goes out as it is."""
    return decision


@dataclass(frozen=True)
class Readiness:
    ready: bool
    checks: Mapping[str, str]


@dataclass(frozen=True)
class Service:
    review: Callable[[AdmissionRequest, Endpoint], Decision]
    readiness: Callable[[], Readiness]
    metrics: Metrics
    max_body_bytes: int
    failure_mode: FailureMode = "closed"
    on_startup: Sequence[Hook] = field(default_factory=tuple)
    on_shutdown: Sequence[Hook] = field(default_factory=tuple)
    record: RecordHook = unrecorded
    # Strict quota mode calls the Kubernetes API inside a review: run reviews in a thread then.
    blocking_review: bool = False
    body_timeout_seconds: float = 10.0
    max_inflight: int = 256
