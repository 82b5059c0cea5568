"""/validate-advisory answers warn and dryrun policies and never denies."""

from __future__ import annotations

import orjson
import pytest

from tests.support.apiserver import check_reply
from tests.support.reviews import make_review
from tests.support.server import ServerProcess
from webhook.admission import parse_review
from webhook.policy.model import PolicySet
from webhook.review import ReviewDeps, ReviewSettings, review

BAD_GPU_POD = {
    "apiVersion": "v1",
    "kind": "Pod",
    "metadata": {"name": "p", "namespace": "team"},
    "spec": {"containers": [{"name": "c", "image": "x", "resources": {"limits": {"nvidia.com/gpu": "0.5"}}}]},
}


@pytest.mark.parametrize(
    ("endpoint", "split", "allowed"),
    [
        ("validate", False, False),
        ("validate", True, False),
        ("advisory", False, True),
        ("advisory", True, True),
    ],
)
def test_deny_policies_belong_to_validate_only(endpoint: str, split: bool, allowed: bool) -> None:
    deps = ReviewDeps(policies=PolicySet(), settings=ReviewSettings(advisory_webhook=split))
    request = parse_review(orjson.dumps(make_review(BAD_GPU_POD)))
    decision = review(request, endpoint, deps)  # type: ignore[arg-type]
    assert decision.allowed is allowed


@pytest.mark.parametrize(
    ("split", "endpoint", "actions"),
    [
        (False, "validate", {"deny", "warn", "dryrun"}),
        (True, "validate", {"deny"}),
        (False, "advisory", {"warn", "dryrun"}),
        (True, "advisory", {"warn", "dryrun"}),
    ],
)
def test_which_actions_each_endpoint_answers(split: bool, endpoint: str, actions: set[str]) -> None:
    assert ReviewSettings(advisory_webhook=split).actions(endpoint) == actions  # type: ignore[arg-type]


def test_advisory_endpoint_over_https(server: ServerProcess) -> None:
    request = make_review(BAD_GPU_POD)
    response = check_reply(request, server.client().post_json("/validate-advisory", request), "validate")
    assert response["allowed"] is True
