"""NVIDIA_VISIBLE_DEVICES=void: the direct patch agrees with the mutator, the fast path with the full one."""

from __future__ import annotations

import copy
import json
from typing import Any

import jsonpatch
from hypothesis import given
from hypothesis import strategies as st

from tests.support.policies import sharing_policy
from webhook.accounting.needs import PodNeeds
from webhook.accounting.target import pod_target
from webhook.mutation import void
from webhook.mutation.context import MutationContext
from webhook.review import is_gpu_pod

VISIBLE = "NVIDIA_VISIBLE_DEVICES"
RESOURCES = st.sampled_from(
    [
        {},
        {"limits": {"cpu": "1"}},
        {"limits": {"nvidia.com/gpu": "1"}},
        {"limits": {"nvidia.com/mig-1g.10gb": "1"}},
        {"requests": {"nvidia.com/gpu.shared": "1"}},
        {"claims": [{"name": "gpu"}]},
        "not a mapping",
    ]
)
ENV = st.sampled_from(
    [None, [], [{"name": "HOME", "value": "/h"}], [{"name": VISIBLE, "value": "all"}], "not a list"]
)
CONTAINER = st.one_of(
    st.fixed_dictionaries({"name": st.sampled_from(["a", "b"]), "resources": RESOURCES, "env": ENV}).map(
        lambda c: {k: v for k, v in c.items() if v is not None}
    ),
    st.just("not a container"),
)
EXCLUSIVE = sharing_policy("sharing: {mode: exclusive}")
ANNOTATIONS = st.sampled_from([{}, {"gpu-fraction": "0.5"}, {"gpu-memory": "4Gi"}, {"app": "x"}])


@st.composite
def pods(draw: st.DrawFn) -> dict[str, Any]:
    spec: dict[str, Any] = {"containers": draw(st.lists(CONTAINER, min_size=1, max_size=3))}
    for field in ("initContainers", "ephemeralContainers"):
        if draw(st.booleans()):
            spec[field] = draw(st.lists(CONTAINER, max_size=2))
    metadata = {"name": "p", "annotations": draw(ANNOTATIONS)}
    # Through JSON, as a review arrives: drawn values may share one list, decoded ones never do.
    decoded: dict[str, Any] = json.loads(json.dumps({"kind": "Pod", "metadata": metadata, "spec": spec}))
    return decoded


@given(pods())
def test_the_fast_path_voids_what_the_full_check_voids(pod: dict[str, Any]) -> None:
    target = pod_target(pod)
    assert target is not None
    if not is_gpu_pod(target, ()):
        assert void.void_patch(pod, gpu_pod=False) == void.void_patch(pod)


@given(pods())
def test_the_direct_patch_does_what_the_mutator_does(pod: dict[str, Any]) -> None:
    target = pod_target(copy.deepcopy(pod))
    assert target is not None
    void.void_devices(target, MutationContext(EXCLUSIVE, PodNeeds(), "exclusive"))
    patched = jsonpatch.apply_patch(pod, void.void_patch(pod))
    assert patched == target.pod


def test_a_container_that_gets_no_gpu_is_voided_and_one_that_does_is_not() -> None:
    pod = {
        "kind": "Pod",
        "metadata": {"name": "p"},
        "spec": {
            "containers": [
                {"name": "app", "resources": {"limits": {"nvidia.com/gpu": "1"}}},
                {"name": "side", "env": [{"name": "HOME", "value": "/h"}]},
            ]
        },
    }
    assert void.void_patch(pod) == [
        {"op": "add", "path": "/spec/containers/1/env/-", "value": {"name": VISIBLE, "value": "void"}}
    ]
