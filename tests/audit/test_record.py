"""A decision record says whether the answer came from a review or from the failure mode."""

from __future__ import annotations

import pytest

from tests.audit.logs import entry
from webhook.decision import ALLOW, Decision, deny, failure_decision

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
