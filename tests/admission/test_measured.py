"""The bounds the heavy-lane estimate found, kept for the request's own review and nothing else."""

from __future__ import annotations

import copy
from typing import Any, cast

import pytest

from tests.support.heavy import HEAVY_DEPLOYMENT
from webhook.measured import MAX_KEPT, Measured
from webhook.review import ReviewDeps, _oversize
from webhook.types import AdmissionRequest
from webhook.validation import bounds

POD = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": {"containers": [{"name": "c"}]}}
OVERSIZED = {**POD, "metadata": {"name": "p", "labels": {f"k{i}": "v" for i in range(200)}}}


def _request(obj: dict[str, Any], old: dict[str, Any] | None = None) -> AdmissionRequest:
    made: Any = {"uid": "u", "operation": "UPDATE" if old else "CREATE", "object": obj, "oldObject": old}
    return cast(AdmissionRequest, made)


@pytest.mark.parametrize(
    ("obj", "heavy", "kept"),
    [(POD, False, True), (OVERSIZED, False, False), (HEAVY_DEPLOYMENT, True, False)],
    ids=["ordinary", "past-a-bound", "heavy"],
)
def test_what_is_kept(obj: dict[str, Any], heavy: bool, kept: bool) -> None:
    measured = Measured()
    request = _request(obj)
    assert measured.is_heavy(request, 100) is heavy
    assert (measured.checked(request) is not None) is kept


def test_is_heavy_agrees_with_the_bounds_module() -> None:
    for obj in (POD, OVERSIZED, HEAVY_DEPLOYMENT):
        request = _request(obj)
        expected = bounds.is_heavy(obj, None, 100) and bounds.oversize(obj, None) is None
        assert Measured().is_heavy(request, 100) is expected


def test_only_the_same_request_object_is_covered() -> None:
    measured = Measured()
    request = _request(POD)
    measured.is_heavy(request, 100)
    assert measured.checked(_request(POD)) is None  # an equal request is not the one measured
    assert measured.checked(copy.deepcopy(request)) is None
    measured.forget(request)
    assert measured.checked(request) is None


def test_at_most_max_kept_requests_are_held() -> None:
    measured = Measured()
    requests = [_request(copy.deepcopy(POD)) for _ in range(MAX_KEPT + 1)]
    for request in requests:
        measured.is_heavy(request, 100)
    assert measured.checked(requests[-1]) is not None
    assert sum(measured.checked(r) is not None for r in requests) <= MAX_KEPT


def test_review_measures_an_object_the_check_does_not_cover() -> None:
    """A review given a request whose object is not the one measured (Gatekeeper's mutators or a
    MutatingAdmissionPolicy made a new one) measures it itself."""
    request = _request(OVERSIZED)
    covering = ReviewDeps(policies=None, within_bounds=bounds.Checked(OVERSIZED, None))  # type: ignore[arg-type]
    stale = ReviewDeps(policies=None, within_bounds=bounds.Checked(POD, None))  # type: ignore[arg-type]
    assert _oversize(request, covering) is None
    assert _oversize(request, stale) is not None
    assert _oversize(request, ReviewDeps(policies=None)) is not None  # type: ignore[arg-type]
