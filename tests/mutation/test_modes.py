"""Every sharing mode and merge rule, table-driven, through mutate_object with real compiled policies."""

from __future__ import annotations

from typing import Any

import jsonpatch
import pytest

from tests.support.policies import sharing_policy
from tests.support.schema import assert_valid
from webhook.errors import AdmissionDenied
from webhook.mutation.engine import mutate_object

MIG = sharing_policy("sharing: {mode: mig, gpuModel: H100-80GB}")
TIMESLICE = sharing_policy("sharing: {mode: timeslice}")
MPS = sharing_policy("sharing: {mode: mps, resourceName: nvidia.com/gpu.shared}")
HAMI = sharing_policy("sharing: {mode: hami, defaultMemory: 4Gi, cores: 30}")
KAI = sharing_policy("sharing: {mode: kai, gpuModel: A100-80GB, defaultMemory: 20Gi}")


def pod(
    *containers: dict[str, Any], annotations: dict[str, str] | None = None, **spec: Any
) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p", "namespace": "ns", "annotations": annotations or {}},
        "spec": {"containers": list(containers), **spec},
    }


def gpus(
    count: str = "1", name: str = "main", requests: bool = True, resource: str = "nvidia.com/gpu"
) -> dict[str, Any]:
    resources: dict[str, Any] = {"limits": {resource: count}}
    if requests:
        resources["requests"] = {resource: count}
    return {"name": name, "image": "x", "resources": resources}


def limits(result: dict[str, Any], index: int = 0, section: str = "limits") -> dict[str, Any]:
    return dict(result["spec"]["containers"][index]["resources"].get(section, {}))


def _mutated(policy: Any, obj: dict[str, Any]) -> dict[str, Any]:
    result = mutate_object(obj, policy)
    assert jsonpatch.apply_patch(obj, list(result.patch)) == result.object
    assert mutate_object(result.object, policy).patch == ()
    assert_valid(result.object)
    return result.object


MIG_CHOICES = [
    ("15Gi", "1g.20gb"),
    ("30Gi", "3g.40gb"),
    ("10Gi", "1g.10gb"),
    ("20Gi", "1g.20gb"),
    ("41Gi", "7g.80gb"),
    ("512Mi", "1g.10gb"),
]


@pytest.mark.parametrize(("memory", "profile"), MIG_CHOICES)
def test_mig_picks_the_smallest_fitting_profile(memory: str, profile: str) -> None:
    result = _mutated(MIG, pod(gpus("1"), annotations={"gpuwebhook.io/gpu-memory": memory}))
    assert limits(result) == {f"nvidia.com/mig-{profile}": "1"}
    assert limits(result, section="requests") == {f"nvidia.com/mig-{profile}": "1"}


def test_mig_compute_request_raises_the_profile() -> None:
    result = _mutated(
        MIG, pod(gpus(), annotations={"gpuwebhook.io/gpu-memory": "5Gi", "gpuwebhook.io/gpu-cores": "50"})
    )
    assert limits(result) == {"nvidia.com/mig-4g.40gb": "1"}


@pytest.mark.parametrize("memory", ["81Gi", "200Gi"])
def test_mig_denies_more_than_the_largest_profile(memory: str) -> None:
    with pytest.raises(
        AdmissionDenied, match=rf"{memory}.*largest MIG profile on H100-80GB \(7g\.80gb, 81920 MiB\)"
    ):
        mutate_object(pod(gpus(), annotations={"gpuwebhook.io/gpu-memory": memory}), MIG)


@pytest.mark.parametrize(
    ("policy", "resource"), [(TIMESLICE, "nvidia.com/gpu.shared"), (MPS, "nvidia.com/gpu.shared")]
)
@pytest.mark.parametrize("with_requests", [True, False])
def test_shares_replace_whole_gpus_where_they_were_set(
    policy: Any, resource: str, with_requests: bool
) -> None:
    result = _mutated(policy, pod(gpus("1", requests=with_requests)))
    assert limits(result) == {resource: "1"}
    assert limits(result, section="requests") == ({resource: "1"} if with_requests else {})


def test_init_containers_are_rewritten_too() -> None:
    obj = pod(gpus(), initContainers=[gpus("1", name="init")])
    result = _mutated(TIMESLICE, obj)
    assert result["spec"]["initContainers"][0]["resources"]["limits"] == {"nvidia.com/gpu.shared": "1"}


def test_hami_adds_memory_and_cores_and_its_scheduler() -> None:
    result = _mutated(HAMI, pod(gpus("2")))
    assert limits(result) == {"nvidia.com/gpu": "2", "nvidia.com/gpumem": "4096", "nvidia.com/gpucores": "30"}
    assert result["spec"]["schedulerName"] == "hami-scheduler"


def test_hami_respects_what_the_pod_already_says() -> None:
    container = gpus()
    container["resources"]["limits"]["nvidia.com/gpumem-percentage"] = "50"
    result = _mutated(HAMI, pod(container, schedulerName="default-scheduler"))
    assert "nvidia.com/gpumem" not in limits(result)
    assert result["spec"]["schedulerName"] == "hami-scheduler"


KAI_CASES = [
    ({}, {"gpu-memory": "20480"}),
    # KAI has no compute limit: a compute ask never becomes gpu-fraction (a memory share)
    ({"gpuwebhook.io/gpu-cores": "50"}, {"gpu-memory": "20480"}),
    ({"gpuwebhook.io/gpu-memory": "3000Mi"}, {"gpu-memory": "3000"}),
]


@pytest.mark.parametrize(("annotations", "expected"), KAI_CASES)
def test_kai_turns_gpus_into_annotations(annotations: dict[str, str], expected: dict[str, str]) -> None:
    result = _mutated(KAI, pod(gpus(), annotations=annotations))
    assert expected.items() <= result["metadata"]["annotations"].items()
    assert limits(result) == {}
    assert result["spec"]["schedulerName"] == "kai-scheduler"


def test_kai_leaves_a_whole_gpu_share_whole() -> None:
    result = mutate_object(pod(gpus(), annotations={"gpuwebhook.io/gpu-memory": "80Gi"}), KAI)
    assert limits(result.object) == {"nvidia.com/gpu": "1"}
    assert any("whole GPU" in w for w in result.warnings)


def test_a_request_different_from_its_limit_is_denied() -> None:
    container = gpus("2")
    container["resources"]["requests"]["nvidia.com/gpu"] = "1"
    with pytest.raises(AdmissionDenied, match=r"request \(1\) must equal its limit \(2\)"):
        mutate_object(pod(container), TIMESLICE)


@pytest.mark.parametrize("count", ["0.5", "-1", "1.5", "abc", "500m"])
def test_invalid_gpu_counts_are_denied_clearly(count: str) -> None:
    with pytest.raises(AdmissionDenied, match=r"nvidia\.com/gpu"):
        mutate_object(pod(gpus(count)), MIG)


@pytest.mark.parametrize(("count", "expected"), [("1Ki", "1024"), ("1e1", "10")])
def test_odd_but_valid_counts_are_understood(count: str, expected: str) -> None:
    assert limits(_mutated(TIMESLICE, pod(gpus(count))))["nvidia.com/gpu.shared"] == expected


SCHEDULERS = [
    # (policy inject, pod schedulerName, expected, warns)
    ("{}", None, "hami-scheduler", False),
    ("{}", "default-scheduler", "hami-scheduler", False),
    ("{}", "volcano", "volcano", True),
    ("{force: true}", "volcano", "hami-scheduler", False),
    ("{schedulerName: hami-custom}", None, "hami-custom", False),
]


@pytest.mark.parametrize(("inject", "current", "expected", "warns"), SCHEDULERS)
def test_scheduler_is_set_but_never_overrides_a_users_choice(
    inject: str, current: str | None, expected: str, warns: bool
) -> None:
    policy = sharing_policy(f"sharing: {{mode: hami, cores: 10}}\ninject: {inject}")
    extra: dict[str, Any] = {"schedulerName": current} if current else {}
    obj = pod(gpus(), **extra)
    result = mutate_object(obj, policy)
    assert result.object["spec"]["schedulerName"] == expected
    assert any("kept" in w for w in result.warnings) is warns


TOLERATION = "{key: nvidia.com/gpu, operator: Exists, effect: NoSchedule}"
TOLERATIONS = [
    ([], 1),
    ([{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}], 1),
    ([{"key": "nvidia.com/gpu", "operator": "Exists"}], 1),
    ([{"operator": "Exists"}], 1),
    ([{"key": "nvidia.com/gpu", "operator": "Equal", "value": "present", "effect": "NoSchedule"}], 2),
    ([{"key": "other", "operator": "Exists"}], 2),
    ([{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoExecute"}], 2),
]


@pytest.mark.parametrize(("existing", "count"), TOLERATIONS)
def test_tolerations_merge_without_duplicates(existing: list[dict[str, str]], count: int) -> None:
    policy = sharing_policy(f"sharing: {{mode: exclusive}}\ninject: {{tolerations: [{TOLERATION}]}}")
    result = _mutated(policy, pod(gpus(), tolerations=existing))
    assert len(result["spec"]["tolerations"]) == count
    assert result["spec"]["tolerations"][: len(existing)] == existing


AFFINITY_POLICY = sharing_policy(
    "sharing: {mode: exclusive}\n"
    "inject: {nodeAffinity: {required: [{key: gpu, operator: In, values: [h100]}],"
    " preferred: [{weight: 10, key: pool, operator: In, values: [spot]}]}}"
)
GPU_REQ = {"key": "gpu", "operator": "In", "values": ["h100"]}
ZONE_A = {"key": "zone", "operator": "In", "values": ["a"]}
ZONE_B = {"key": "zone", "operator": "In", "values": ["b"]}


@pytest.mark.parametrize(
    ("terms", "expected"),
    [
        (None, [{"matchExpressions": [GPU_REQ]}]),
        ([{"matchExpressions": [ZONE_A]}], [{"matchExpressions": [ZONE_A, GPU_REQ]}]),
        (
            [{"matchExpressions": [ZONE_A]}, {"matchExpressions": [ZONE_B]}],
            [{"matchExpressions": [ZONE_A, GPU_REQ]}, {"matchExpressions": [ZONE_B, GPU_REQ]}],
        ),
        ([{"matchExpressions": [GPU_REQ, ZONE_A]}], [{"matchExpressions": [GPU_REQ, ZONE_A]}]),
        (
            [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n1"]}]}],
            [
                {
                    "matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n1"]}],
                    "matchExpressions": [GPU_REQ],
                }
            ],
        ),
    ],
)
def test_required_affinity_is_anded_into_every_term(terms: list[Any] | None, expected: list[Any]) -> None:
    spec: dict[str, Any] = (
        {}
        if terms is None
        else {
            "affinity": {
                "nodeAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": terms}
                }
            }
        }
    )
    result = _mutated(AFFINITY_POLICY, pod(gpus(), **spec))
    node = result["spec"]["affinity"]["nodeAffinity"]
    assert node["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"] == expected
    preferred = node["preferredDuringSchedulingIgnoredDuringExecution"]
    assert preferred[-1] == {
        "weight": 10,
        "preference": {"matchExpressions": [{"key": "pool", "operator": "In", "values": ["spot"]}]},
    }


CLASSES = [
    ("{priorityClassName: gpu}", {}, {"priorityClassName": "gpu"}),
    ("{priorityClassName: gpu}", {"priorityClassName": "mine"}, {"priorityClassName": "mine"}),
    (
        "{priorityClassName: gpu, force: true}",
        {"priorityClassName": "mine", "priority": 5},
        {"priorityClassName": "gpu"},
    ),
    ("{runtimeClassName: nvidia}", {}, {"runtimeClassName": "nvidia"}),
    ("{runtimeClassName: nvidia}", {"runtimeClassName": "kata"}, {"runtimeClassName": "kata"}),
]


@pytest.mark.parametrize(("inject", "spec", "expected"), CLASSES)
def test_priority_and_runtime_class_only_when_absent_unless_forced(
    inject: str, spec: dict[str, Any], expected: dict[str, Any]
) -> None:
    result = _mutated(sharing_policy(f"sharing: {{mode: exclusive}}\ninject: {inject}"), pod(gpus(), **spec))
    assert expected.items() <= result["spec"].items()
    if expected.get("priorityClassName") != spec.get("priorityClassName"):
        assert "priority" not in result["spec"]  # the Priority plugin resolves the new class


CHECKPOINT = sharing_policy(
    "sharing: {mode: exclusive}\n"
    "checkpoint: {image: ckpt:1, intervalSeconds: 300, mountPath: /ckpt, terminationGracePeriodSeconds: 90}"
)


def test_checkpoint_native_sidecar_mounts_into_gpu_app_containers_only() -> None:
    obj = pod(gpus(), {"name": "logger", "image": "l"}, terminationGracePeriodSeconds=30)
    result = _mutated(CHECKPOINT, obj)
    sidecar = result["spec"]["initContainers"][-1]
    assert sidecar["name"] == "gpuwebhook-checkpoint" and sidecar["restartPolicy"] == "Always"
    main, logger = result["spec"]["containers"]
    assert {"name": "gpuwebhook-checkpoint", "mountPath": "/ckpt"} in main["volumeMounts"]
    assert {"name": "CHECKPOINT_INTERVAL_SECONDS", "value": "300"} in main["env"]
    assert "volumeMounts" not in logger  # only what any container without a GPU gets:
    assert logger["env"] == [{"name": "NVIDIA_VISIBLE_DEVICES", "value": "void"}]
    assert result["spec"]["terminationGracePeriodSeconds"] == 90


def test_checkpoint_regular_sidecar_and_a_longer_grace_period_is_kept() -> None:
    policy = sharing_policy("sharing: {mode: exclusive}\ncheckpoint: {image: c, nativeSidecar: false}")
    result = _mutated(policy, pod(gpus(), terminationGracePeriodSeconds=600))
    assert result["spec"]["containers"][-1]["name"] == "gpuwebhook-checkpoint"
    assert "restartPolicy" not in result["spec"]["containers"][-1]
    assert result["spec"]["terminationGracePeriodSeconds"] == 600


def test_checkpoint_keeps_a_users_env_value() -> None:
    container = gpus()
    container["env"] = [{"name": "CHECKPOINT_DIR", "value": "/mine"}]
    result = _mutated(CHECKPOINT, pod(container))
    values = [e for e in result["spec"]["containers"][0]["env"] if e["name"] == "CHECKPOINT_DIR"]
    assert values == [{"name": "CHECKPOINT_DIR", "value": "/mine"}]


def test_labels_and_annotations_do_not_overwrite_unless_forced() -> None:
    policy = sharing_policy(
        "sharing: {mode: exclusive}\ninject: {labels: {team: gpu, tier: a}, annotations: {x/y: z}}"
    )
    obj = pod(gpus())
    obj["metadata"]["labels"] = {"team": "ml"}
    result = _mutated(policy, obj)
    assert result["metadata"]["labels"] == {"team": "ml", "tier": "a"}
    assert result["metadata"]["annotations"]["x/y"] == "z"


def test_traceability_annotation_names_policy_version_and_mode() -> None:
    result = _mutated(MIG, pod(gpus()))
    assert result["metadata"]["annotations"]["gpuwebhook.io/applied"] == f"{MIG.stamp} mode=mig"
    assert MIG.stamp.startswith("test-policy@")


def test_opt_out_needs_the_policy_to_allow_it() -> None:
    annotations = {"gpuwebhook.io/sharing": "exclusive"}
    denied = mutate_object(pod(gpus(), annotations=annotations), MIG)
    assert "nvidia.com/mig-1g.10gb" in limits(denied.object)
    assert any("does not allow opting out" in w for w in denied.warnings)
    allowing = sharing_policy("sharing: {mode: mig, gpuModel: H100-80GB, allowOptOut: true}")
    allowed = _mutated(allowing, pod(gpus(), annotations=annotations))
    assert limits(allowed) == {"nvidia.com/gpu": "1"}


@pytest.mark.parametrize(
    ("annotations", "message"),
    [
        ({"gpuwebhook.io/gpu-memory": "lots"}, "not a valid quantity"),
        ({"gpuwebhook.io/gpu-cores": "150"}, "percentage"),
        ({"gpuwebhook.io/sharing": "shared"}, "may only be 'exclusive'"),
    ],
)
def test_bad_pod_annotations_are_denied_by_name(annotations: dict[str, str], message: str) -> None:
    with pytest.raises(AdmissionDenied, match=message):
        mutate_object(pod(gpus(), annotations=annotations), MIG)
