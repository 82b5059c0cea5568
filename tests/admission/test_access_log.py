"""Which admissions the server log shows at info level: denials, unreviewed answers and policy
warnings; plain allows and the webhook's own routine warnings are debug."""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator

import pytest

from webhook.app import _account
from webhook.decision import ALLOW, Decision, Finding, deny, failure_decision
from webhook.metrics import Metrics
from webhook.service import Readiness, Service
from webhook.types import AdmissionRequest

REQUEST: AdmissionRequest = {  # type: ignore[typeddict-item]
    "uid": "u-1",
    "operation": "CREATE",
    "kind": {"group": "", "version": "v1", "kind": "Pod"},
    "namespace": "ml",
    "name": "trainer",
}
CASES: list[tuple[str, Decision, int]] = [
    ("allowed", ALLOW, logging.DEBUG),
    (
        "policy-warned",
        Decision(
            allowed=True,
            warnings=("GpuMaxPerPod: too many",),
            findings=(Finding("GpuMaxPerPod", "warn", "too many"),),
        ),
        logging.INFO,
    ),
    # The MIG rounding warning comes with every MIG pod: routine, and in the audit log anyway.
    ("own-warning", Decision(allowed=True, warnings=("MIG profile 1g.10gb rounds up",)), logging.DEBUG),
    ("dryrun-finding", Decision(allowed=True, findings=(Finding("P", "dryrun", "x"),)), logging.DEBUG),
    ("denied", deny("no"), logging.INFO),
    (
        "unreviewed",
        failure_decision("open", "validate", "is overloaded", code=429, unreviewed="overload"),
        logging.INFO,
    ),
]


@pytest.fixture
def http_log(caplog: pytest.LogCaptureFixture) -> Iterator[pytest.LogCaptureFixture]:
    """Once logs.configure() has run in this process, our loggers stop at "webhook" instead of
    reaching the root logger, where caplog listens: let them through for the test."""
    logger = logging.getLogger("webhook")
    propagate, logger.propagate = logger.propagate, True
    try:
        yield caplog
    finally:
        logger.propagate = propagate


@pytest.mark.parametrize(("decision", "level"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_routine_answers_are_debug_and_the_rest_info(
    http_log: pytest.LogCaptureFixture, decision: Decision, level: int
) -> None:
    service = Service(
        review=lambda _, __: decision,
        readiness=lambda: Readiness(True, {}),
        metrics=Metrics(),
        max_body_bytes=1,
    )
    with http_log.at_level(logging.DEBUG, logger="webhook.http"):
        _account(service, "validate", REQUEST, decision, time.perf_counter())
    [record] = [r for r in http_log.records if r.getMessage() == "admission"]
    assert record.levelno == level
    assert record.__dict__["uid"] == "u-1" and record.__dict__["object_name"] == "trainer"


def test_nothing_is_built_for_a_level_that_is_off(http_log: pytest.LogCaptureFixture) -> None:
    service = Service(
        review=lambda _, __: ALLOW, readiness=lambda: Readiness(True, {}), metrics=Metrics(), max_body_bytes=1
    )
    with http_log.at_level(logging.INFO, logger="webhook.http"):
        _account(service, "mutate", REQUEST, ALLOW, time.perf_counter())
    assert not [r for r in http_log.records if r.getMessage() == "admission"]
