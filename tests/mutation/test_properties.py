"""Properties over generated pods and every example policy.

- the patch applied to the input gives the mutated object;
- a second mutation of the result is empty (reinvocation is safe);
- every result is a valid Pod by the official schema;
- nothing but a clear AdmissionDenied ever stops a mutation.
"""

from __future__ import annotations

import copy
from typing import Any

import jsonpatch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.support.policies import example_policies, sharing_policy
from tests.support.schema import assert_valid
from webhook.errors import AdmissionDenied
from webhook.mutation.engine import mutate_object

POLICIES = (
    *example_policies().sharing,
    # The MIG variants and device-plugin limits the examples do not show.
    sharing_policy(
        "sharing: {mode: mig, gpuModel: A30-24GB, migStrategy: single, defaultMemory: 5Gi}", "single"
    ),
    sharing_policy("sharing: {mode: mig, gpuModel: GH200-96GB, multiGpu: slices}", "slices"),
    sharing_policy("sharing: {mode: timeslice, failRequestsGreaterThanOne: true}", "strict-timeslice"),
)
HAMI = ["nvidia.com/gpumem", "nvidia.com/gpumem-percentage", "nvidia.com/gpucores"]
TOLERATIONS = [
    {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"},
    {"key": "nvidia.com/gpu", "operator": "Exists"},
    {"key": "spot", "operator": "Equal", "value": "true", "effect": "NoSchedule"},
    {"operator": "Exists"},
]
TERMS = [
    {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]},
    {
        "matchExpressions": [
            {"key": "nvidia.com/gpu.product", "operator": "In", "values": ["NVIDIA-H100-80GB-HBM3"]}
        ]
    },
    {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["node-1"]}]},
]
GPU_COUNTS = st.sampled_from(["0", "1", "2", "4", 1, 2])


def _fresh(choices: list[dict[str, Any]]) -> st.SearchStrategy[dict[str, Any]]:
    """Copies, never shared references: a pod decoded from JSON has no aliasing."""
    return st.sampled_from(choices).map(copy.deepcopy)


@st.composite
def containers(draw: st.DrawFn, prefix: str, maximum: int) -> list[dict[str, Any]]:
    found = []
    for index in range(draw(st.integers(0 if prefix == "init" else 1, maximum))):
        container: dict[str, Any] = {"name": f"{prefix}-{index}", "image": "registry.example.com/x:1"}
        resources: dict[str, Any] = {}
        if draw(st.booleans()):
            count = draw(GPU_COUNTS)
            resources["limits"] = {"nvidia.com/gpu": count, "memory": "1Gi"}
            if draw(st.booleans()):  # left by a pod written for hami-scheduler
                resources["limits"][draw(st.sampled_from(HAMI))] = draw(st.sampled_from(["20", "6000"]))
            if draw(st.booleans()):
                resources["requests"] = {"nvidia.com/gpu": count, "cpu": "500m"}
        if resources:
            container["resources"] = resources
        if draw(st.booleans()):
            container["env"] = [{"name": "MODE", "value": "train"}]
        if prefix == "init" and draw(st.booleans()):
            container["restartPolicy"] = "Always"
        found.append(container)
    return found


@st.composite
def pods(draw: st.DrawFn) -> dict[str, Any]:
    annotations = {}
    if draw(st.booleans()):
        annotations["gpuwebhook.io/gpu-memory"] = draw(
            st.sampled_from(["1Gi", "10Gi", "15Gi", "30Gi", "47Gi", "79Gi"])
        )
    if draw(st.booleans()):
        annotations["gpuwebhook.io/gpu-cores"] = draw(st.sampled_from(["10", "25", "50", "100"]))
    if draw(st.booleans()):
        annotations["gpuwebhook.io/sharing"] = "exclusive"
    if draw(st.integers(0, 3)) == 0:  # left by a pod written for kai-scheduler
        annotations["gpu-fraction"] = draw(st.sampled_from(["0.5", "500m"]))
    spec: dict[str, Any] = {"containers": draw(containers("app", 3))}
    init = draw(containers("init", 2))
    if init:
        spec["initContainers"] = init
    if draw(st.booleans()):
        spec["tolerations"] = draw(st.lists(_fresh(TOLERATIONS), max_size=3, unique_by=str))
    if draw(st.booleans()):
        terms = draw(st.lists(_fresh(TERMS), min_size=1, max_size=3))
        spec["affinity"] = {
            "nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": terms}}
        }
    for key, choices in (
        ("schedulerName", ["default-scheduler", "volcano"]),
        ("priorityClassName", ["high"]),
        ("terminationGracePeriodSeconds", [0, 30, 600]),
    ):
        if draw(st.booleans()):
            spec[key] = draw(st.sampled_from(choices))
    labels = {"app": "x"}
    if draw(st.booleans()):
        labels["gpuwebhook.io/workload"] = "training"
    metadata = {"name": "p", "namespace": "ns", "labels": labels, "annotations": annotations}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": spec}


PROPERTY = settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@PROPERTY
@given(pod=pods(), policy=st.sampled_from(POLICIES))
def test_patch_reproduces_the_result_which_is_a_fixed_point_and_valid(
    pod: dict[str, Any], policy: Any
) -> None:
    try:
        result = mutate_object(pod, policy)
    except AdmissionDenied as e:
        message = str(e)
        assert message
        return
    assert jsonpatch.apply_patch(pod, list(result.patch)) == result.object
    assert mutate_object(result.object, policy).patch == ()
    assert_valid(result.object)


@PROPERTY
@given(
    pod=pods(), policy=st.sampled_from([p for p in POLICIES if p.sharing.mode in ("timeslice", "mps", "mig")])
)
def test_renaming_modes_leave_no_whole_gpu_behind(pod: dict[str, Any], policy: Any) -> None:
    try:
        result = mutate_object(pod, policy).object
    except AdmissionDenied:
        return
    opted_out = (
        result["metadata"]["annotations"].get("gpuwebhook.io/sharing") == "exclusive"
        and policy.sharing.allow_opt_out
    )
    for list_name in ("initContainers", "containers"):
        for container in result["spec"].get(list_name, []):
            for section in container.get("resources", {}).values():
                gpus = section.get("nvidia.com/gpu")
                # MIG's default multiGpu rule keeps a multi-GPU container's whole GPUs
                kept = policy.sharing.mode == "mig" and gpus not in (None, "0", "1")
                kept |= policy.sharing.mig_strategy == "single"  # there a slice is nvidia.com/gpu
                assert opted_out or kept or gpus in (None, "0"), (policy.name, container)


@PROPERTY
@given(pod=pods(), policy=st.sampled_from(POLICIES))
def test_the_users_own_settings_survive(pod: dict[str, Any], policy: Any) -> None:
    try:
        result = mutate_object(pod, policy).object
    except AdmissionDenied:
        return
    for toleration in pod["spec"].get("tolerations", []):
        assert toleration in result["spec"]["tolerations"]
    before = pod["spec"].get("affinity", {}).get("nodeAffinity", {})
    after = result["spec"].get("affinity", {}).get("nodeAffinity", {})
    key = "requiredDuringSchedulingIgnoredDuringExecution"
    old_terms = before.get(key, {}).get("nodeSelectorTerms", [])
    new_terms = after.get(key, {}).get("nodeSelectorTerms", [])
    assert len(new_terms) >= len(old_terms)
    for old, new in zip(old_terms, new_terms, strict=False):
        assert all(e in new.get("matchExpressions", []) for e in old.get("matchExpressions", []))
        assert old.get("matchFields") == new.get("matchFields")
    if pod["spec"].get("schedulerName") == "volcano":
        assert result["spec"]["schedulerName"] == "volcano"
