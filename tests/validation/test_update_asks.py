"""What a pod UPDATE can change of a pod's GPU asks, and a Binding reviewed as the pod update it is."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.support.policies import bundled_policies
from webhook.accounting.asks import kai_changes, same_asks
from webhook.review import ReviewDeps, binding_view, validate

TWO_GPUS = {"limits": {"nvidia.com/gpu": "2"}}
GPU_POD: dict[str, Any] = {
    "apiVersion": "v1",
    "kind": "Pod",
    "metadata": {"name": "p", "namespace": "team-a", "labels": {"a": "b"}},
    "spec": {"containers": [{"name": "c", "image": "x:1", "resources": {"limits": {"nvidia.com/gpu": "1"}}}]},
}


def _with(path: tuple[str, ...], value: Any) -> dict[str, Any]:
    pod = copy.deepcopy(GPU_POD)
    node = pod
    for key in path[:-1]:
        node = node.setdefault(key, {}) if isinstance(node, dict) else node[int(key)]
    node[path[-1]] = value
    return pod


@pytest.mark.parametrize(
    ("case", "new", "same"),
    [
        ("a label", _with(("metadata", "labels"), {"gpu": "sliced"}), True),
        ("an annotation", _with(("metadata", "annotations"), {"note": "x"}), True),
        ("an image", _with(("spec", "containers", "0", "image"), "x:2"), True),
        ("a status", _with(("status",), {"phase": "Running"}), True),
        ("a KAI fraction", _with(("metadata", "annotations"), {"gpu-fraction": "0.5"}), False),
        ("a resource", _with(("spec", "containers", "0", "resources"), TWO_GPUS), False),
        ("a claim", _with(("spec", "resourceClaims"), [{"name": "g", "resourceClaimName": "g"}]), False),
        ("pod resources", _with(("spec", "resources"), {"limits": {"cpu": "1"}}), False),
    ],
)
def test_only_what_gives_devices_counts_as_an_ask(case: str, new: dict[str, Any], same: bool) -> None:
    assert same_asks(new, GPU_POD) is same, case


def test_a_missing_side_is_never_the_same() -> None:
    assert not same_asks(GPU_POD, None) and not same_asks(None, GPU_POD)


@given(st.dictionaries(st.sampled_from(["gpu-fraction", "gpu-memory", "other"]), st.text(max_size=3)))
def test_kai_changes_name_exactly_the_kai_keys_that_differ(new: dict[str, str]) -> None:
    old = {"gpu-fraction": "0.5", "other": "x"}
    expected = {
        k for k in ("gpu-fraction", "gpu-memory", "gpu-fraction-num-devices") if new.get(k) != old.get(k)
    }
    assert set(kai_changes(new, old)) == expected


def _binding_request(metadata: Any) -> Any:
    binding = {
        "apiVersion": "v1",
        "kind": "Binding",
        "metadata": metadata,
        "target": {"kind": "Node", "name": "n"},
    }
    return {
        "uid": "u",
        "kind": {"group": "", "version": "v1", "kind": "Binding"},
        "resource": {"group": "", "version": "v1", "resource": "pods"},
        "subResource": "binding",
        "name": "p",
        "namespace": "team-a",
        "operation": "CREATE",
        "userInfo": {"username": "mallory"},
        "object": binding,
    }


def test_the_binding_view_is_the_pod_update_its_annotations_make() -> None:
    view = binding_view(_binding_request({"name": "p", "annotations": {"a": "b"}}))
    assert view["kind"]["kind"] == "Pod" and view["operation"] == "UPDATE"
    assert view["object"] is not None and view["object"]["metadata"]["annotations"] == {"a": "b"}
    assert view["oldObject"] is not None and view["oldObject"]["metadata"]["annotations"] == {}
    assert "nodeName" not in view["object"]["spec"]


@pytest.mark.parametrize(
    ("metadata", "allowed", "code"),
    [
        ({"name": "p", "annotations": {"hami.io/vgpu-node": "n"}}, False, 403),
        ({"name": "p", "annotations": {"a": 1}}, False, 400),  # not a string: malformed, not a crash
        ({"name": "p", "annotations": ["a"]}, False, 400),
        ("not an object", True, 200),
        ({"name": "p"}, True, 200),
    ],
)
def test_a_binding_gets_a_clear_decision_whatever_it_holds(metadata: Any, allowed: bool, code: int) -> None:
    decision = validate(_binding_request(metadata), ReviewDeps(policies=bundled_policies()))
    assert (decision.allowed, decision.code if not decision.allowed else 200) == (allowed, code)
