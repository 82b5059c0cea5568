"""Heavy reviews in flight never cost ordinary ones their thread: through a real uvicorn over TLS.

Three heavy Deployments (each within every size bound, each a second or more of Rego) are sent at
once, as the red-team's were; once the server logs that one has started, ordinary Deployments are
reviewed with a one-second budget. Each must get its own decision, never the failure mode's.
Without the heavy lane they waited behind the heavy reviews on the two review threads and were
answered 504 by the failure mode.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import Executor, ThreadPoolExecutor
from dataclasses import replace
from pathlib import Path
from typing import Any

import orjson
import pytest

from tests.support.apiserver import check_reply
from tests.support.heavy import HEAVY_DEPLOYMENT, deployment
from tests.support.policies import BUNDLED_POLICIES
from tests.support.reviews import make_review
from tests.support.server import ServerProcess, start_server
from webhook.app import HeavyLane, _evaluate
from webhook.decision import ALLOW, Decision, deny
from webhook.metrics import Metrics
from webhook.service import Readiness, Service
from webhook.types import AdmissionRequest, Endpoint
from webhook.validation import bounds

HEAVY = 3
ORDINARY = 8


ORDINARY_DEPLOYMENT = deployment("web", [{"name": "web", "image": "nginx:1.27"}])


@pytest.fixture
def lane_server(cert_dir: Path) -> Iterator[ServerProcess]:
    args = ["--cert-dir", str(cert_dir), "--policies", str(BUNDLED_POLICIES), "--log-level", "debug"]
    server = start_server(args, ca_file=cert_dir / "ca.crt")
    try:
        yield server
    finally:
        server.stop_gracefully()


def test_the_heavy_deployment_is_heavy_and_within_every_bound() -> None:
    assert bounds.oversize(HEAVY_DEPLOYMENT) is None
    assert bounds.is_heavy(HEAVY_DEPLOYMENT, None, len(orjson.dumps(HEAVY_DEPLOYMENT)))
    assert not bounds.is_heavy(ORDINARY_DEPLOYMENT, None, len(orjson.dumps(ORDINARY_DEPLOYMENT)))


def test_ordinary_reviews_keep_their_threads_while_heavy_ones_run(lane_server: ServerProcess) -> None:
    heavy_answers: list[dict[str, Any]] = []

    def send_heavy() -> None:
        review = make_review(HEAVY_DEPLOYMENT)
        reply = lane_server.client(timeout=120).post_json("/validate?timeout=30s", review)
        heavy_answers.append(check_reply(review, reply, "validate"))

    senders = [threading.Thread(target=send_heavy) for _ in range(HEAVY)]
    for sender in senders:
        sender.start()
    lane_server.wait_for_log(lambda e: e.get("msg") == "heavy review started")
    ordinary = []
    for _ in range(ORDINARY):
        review = make_review(ORDINARY_DEPLOYMENT)
        reply = lane_server.client().post_json("/validate?timeout=1s", review)
        ordinary.append(check_reply(review, reply, "validate"))
    for sender in senders:
        sender.join()
    assert all(answer["allowed"] and "status" not in answer for answer in ordinary), ordinary
    # Each heavy one has its own decision, or (past the lane's bound) the busy answer.
    messages = [answer["status"]["message"] for answer in heavy_answers]
    assert len(messages) == HEAVY and not any(answer["allowed"] for answer in heavy_answers)
    reviewed = [m for m in messages if m.startswith("[") and "Deployment heavy: container" in m]
    busy = [m for m in messages if "busy with large reviews" in m]
    assert len(reviewed) >= 1 and len(reviewed) + len(busy) == HEAVY, messages


def _lane_service(review: Callable[[AdmissionRequest, Endpoint], Decision], executor: Executor) -> Service:
    return Service(
        review=review,
        readiness=lambda: Readiness(True, {}),
        metrics=Metrics(),
        max_body_bytes=1024,
        failure_mode="open",
        threaded=lambda _: True,
        review_now=lambda _, __: ALLOW,  # an ordinary review is answered on the loop
        executor=executor,
        is_heavy=lambda _, __: True,
        heavy_executor=executor,
        max_heavy_inflight=1,
    )


REQUEST: AdmissionRequest = {"uid": "u", "operation": "CREATE"}  # type: ignore[typeddict-item]


def test_a_full_lane_refuses_heavy_reviews_even_when_failing_open() -> None:
    """Else whoever sends heavy objects fills the lane to have the next one admitted unreviewed."""
    started, release = threading.Event(), threading.Event()

    def slow(_: AdmissionRequest, __: Endpoint) -> Decision:
        started.set()
        release.wait()
        return deny("reviewed")

    async def scenario() -> tuple[Decision, Decision, Decision]:
        with ThreadPoolExecutor(1) as executor:
            service = _lane_service(slow, executor)
            lane = HeavyLane()
            first = asyncio.ensure_future(_evaluate(service, REQUEST, "validate", float("inf"), 1, lane))
            await asyncio.to_thread(started.wait)
            second = await _evaluate(service, REQUEST, "validate", float("inf"), 1, lane)
            advisory = await _evaluate(service, REQUEST, "advisory", float("inf"), 1, lane)
            release.set()
            return await first, second, advisory

    first, second, advisory = asyncio.run(scenario())
    assert first.message == "reviewed"
    assert not second.allowed and second.code == 429 and second.unreviewed == "overload"
    assert advisory.allowed  # the advisory webhook never denies


def test_a_heavy_review_out_of_time_is_refused_even_when_failing_open() -> None:
    release = threading.Event()

    def stuck(_: AdmissionRequest, __: Endpoint) -> Decision:
        release.wait()
        return ALLOW

    async def scenario() -> tuple[Decision, int]:
        with ThreadPoolExecutor(1) as executor:
            lane = HeavyLane()
            service = _lane_service(stuck, executor)
            spent = await _evaluate(service, REQUEST, "validate", 0.0, 1, lane)  # before it starts
            assert not spent.allowed and spent.unreviewed == "timeout" and lane.count == 0
            soon = time.perf_counter() + 0.05  # the review is stuck until released: it runs out
            decision = await _evaluate(service, REQUEST, "validate", soon, 1, lane)
            held = lane.count  # the thread still runs: its place stays taken
            release.set()
            return decision, held

    decision, held = asyncio.run(scenario())
    assert not decision.allowed and decision.unreviewed == "timeout" and held == 1


def test_a_heavy_review_that_runs_out_of_time_waiting_never_runs() -> None:
    started, release, ran = threading.Event(), threading.Event(), []

    def stuck(request: AdmissionRequest, _: Endpoint) -> Decision:
        ran.append(request["uid"])
        started.set()
        release.wait()
        return ALLOW

    async def scenario() -> tuple[Decision, int]:
        with ThreadPoolExecutor(1) as executor:
            service = replace(_lane_service(stuck, executor), max_heavy_inflight=2)
            lane = HeavyLane()
            first = asyncio.ensure_future(_evaluate(service, REQUEST, "validate", float("inf"), 1, lane))
            await asyncio.to_thread(started.wait)  # the first review holds the lane's one thread
            waiting: AdmissionRequest = {**REQUEST, "uid": "second"}
            soon = time.perf_counter() + 0.05
            second = await _evaluate(service, waiting, "validate", soon, 1, lane)
            release.set()
            await first
            await asyncio.to_thread(executor.shutdown)  # every job done or cancelled
            await asyncio.to_thread(lambda: None)  # the releases the jobs scheduled have run
            return second, lane.count

    second, left = asyncio.run(scenario())
    assert not second.allowed and second.unreviewed == "timeout"
    assert ran == ["u"] and left == 0  # the second never ran, and both places were freed
