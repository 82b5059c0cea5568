"""The HTTP layer: starlette routes, body limits, and the one place errors become statuses.

The only importer of starlette. It decodes, delegates to the service's review,
and encodes; it knows nothing of policies.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import time
import urllib.parse
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable

import orjson
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from webhook.admission import encode_response, parse_review
from webhook.budget import budget_seconds
from webhook.decision import Decision, failure_decision
from webhook.errors import (
    AuditUnavailable,
    MalformedReview,
    PayloadTooLarge,
    RequestError,
    RequestTimeout,
    UnsupportedMediaType,
    WouldBlock,
)
from webhook.metrics import CONTENT_TYPE as METRICS_CONTENT_TYPE
from webhook.service import Service
from webhook.types import AdmissionRequest, Endpoint

log = logging.getLogger("webhook.http")

STATUS_BY_ERROR: dict[type[RequestError], int] = {
    MalformedReview: 400,
    RequestTimeout: 408,
    PayloadTooLarge: 413,
    UnsupportedMediaType: 415,
}
JSON = "application/json"
# Bodies up to this size are decoded on the loop (tens of microseconds); above it, on a thread.
PARSE_ON_LOOP_BYTES = 128 * 1024
Handler = Callable[[Request], Awaitable[Response]]


def build_app(service: Service) -> Starlette:
    lane = HeavyLane()  # one for every endpoint: they share its executor
    routes = [
        Route("/mutate", admission_handler(service, "mutate", lane), methods=["POST"]),
        Route("/validate", admission_handler(service, "validate", lane), methods=["POST"]),
        Route("/validate-advisory", admission_handler(service, "advisory", lane), methods=["POST"]),
        Route("/healthz", healthz, methods=["GET"]),
        Route("/readyz", readyz_handler(service), methods=["GET"]),
        Route("/metrics", metrics_handler(service), methods=["GET"]),
    ]
    return Starlette(
        routes=routes,
        exception_handlers={HTTPException: http_error, Exception: unexpected_error},
        lifespan=_lifespan(service),
    )


class Inflight:
    """Reviews this worker has started and not yet answered (bodies fully read: a slow client
    holds no slot); past the limit new ones are answered at once by the failure mode."""

    def __init__(self) -> None:
        self.count = 0


class HeavyLane:
    """Heavy reviews handed to the heavy executor and not yet finished. A review that outlives its
    deadline keeps its place until its thread is done: a thread cannot be stopped, and counting it
    free would queue more heavy work behind it."""

    def __init__(self) -> None:
        self.count = 0

    def release(self, _: object) -> None:
        self.count -= 1


def admission_handler(service: Service, endpoint: Endpoint, lane: HeavyLane | None = None) -> Handler:
    inflight = Inflight()
    lane = lane or HeavyLane()

    async def handle(request: Request) -> Response:
        started = time.perf_counter()
        deadline = started + budget_seconds(_query_value(request.scope.get("query_string", b""), "timeout"))
        log.debug("request received", extra={"endpoint": endpoint})
        try:
            admission, received = await _read_review(request, service)
        except RequestError as e:
            return _reject(service, endpoint, e, started)
        costly = service.heavy_executor is not None and service.is_heavy(admission, len(received))
        heavy = lane if costly else None
        inflight.count += 1
        try:
            return await _answer(
                service, endpoint, (admission, received), started, deadline, inflight.count, heavy
            )
        finally:
            inflight.count -= 1

    return handle


async def _answer(
    service: Service,
    endpoint: Endpoint,
    review: tuple[AdmissionRequest, bytes],
    started: float,
    deadline: float,
    load: int,
    heavy: HeavyLane | None = None,
) -> Response:
    admission, received = review  # the body as read: the audit record's digest is taken from it
    decision = await _evaluate(service, admission, endpoint, deadline, load, heavy)
    try:
        seconds = time.perf_counter() - started
        decision = await service.record(admission, endpoint, decision, seconds, received)
    except AuditUnavailable as e:
        service.metrics.observe(endpoint, "unrecorded", time.perf_counter() - started)
        return error_response(503, str(e))
    body = encode_response(admission["uid"], decision, endpoint)
    _account(service, endpoint, admission, decision, started)
    return Response(body, media_type=JSON)


async def _read_review(request: Request, service: Service) -> tuple[AdmissionRequest, bytes]:
    """The request, and its body (its size is the cost estimate's; the audit record reads it)."""
    _check_content_type(request)
    try:
        async with asyncio.timeout(service.body_timeout_seconds):  # no extra task, unlike wait_for
            body = await read_body(request, service.max_body_bytes)
    except TimeoutError:
        raise RequestTimeout(f"body not received within {service.body_timeout_seconds:g}s") from None
    return await parse_off_loop(body), body


async def parse_off_loop(body: bytes) -> AdmissionRequest:
    """A large body is decoded on a thread: its decoding and checks take milliseconds, which the
    event loop owes every other connection."""
    if len(body) <= PARSE_ON_LOOP_BYTES:
        return parse_review(body)
    return await asyncio.to_thread(parse_review, body)


async def _evaluate(
    service: Service,
    admission: AdmissionRequest,
    endpoint: Endpoint,
    deadline: float,
    load: int,
    heavy: HeavyLane | None = None,
) -> Decision:
    """Review in time, or answer at once by the failure mode: shedding load beats timing out.
    A heavy review not done fails closed (_heavy_review says why)."""
    mode = "closed" if heavy is not None else service.failure_mode
    if load > service.max_inflight:
        return failure_decision(mode, endpoint, "is overloaded", code=429, unreviewed="overload")
    remaining = deadline - time.perf_counter()
    if remaining <= 0:
        return failure_decision(mode, endpoint, "ran out of time", code=504, unreviewed="timeout")
    if heavy is not None:  # never on the loop, nor on the threads ordinary reviews use
        return await _heavy_review(service, admission, endpoint, remaining, heavy)
    if not service.threaded(endpoint):
        return _decide(service.review, admission, endpoint, service)
    if service.review_now is not None:
        with contextlib.suppress(WouldBlock):
            return _decide(service.review_now, admission, endpoint, service)
    try:
        evaluation = asyncio.get_running_loop().run_in_executor(
            service.executor, _decide, service.review, admission, endpoint, service
        )
        return await asyncio.wait_for(evaluation, remaining)
    except TimeoutError:
        return failure_decision(
            service.failure_mode, endpoint, "ran out of time", code=504, unreviewed="timeout"
        )


async def _heavy_review(
    service: Service, admission: AdmissionRequest, endpoint: Endpoint, remaining: float, lane: HeavyLane
) -> Decision:
    """A heavy review that cannot be done in time is refused whatever `--failure-mode` says: that
    mode is for the webhook's own trouble, and whoever sends heavy objects could otherwise fill the
    lane, or outlast the budget, to have the next one admitted unreviewed."""
    if lane.count >= service.max_heavy_inflight:
        return failure_decision(
            "closed", endpoint, "is busy with large reviews", code=429, unreviewed="overload"
        )
    lane.count += 1
    log.debug("heavy review started", extra={"endpoint": endpoint, "heavy_inflight": lane.count})
    assert service.heavy_executor is not None  # the caller routes here only when there is one
    job = service.heavy_executor.submit(_decide, service.review, admission, endpoint, service)
    loop = asyncio.get_running_loop()
    # Its place is free when the thread is done (or the job never started), not when we stop waiting.
    job.add_done_callback(functools.partial(_release_soon, loop, lane))
    try:
        return await asyncio.wait_for(asyncio.shield(asyncio.wrap_future(job)), remaining)
    except TimeoutError:
        job.cancel()  # a job still waiting its turn never runs; a running one finishes
        return failure_decision(
            "closed", endpoint, "ran out of time on a large review", code=504, unreviewed="timeout"
        )


def _release_soon(loop: asyncio.AbstractEventLoop, lane: HeavyLane, done: object) -> None:
    with contextlib.suppress(RuntimeError):  # the loop has closed: the server is shutting down
        loop.call_soon_threadsafe(lane.release, done)


async def read_body(request: Request, limit: int) -> bytes:
    """Read at most `limit` bytes; refuse a larger body as soon as that is known."""
    declared = request.headers.get("content-length")
    if declared is not None:
        if not declared.isdigit():
            raise MalformedReview("Content-Length is not a number")
        if int(declared) > limit:
            raise PayloadTooLarge(f"body of {declared} bytes exceeds the limit of {limit}")
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise PayloadTooLarge(f"body exceeds the limit of {limit} bytes")
        chunks.append(chunk)
    return b"".join(chunks)


def _query_value(query: bytes, name: str) -> str | None:
    """One query parameter, the last if repeated, as starlette's QueryParams reads it; most
    requests carry only `timeout`, and building QueryParams for it costs more than the lookup.
    kube-apiserver sends the same short query (`?timeout=10s`) on every call: short ones are
    remembered, long ones (only a hand-made request has them) are read each time."""
    if len(query) <= 256:
        return _short_query_value(query, name)
    return _read_query_value(query, name)


@functools.lru_cache(maxsize=64)
def _short_query_value(query: bytes, name: str) -> str | None:
    return _read_query_value(query, name)


def _read_query_value(query: bytes, name: str) -> str | None:
    if not query:
        return None
    found = [value for key, value in urllib.parse.parse_qsl(query.decode("latin-1"), True) if key == name]
    return found[-1] if found else None


def _check_content_type(request: Request) -> None:
    media_type = request.headers.get("content-type", "").split(";", 1)[0].strip().lower()
    if media_type != JSON:
        raise UnsupportedMediaType(f"content type must be {JSON}, got {media_type or 'none'!r}")


def _decide(
    review: Callable[[AdmissionRequest, Endpoint], Decision],
    admission: AdmissionRequest,
    endpoint: Endpoint,
    service: Service,
) -> Decision:
    """Run the review; a bug must become the configured failure decision, never a 500."""
    try:
        return review(admission, endpoint)
    except WouldBlock:
        raise
    except Exception:
        ref = uuid.uuid4().hex[:12]
        log.exception("review failed", extra={"ref": ref, "uid": admission["uid"], "endpoint": endpoint})
        why = f"internal error (ref {ref})"
        return failure_decision(service.failure_mode, endpoint, why, code=500, unreviewed="internal")


def _reject(service: Service, endpoint: Endpoint, error: RequestError, started: float) -> Response:
    status = STATUS_BY_ERROR.get(type(error), 400)
    service.metrics.observe(endpoint, "rejected", time.perf_counter() - started)
    log.info("rejected request", extra={"endpoint": endpoint, "status": status, "error": str(error)})
    return error_response(status, str(error))


def _account(
    service: Service,
    endpoint: Endpoint,
    admission: AdmissionRequest,
    decision: Decision,
    started: float,
) -> None:
    elapsed = time.perf_counter() - started
    outcome = _outcome(decision)
    service.metrics.observe(endpoint, outcome, elapsed, _deciding_policy(decision, outcome))
    if outcome == "denied" and service.on_denial is not None:
        service.on_denial(admission, endpoint, decision)
    level = logging.INFO if _noteworthy(decision, outcome) else logging.DEBUG
    if not log.isEnabledFor(level):
        return
    log.log(
        level,
        "admission",
        extra={
            "endpoint": endpoint,
            "uid": admission["uid"],
            "operation": admission["operation"],
            "kind": admission["kind"]["kind"],
            "namespace": admission.get("namespace", ""),
            "object_name": admission.get("name", ""),
            "decision": outcome,
            "code": decision.code,
            "patch_ops": len(decision.patch),
            "ms": round(elapsed * 1000, 3),
        },
    )


def _noteworthy(decision: Decision, outcome: str) -> bool:
    """Denials, answers without a review, and a policy's warn findings are logged at info. Plain
    allows, and warnings the webhook writes itself (a MIG size rounded up, a DRA estimate), are
    most requests and already in the metrics and the audit log: at info level their lines cost
    about 5% of /mutate's throughput (bench/), so they are debug, as Gatekeeper logs only denials."""
    if outcome in ("denied", "unreviewed"):
        return True
    return outcome == "warned" and any(f.action == "warn" for f in decision.findings)


def _outcome(decision: Decision) -> str:
    if decision.unreviewed:
        return "unreviewed"
    if not decision.allowed:
        return "denied"
    return "warned" if decision.warnings else "allowed"


def _deciding_policy(decision: Decision, outcome: str) -> str:
    """The policy whose finding denied (or warned): the first in review order; "" for an allowed
    request, one answered unreviewed, or a denial no finding names."""
    wanted = "deny" if outcome == "denied" else "warn" if outcome == "warned" else None
    if wanted is None:
        return ""
    return next((f.policy for f in decision.findings if f.action == wanted), "")


async def healthz(_: Request) -> Response:
    return Response(b'{"status":"ok"}', media_type=JSON)


def readyz_handler(service: Service) -> Handler:
    async def readyz(_: Request) -> Response:
        state = service.readiness()
        body = orjson.dumps({"ready": state.ready, "checks": dict(state.checks)})
        return Response(body, status_code=200 if state.ready else 503, media_type=JSON)

    return readyz


def metrics_handler(service: Service) -> Handler:
    async def metrics(_: Request) -> Response:
        return Response(service.metrics.render(), media_type=METRICS_CONTENT_TYPE)

    return metrics


def error_response(status: int, message: str, headers: dict[str, str] | None = None) -> Response:
    return Response(orjson.dumps({"error": message}), status_code=status, media_type=JSON, headers=headers)


async def http_error(_: Request, exc: Exception) -> Response:
    assert isinstance(exc, HTTPException)
    return error_response(exc.status_code, exc.detail, headers=dict(exc.headers or {}))


async def unexpected_error(_: Request, exc: Exception) -> Response:
    log.error("unhandled error", extra={"error_type": type(exc).__name__})
    return error_response(500, "internal error")


def _lifespan(
    service: Service,
) -> Callable[[Starlette], contextlib.AbstractAsyncContextManager[None]]:
    @contextlib.asynccontextmanager
    async def lifespan(_: Starlette) -> AsyncIterator[None]:
        for start in service.on_startup:
            await start()
        try:
            yield
        finally:
            for stop in service.on_shutdown:
                await stop()

    return lifespan
