"""NVIDIA k8s-device-plugin conformance: each case pins the upstream line it follows.

Upstream: NVIDIA/k8s-device-plugin at 1b826acc6af3079d8923bac395c3124b8861a9a6.
C = api/config/v1/config.go, P = api/config/v1/replicas.go, R = internal/rm/rm.go.
"""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from tests.support.policies import compile_problems, policy_set, sharing_policy
from tests.support.reviews import make_review
from webhook.admission import parse_review
from webhook.errors import AdmissionDenied
from webhook.mutation.engine import mutate_object
from webhook.review import ReviewDeps, review


def _pod(count: str, resource: str = "nvidia.com/gpu", namespace: str = "ns") -> dict[str, Any]:
    container = {"name": "main", "image": "x", "resources": {"limits": {resource: count}}}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p", "namespace": namespace},
        "spec": {"containers": [container]},
    }


@pytest.mark.parametrize(
    ("spec", "fails"),
    [
        ("{mode: mps}", True),  # C:73-76: MPS defaults failRequestsGreaterThanOne to true
        ("{mode: mps, failRequestsGreaterThanOne: false}", False),  # C:73: only when unset
        ("{mode: timeslice}", False),  # P:32: a *bool, nil (false) for time-slicing
        ("{mode: timeslice, failRequestsGreaterThanOne: true}", True),  # R:97-100
    ],
)
def test_more_than_one_share_is_denied_where_the_kubelet_would_fail_it(spec: str, fails: bool) -> None:
    """R:98-104: "maximum request size for shared resources is 1" -> UnexpectedAdmissionError."""
    policy = sharing_policy(f"sharing: {spec}")
    if fails:
        with pytest.raises(AdmissionDenied, match=r"asks for 2 GPUs.*failRequestsGreaterThanOne"):
            mutate_object(_pod("2"), policy)
    else:
        result = mutate_object(_pod("2"), policy)
        assert result.object["spec"]["containers"][0]["resources"]["limits"] == {"nvidia.com/gpu.shared": "2"}
    assert mutate_object(_pod("1"), policy).object["spec"]["containers"][0]["resources"]["limits"] == {
        "nvidia.com/gpu.shared": "1"
    }


def test_validate_denies_a_shared_count_above_one_written_by_hand() -> None:
    deps = ReviewDeps(policies=policy_set(sharing_policy("sharing: {mode: mps}")))
    request = parse_review(orjson.dumps(make_review(_pod("2", "nvidia.com/gpu.shared"))))
    decision = review(request, "validate", deps)
    assert not decision.allowed and "failRequestsGreaterThanOne" in decision.message


@pytest.mark.parametrize(
    ("name", "accepted"),
    [
        ("nvidia.com/gpu.shared", True),  # P:48-50: renameByDefault gives <name>.shared
        ("nvidia.com/gpu", True),  # P:44-46: without renameByDefault the name stays
        ("nvidia.com/mps-gpu", False),  # P:44-46, 59-61: a custom rename is ignored
        ("example.com/shared-gpu", False),
    ],
)
def test_only_names_the_device_plugin_advertises_are_accepted(name: str, accepted: bool) -> None:
    problems = compile_problems(f"sharing: {{mode: timeslice, resourceName: {name}}}")
    assert (not problems) is accepted, problems


def test_time_slicing_without_rename_keeps_nvidia_gpu() -> None:
    policy = sharing_policy("sharing: {mode: timeslice, resourceName: nvidia.com/gpu}")
    result = mutate_object(_pod("1"), policy).object
    assert result["spec"]["containers"][0]["resources"]["limits"] == {"nvidia.com/gpu": "1"}
