"""Placement hints, pure: which nodes a pod is steered to, when it is not, and the mutation properties."""

from __future__ import annotations

import copy
import dataclasses
from typing import Any

import jsonpatch
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.mutation.test_properties import POLICIES, pods
from tests.support.policies import sharing_policy
from tests.support.schema import assert_valid
from webhook.capacity import CapacitySnapshot, CapacityView, NodeCapacity
from webhook.errors import AdmissionDenied
from webhook.mutation.engine import mutate_object
from webhook.mutation.hints import HINTS_ANNOTATION
from webhook.sharing_policy import PreferUnderutilized, SharingPolicy

NOW = 1_800_000_000.0
PREFERRED = "preferredDuringSchedulingIgnoredDuringExecution"
REQUIRED = "requiredDuringSchedulingIgnoredDuringExecution"
H100 = "NVIDIA-H100-80GB-HBM3"
A100 = "NVIDIA-A100-SXM4-40GB"
NODES = (
    NodeCapacity("node-a", (A100,), free_gpus=1, idle_share=1.5, free_mig={"1g.10gb": 2}),
    NodeCapacity("node-b", (H100,), free_gpus=3, idle_share=0.5),
    NodeCapacity("node-c", (H100,), free_gpus=2, idle_share=3.0, free_mig={"1g.10gb": 1, "3g.40gb": 1}),
    NodeCapacity("node-d", (A100, H100), free_gpus=0, idle_share=0.5),
)
HINTS = "inject: {preferUnderutilized: {weight: 40, maxNodes: 2}}"
EXCLUSIVE = sharing_policy(f"sharing: {{mode: exclusive}}\n{HINTS}")
TIMESLICE = sharing_policy(f"sharing: {{mode: timeslice}}\n{HINTS}")
MIG = sharing_policy(f"sharing: {{mode: mig, gpuModel: H100-80GB}}\n{HINTS}")
NO_HINTS = sharing_policy("sharing: {mode: exclusive}")


def view(age: float = 10.0, nodes: tuple[NodeCapacity, ...] = NODES, max_age: float = 300.0) -> CapacityView:
    return CapacityView(CapacitySnapshot(NOW - age, nodes), NOW, max_age)


def pod(
    gpus: str = "1", annotations: dict[str, str] | None = None, kind: str = "Pod", **spec: Any
) -> dict[str, Any]:
    container = {"name": "main", "image": "x", "resources": {"limits": {"nvidia.com/gpu": gpus}}}
    body = {
        "metadata": {"name": "p", "annotations": annotations or {}},
        "spec": {"containers": [container], **spec},
    }
    if kind == "Pod":
        return {
            "apiVersion": "v1",
            "kind": "Pod",
            **body,
            "metadata": {**body["metadata"], "namespace": "ns"},
        }
    return {
        "apiVersion": "apps/v1",
        "kind": kind,
        "metadata": {"name": "w", "namespace": "ns"},
        "spec": {
            "selector": {"matchLabels": {"a": "b"}},
            "template": {**body, "metadata": {"labels": {"a": "b"}}},
        },
    }


def hinted(obj: dict[str, Any], policy: SharingPolicy, placement: CapacityView | None) -> list[str] | None:
    """The nodes of the added hint, checking the patch and a second pass on the way; None if none."""
    result = mutate_object(obj, policy, placement=placement)
    assert jsonpatch.apply_patch(obj, list(result.patch)) == result.object
    assert mutate_object(result.object, policy, placement=placement).patch == ()
    before = obj["spec"].get("affinity", {}).get("nodeAffinity", {}).get(PREFERRED, [])
    after = result.object["spec"].get("affinity", {}).get("nodeAffinity", {}).get(PREFERRED, [])
    added = [t for t in after if t not in before]
    if not added:
        annotations = (
            obj["metadata"].get("annotations", {}),
            result.object["metadata"].get("annotations", {}),
        )
        assert annotations[0].get(HINTS_ANNOTATION) == annotations[1].get(HINTS_ANNOTATION)
        return None
    [term] = added
    assert term["weight"] == 40
    [expression] = term["preference"]["matchExpressions"]
    assert expression["key"] == "kubernetes.io/hostname" and expression["operator"] == "In"
    assert result.object["metadata"]["annotations"][HINTS_ANNOTATION] == ",".join(expression["values"])
    # Hinted once: even a newer snapshot that would choose other nodes changes nothing.
    later = view(age=0, nodes=(NodeCapacity("node-z", (), free_gpus=8, idle_share=8.0),))
    assert mutate_object(result.object, policy, placement=later).patch == ()
    values: list[str] = expression["values"]
    return values


def required(*expressions: dict[str, Any]) -> dict[str, Any]:
    return {"nodeAffinity": {REQUIRED: {"nodeSelectorTerms": [{"matchExpressions": list(expressions)}]}}}


CASES = [
    ("whole GPUs: most free first", EXCLUSIVE, pod(), view(), ["node-b", "node-c"]),
    ("two GPUs need two free", EXCLUSIVE, pod("2"), view(), ["node-b", "node-c"]),
    ("three GPUs need three free", EXCLUSIVE, pod("3"), view(), ["node-b"]),
    ("nine GPUs fit nowhere", EXCLUSIVE, pod("9"), view(), None),
    ("shares go to idle GPUs", TIMESLICE, pod(), view(), ["node-c", "node-a"]),
    (
        "MIG goes to free instances of the profile",
        MIG,
        pod(annotations={"gpuwebhook.io/gpu-memory": "30Gi"}),
        view(),
        ["node-c"],
    ),
    (
        "the smallest profile",
        MIG,
        pod(annotations={"gpuwebhook.io/gpu-memory": "5Gi"}),
        view(),
        ["node-a", "node-c"],
    ),
    ("stale data adds nothing", EXCLUSIVE, pod(), view(age=301), None),
    ("no data adds nothing", EXCLUSIVE, pod(), None, None),
    ("the policy did not opt in", NO_HINTS, pod(), view(), None),
    ("a pod without GPUs", TIMESLICE, pod("0"), view(), None),
    ("workload templates outlive snapshots", EXCLUSIVE, pod(kind="Deployment"), view(), None),
    ("hinted once, never again", EXCLUSIVE, pod(annotations={HINTS_ANNOTATION: "node-x"}), view(), None),
    ("a bound pod", EXCLUSIVE, pod(nodeName="node-a"), view(), None),
    (
        "required NotIn excludes",
        EXCLUSIVE,
        pod(affinity=required({"key": "kubernetes.io/hostname", "operator": "NotIn", "values": ["node-b"]})),
        view(),
        ["node-c", "node-a"],
    ),
    (
        "required product",
        EXCLUSIVE,
        pod(affinity=required({"key": "nvidia.com/gpu.product", "operator": "In", "values": [A100]})),
        view(),
        ["node-a"],
    ),
    (
        "unknown keys are the scheduler's to judge",
        EXCLUSIVE,
        pod(affinity=required({"key": "zone", "operator": "In", "values": ["x"]})),
        view(),
        ["node-b", "node-c"],
    ),
    (
        "nodeSelector by hostname",
        EXCLUSIVE,
        pod(nodeSelector={"kubernetes.io/hostname": "node-c"}),
        view(),
        ["node-c"],
    ),
    (
        "a node of mixed GPUs has no product label to rule it out",
        TIMESLICE,
        pod(affinity=required({"key": "nvidia.com/gpu.product", "operator": "In", "values": ["other"]})),
        view(),
        ["node-d"],
    ),
]


@pytest.mark.parametrize(
    ("policy", "obj", "placement", "nodes"), [c[1:] for c in CASES], ids=[c[0] for c in CASES]
)
def test_hints(
    policy: SharingPolicy, obj: dict[str, Any], placement: CapacityView | None, nodes: list[str] | None
) -> None:
    assert hinted(obj, policy, placement) == nodes


def test_hints_never_touch_required_terms_or_the_users_preferences() -> None:
    mine = {
        "weight": 5,
        "preference": {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]},
    }
    affinity = required({"key": "zone", "operator": "In", "values": ["a"]})
    affinity["nodeAffinity"][PREFERRED] = [mine]
    obj = pod(affinity=affinity)
    result = mutate_object(obj, EXCLUSIVE, placement=view()).object["spec"]["affinity"]["nodeAffinity"]
    assert result[REQUIRED] == affinity["nodeAffinity"][REQUIRED]
    assert result[PREFERRED][0] == mine and len(result[PREFERRED]) == 2


def test_a_ranked_snapshot_answers_as_an_unranked_one() -> None:
    ranked = CapacitySnapshot(NOW, NODES).rank_all()
    for kind in ("whole", "shared", "mig:1g.10gb", "mig:3g.40gb", "mig:7g.80gb"):
        for demand in (1, 2, 3):
            fresh = CapacitySnapshot(NOW, NODES).best_nodes(kind, demand, 3, lambda _: True)
            assert ranked.best_nodes(kind, demand, 3, lambda _: True) == fresh


def test_the_freshness_bound_is_inclusive() -> None:
    assert view(age=300).fresh and not view(age=300.001).fresh


def _with_hints(policy: SharingPolicy, weight: int, nodes: int) -> SharingPolicy:
    hints = PreferUnderutilized(weight, nodes)
    return dataclasses.replace(policy, inject=dataclasses.replace(policy.inject, prefer_underutilized=hints))


NODE_NAMES = st.sampled_from(["node-a", "node-b", "node-c", "node-d", "node-e"])
PROFILES = st.sampled_from(["1g.10gb", "1g.20gb", "2g.20gb", "3g.40gb", "7g.80gb"])


@st.composite
def snapshots(draw: st.DrawFn) -> CapacityView:
    names = draw(st.lists(NODE_NAMES, unique=True, max_size=5))
    nodes = tuple(
        NodeCapacity(
            name,
            draw(st.sampled_from([(), (H100,), (A100,), (A100, H100)])),
            draw(st.integers(0, 8)),
            draw(st.floats(0, 8)),
            draw(st.dictionaries(PROFILES, st.integers(0, 7), max_size=3)),
        )
        for name in names
    )
    return view(draw(st.floats(0, 600)), nodes)


PROPERTY = settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@PROPERTY
@given(
    obj=pods(),
    policy=st.sampled_from(POLICIES),
    weight=st.integers(1, 100),
    max_nodes=st.integers(1, 4),
    placement=snapshots(),
)
def test_hint_properties(
    obj: dict[str, Any], policy: SharingPolicy, weight: int, max_nodes: int, placement: CapacityView
) -> None:
    policy = _with_hints(policy, weight, max_nodes)
    try:
        plain = mutate_object(copy.deepcopy(obj), policy).object
        result = mutate_object(obj, policy, placement=placement)
    except AdmissionDenied:
        return
    mutated = result.object
    assert jsonpatch.apply_patch(obj, list(result.patch)) == mutated
    assert mutate_object(mutated, policy, placement=placement).patch == ()
    assert_valid(mutated)
    node_affinity = mutated["spec"].get("affinity", {}).get("nodeAffinity", {})
    plain_affinity = plain["spec"].get("affinity", {}).get("nodeAffinity", {})
    assert node_affinity.get(REQUIRED) == plain_affinity.get(REQUIRED)
    added = [t for t in node_affinity.get(PREFERRED, []) if t not in plain_affinity.get(PREFERRED, [])]
    hint = mutated["metadata"].get("annotations", {}).get(HINTS_ANNOTATION)
    if not placement.fresh:
        assert mutated == plain
    if hint is None:
        assert not added
        return
    nodes = hint.split(",")
    assert 1 <= len(nodes) <= max_nodes and set(nodes) <= {n.node for n in placement.snapshot.nodes}
    assert len(added) <= 1 and all(t["weight"] == weight for t in added)
    assert mutate_object(mutated, policy, placement=view(age=0)).patch == ()  # once hinted, never again
