"""The running service as the HTTP layer sees it: built by the composition root, consumed by app.py."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from concurrent.futures import Executor
from dataclasses import dataclass, field

from webhook.config import FailureMode
from webhook.decision import Decision
from webhook.metrics import Metrics
from webhook.types import AdmissionRequest, Endpoint

Hook = Callable[[], Awaitable[None]]
# The request, its endpoint, the decision, the seconds it took, and the body as read.
RecordHook = Callable[[AdmissionRequest, Endpoint, Decision, float, bytes], Awaitable[Decision]]


async def unrecorded(
    request: AdmissionRequest, endpoint: Endpoint, decision: Decision, seconds: float, body: bytes
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
    # Whether an endpoint's reviews run on a thread, so the event loop stays free and the
    # deadline is kept even when a review is slow: Rego evaluation (regopy releases the GIL;
    # OPA waits on the network) and strict quota's calls to the Kubernetes API. Quick reviews
    # stay on the loop, where they cost less than the hop to a thread.
    threaded: Callable[[Endpoint], bool] = lambda _: False
    # For a threaded endpoint: the same review, tried first on the loop; it raises WouldBlock,
    # having reserved nothing, when it reaches slow work (most pods never do: prechecks).
    review_now: Callable[[AdmissionRequest, Endpoint], Decision] | None = None
    executor: Executor | None = None  # where threaded reviews run; None: the loop's default
    body_timeout_seconds: float = 10.0
    max_inflight: int = 256
    # A cost estimate (the request and its body's size): True sends the review to `heavy_executor`,
    # a lane of its own that holds at most `max_heavy_inflight` of them, so heavy reviews never
    # take the threads and the event loop that ordinary ones need.
    is_heavy: Callable[[AdmissionRequest, int], bool] = lambda _, __: False
    heavy_executor: Executor | None = None
    # One runs, the rest wait their turn: a controller creating many large pods at once gets them
    # reviewed one after another within their budgets, rather than refused. The bound keeps
    # whoever sends heavy objects from queueing without end (each holds its decoded body).
    max_heavy_inflight: int = 16
    # Told of every denial once it is answered (--emit-denial-events); must only queue, never wait.
    on_denial: Callable[[AdmissionRequest, Endpoint, Decision], None] | None = None
