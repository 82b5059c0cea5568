"""A decision record says whether the answer came from a review or from the failure mode."""

from __future__ import annotations

import pytest

from tests.audit.logs import START, entry, request
from tests.support.pods import make_pod, res
from webhook.audit.record import decision_record
from webhook.decision import ALLOW, Decision, deny, failure_decision
from webhook.policy.model import PolicySet
from webhook.review import ReviewDeps, review

CASES: list[tuple[str, Decision, str, str | None]] = [
    ("a reviewed allow", ALLOW, "allowed", None),
    ("a reviewed denial", deny("no privileged containers"), "denied", None),
    (
        "a spent time budget, failing closed",
        failure_decision("closed", "validate", "ran out of time", code=504, unreviewed="timeout"),
        "denied",
        "timeout",
    ),
    (
        "overload, failing open",
        failure_decision("open", "mutate", "is overloaded", code=429, unreviewed="overload"),
        "warned",
        "overload",
    ),
    (
        "an internal error on the advisory endpoint, which never denies",
        failure_decision("closed", "advisory", "internal error (ref 1)", code=500, unreviewed="internal"),
        "warned",
        "internal",
    ),
]


@pytest.mark.parametrize(("case", "decision", "outcome", "unreviewed"), CASES, ids=[c[0] for c in CASES])
def test_an_answer_without_a_review_is_marked_in_its_record(
    case: str, decision: Decision, outcome: str, unreviewed: str | None
) -> None:
    record = entry("uid-1", decision)
    assert record["decision"] == outcome
    assert record.get("unreviewed") == unreviewed


# The record's "gpus" is the count review() read for every rule: whichever vendor, and in an exempt
# namespace too (nothing judges the pod there, but reports still count what it holds).
GPUS_RECORDED = [
    ("a reviewed NVIDIA pod", "team-a", {"nvidia.com/gpu": 2}, 2.0),
    ("another vendor's devices", "team-a", {"amd.com/gpu": 3}, 3.0),
    ("a MIG slice", "team-a", {"nvidia.com/mig-3g.40gb": 1}, round(3 / 7, 4)),
    ("an exempt namespace", "gpu-operator", {"nvidia.com/gpu": 1}, 1.0),
    ("a pod without accelerators", "team-a", {"cpu": 1}, None),
]


@pytest.mark.parametrize(
    ("case", "namespace", "amounts", "gpus"), GPUS_RECORDED, ids=[c[0] for c in GPUS_RECORDED]
)
def test_the_record_counts_what_review_read(
    case: str, namespace: str, amounts: dict[str, int], gpus: float | None
) -> None:
    pod = make_pod("trainer", namespace, [res("main", amounts)])
    admission = request("uid-1", namespace=namespace, obj=pod)
    decision = review(admission, "validate", ReviewDeps(policies=PolicySet()))
    record = decision_record(
        admission,
        decision,
        endpoint="validate",
        latency_ms=1.0,
        now=START,
        instance="t/1",
        policy_version="v",
    )
    assert record.get("gpus") == gpus, case
