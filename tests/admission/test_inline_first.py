"""Threaded endpoints try the review on the event loop first; only a review that would block moves.

Real reviews are covered end to end by the HTTP tests (clean pods are answered on the loop,
and a slow policy is cut off on its thread in test_robustness.py); this pins the hand-off rules.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

import pytest

from webhook.app import _evaluate
from webhook.decision import ALLOW, Decision, deny
from webhook.errors import WouldBlock
from webhook.metrics import Metrics
from webhook.service import Readiness, Service
from webhook.types import AdmissionRequest, Endpoint

REQUEST: AdmissionRequest = {"uid": "u", "operation": "CREATE"}  # type: ignore[typeddict-item]
ON_THREAD = deny("answered on a thread")


def _blocks(_: AdmissionRequest, __: Endpoint) -> Decision:
    raise WouldBlock("Rego evaluation")


def _fails(_: AdmissionRequest, __: Endpoint) -> Decision:
    raise RuntimeError("a bug")


def _allows(_: AdmissionRequest, __: Endpoint) -> Decision:
    return ALLOW


Review = Callable[[AdmissionRequest, Endpoint], Decision]
CASES: list[tuple[str, Review | None, str]] = [
    ("answered on the loop", _allows, "loop"),
    ("would block: moved to a thread", _blocks, "thread"),
    ("no loop review configured", None, "thread"),
    ("a bug on the loop is the failure decision, not a retry", _fails, "failure"),
]


@pytest.mark.parametrize(("review_now", "where"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_the_loop_answers_what_it_can_and_hands_off_the_rest(review_now: Review | None, where: str) -> None:
    threads: list[str] = []

    def on_thread(_: AdmissionRequest, __: Endpoint) -> Decision:
        threads.append(threading.current_thread().name)
        return ON_THREAD

    with ThreadPoolExecutor(1, thread_name_prefix="review") as executor:
        service = Service(
            review=on_thread,
            readiness=lambda: Readiness(True, {}),
            metrics=Metrics(),
            max_body_bytes=1024,
            threaded=lambda _: True,
            review_now=review_now,
            executor=executor,
        )
        decision = asyncio.run(_evaluate(service, REQUEST, "validate", deadline=float("inf"), load=1))
    if where == "loop":
        assert decision is ALLOW and threads == []
    elif where == "thread":
        assert decision is ON_THREAD and threads == ["review_0"]
    else:
        assert decision.code == 500 and "internal error" in decision.message and threads == []
        assert decision.unreviewed == "internal"
