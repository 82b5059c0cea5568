"""MIG conformance: every table entry and rule names the upstream file and line it pins.

Upstream commits: NVIDIA/go-nvml 2f9e261fe40a7a1c54783d66805e8920564763b4 (N = pkg/nvml/mock/gpus/),
NVIDIA/mig-parted bd7160f43f16462eeb21e1eda5e67b5b6b03fd7d (P = deployments/systemd/config-default.yaml),
NVIDIA/k8s-device-plugin 1b826acc6af3079d8923bac395c3124b8861a9a6 (R = internal/rm/rm.go,
L = internal/lm/mig-strategy_test.go).
"""

from __future__ import annotations

from fractions import Fraction
from typing import Any

import orjson
import pytest

from tests.support.policies import compile_problems, sharing_policy
from tests.support.reviews import make_review
from webhook import gpu
from webhook.accounting.demand import QuotaInputError, QuotaSettings, pod_demand, pod_shape, shape_demand
from webhook.admission import parse_review
from webhook.errors import AdmissionDenied
from webhook.inventory import Inventory, cache_from
from webhook.mutation.engine import mutate_object
from webhook.policy.loader import compile_documents
from webhook.policy.source import parse_documents
from webhook.quota.gate import LocalGate
from webhook.review import ReviewDeps, review

REAL_MIB = [
    # (pin, model, profile, MiB)
    ("N/a100.go:95", "A100-40GB", "1g.5gb", 4864),
    ("N/a100.go:108", "A100-40GB", "1g.5gb+me", 4864),
    ("N/a100.go:121", "A100-40GB", "1g.10gb", 9856),
    ("N/a100.go:147", "A100-40GB", "3g.20gb", 19968),
    ("N/a100.go:173", "A100-40GB", "7g.40gb", 40192),
    ("N/a100.go:188", "A100-80GB", "1g.10gb", 9856),
    ("N/a100.go:214", "A100-80GB", "1g.20gb", 19968),
    ("N/a100.go:240", "A100-80GB", "3g.40gb", 40192),
    ("N/a100.go:266", "A100-80GB", "7g.80gb", 80384),
    ("N/a30.go:56", "A30-24GB", "1g.6gb", 5836),
    ("N/a30.go:82", "A30-24GB", "2g.12gb", 11672),
    ("N/a30.go:95", "A30-24GB", "2g.12gb+me", 11672),
    ("N/a30.go:108", "A30-24GB", "4g.24gb", 23344),
    ("N/h100.go:59", "H100-80GB", "1g.10gb", 10240),
    ("N/h100.go:137", "H100-80GB", "7g.80gb", 81920),
    ("N/h200.go:85", "H200-141GB", "1g.35gb", 35840),
    ("N/h200.go:111", "H200-141GB", "3g.71gb", 72704),
    ("N/h200.go:137", "H200-141GB", "7g.141gb", 144384),
    ("N/b200.go:59", "B200-180GB", "1g.23gb", 23552),
    ("N/b200.go:85", "B200-180GB", "1g.45gb", 46080),
    ("N/b200.go:137", "B200-180GB", "7g.180gb", 184320),
]


def _profile(model: str, name: str) -> gpu.MigProfile:
    return next(p for p in gpu.MIG_PROFILES[model] if p.name == name)


@pytest.mark.parametrize(("model", "name", "mib"), [c[1:] for c in REAL_MIB], ids=[c[0] for c in REAL_MIB])
def test_real_memory_is_go_nvmls(model: str, name: str, mib: int) -> None:
    assert _profile(model, name).memory_mib == mib
    assert gpu.memory_is_measured(model)


PROFILES = [
    # (pin, model, profile, instances)
    ("P:163 A30 has 4 1-slice instances", "A30-24GB", "1g.6gb", 4),
    ("P:181 A30 media extension", "A30-24GB", "2g.12gb+me", 1),
    ("P:187 A30's whole card is 4g", "A30-24GB", "4g.24gb", 1),
    ("P:54 RTX PRO 6000 graphics", "RTX-PRO-6000-96GB", "1g.24gb+gfx", 4),
    ("P:60 RTX PRO 6000 all media", "RTX-PRO-6000-96GB", "1g.24gb+me.all", 1),
    ("P:66 RTX PRO 6000 without media", "RTX-PRO-6000-96GB", "1g.24gb-me", 4),
    ("P:72 RTX PRO 6000 2g", "RTX-PRO-6000-96GB", "2g.48gb", 2),
    ("P:96 RTX PRO 6000 whole card is 4g", "RTX-PRO-6000-96GB", "4g.96gb", 1),
    ("P:125 H100 media extension", "H100-80GB", "1g.10gb+me", 1),
    ("P:194 H100 NVL", "H100-94GB", "1g.12gb", 7),
    ("P:257 H100 NVL", "H100-94GB", "3g.47gb", 2),
    ("P:269 H100 NVL", "H100-94GB", "7g.94gb", 1),
    ("P:276 H100-96GB", "H100-96GB", "3g.48gb", 2),
    ("P:288 GH200", "GH200-96GB", "7g.96gb", 1),
    ("P:385 H20 with H100-96GB", "H20-96GB", "3g.48gb", 2),
    ("P:481 GH200 144G", "GH200-144GB", "1g.36gb", 4),
    ("P:589 GH200 144G", "GH200-144GB", "7g.144gb", 1),
    ("P:226 GB200", "GB200-186GB", "1g.47gb", 4),
    ("P:250 GB200", "GB200-186GB", "7g.186gb", 1),
    ("P:462 B300", "B300-288GB", "1g.34gb", 7),
    ("P:493 B300", "B300-288GB", "1g.67gb", 4),
    ("P:547 B300", "B300-288GB", "3g.135gb", 2),
    ("P:607 B300", "B300-288GB", "7g.269gb", 1),
    ("P:432 GB300", "GB300-288GB", "1g.35gb", 7),
    ("P:499 GB300", "GB300-288GB", "1g.70gb", 4),
    ("P:553 GB300", "GB300-288GB", "3g.139gb", 2),
    ("P:613 GB300", "GB300-288GB", "7g.278gb", 1),
]


@pytest.mark.parametrize(("model", "name", "count"), [c[1:] for c in PROFILES], ids=[c[0] for c in PROFILES])
def test_profiles_and_instances_are_mig_parteds(model: str, name: str, count: int) -> None:
    assert _profile(model, name).max_instances == count


MODELS = [
    *("A100-40GB", "A100-80GB", "H100-80GB", "H100-94GB", "H100-96GB", "H20-96GB", "GH200-96GB"),
    *("GH200-144GB", "H200-141GB", "B200-180GB", "GB200-186GB", "B300-288GB", "GB300-288GB"),
    *("A30-24GB", "RTX-PRO-6000-96GB"),
]


def test_every_model_is_a_gpu_model_key() -> None:
    assert sorted(gpu.GPU_MODELS) == sorted(MODELS)


@pytest.mark.parametrize("model", MODELS)
def test_compute_slices_per_model(model: str) -> None:
    """P:187 and P:96: A30 and RTX PRO 6000 top out at 4g; every other card at 7g."""
    expected = 4 if model in ("A30-24GB", "RTX-PRO-6000-96GB") else 7
    assert gpu.model_slices(model) == expected == gpu.largest_profile(model).slices


@pytest.mark.parametrize("model", [m for m in MODELS if not gpu.memory_is_measured(m)])
def test_models_without_a_go_nvml_table_take_the_hopper_blackwell_rule(model: str) -> None:
    """N/h100.go:59, N/h200.go:111, N/b200.go:85: Hopper and Blackwell slices hold their nominal GiB."""
    for profile in gpu.MIG_PROFILES[model]:
        assert profile.memory_mib == profile.memory_gib * 1024


RESOURCE_NAMES = [
    # R:145: resourceName = strings.ReplaceAll("mig-"+p.String(), "+", ".")
    ("A100-40GB", "1g.5gb+me", "nvidia.com/mig-1g.5gb.me"),
    ("RTX-PRO-6000-96GB", "1g.24gb+me.all", "nvidia.com/mig-1g.24gb.me.all"),
    ("RTX-PRO-6000-96GB", "2g.48gb+gfx", "nvidia.com/mig-2g.48gb.gfx"),
    ("RTX-PRO-6000-96GB", "1g.24gb-me", "nvidia.com/mig-1g.24gb-me"),
]


@pytest.mark.parametrize(("model", "name", "resource"), RESOURCE_NAMES)
def test_resource_names_are_the_device_plugins(model: str, name: str, resource: str) -> None:
    profile = _profile(model, name)
    assert profile.resource == resource
    parsed = gpu.parse_mig_resource(resource)
    assert parsed is not None and parsed.name == profile.name


FITS = [
    # (model, request MiB, expected) -- a request fits only the real size
    ("A100-80GB", 10 * 1024, "1g.20gb"),  # 1g.10gb is 9856 MiB
    ("A100-80GB", 9856, "1g.10gb"),
    ("A100-40GB", 5 * 1024, "1g.10gb"),  # 1g.5gb is 4864 MiB
    ("A30-24GB", 6 * 1024, "2g.12gb"),  # 1g.6gb is 5836 MiB
    ("A30-24GB", 5836, "1g.6gb"),
    ("H100-80GB", 10 * 1024, "1g.10gb"),
    ("RTX-PRO-6000-96GB", 30 * 1024, "2g.48gb"),
    ("GB300-288GB", 200 * 1024, "7g.278gb"),
]


@pytest.mark.parametrize(("model", "mib", "expected"), FITS)
def test_a_request_fits_only_the_real_memory(model: str, mib: int, expected: str) -> None:
    profile = gpu.fitting_profile(model, mib)
    assert profile is not None and profile.name == expected and profile.plain


def test_compute_is_counted_in_the_models_own_slices() -> None:
    profile = gpu.fitting_profile("A30-24GB", 1, 50)  # half of 4 slices
    assert profile is not None and profile.name == "2g.12gb"


def _pod(count: str = "1", memory: str | None = None) -> dict[str, Any]:
    annotations = {"gpuwebhook.io/gpu-memory": memory} if memory else {}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p", "namespace": "ns", "annotations": annotations},
        "spec": {
            "containers": [{"name": "main", "image": "x", "resources": {"limits": {"nvidia.com/gpu": count}}}]
        },
    }


def _terms(obj: dict[str, Any]) -> list[dict[str, Any]]:
    required = obj["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    return list(required["nodeSelectorTerms"][0]["matchExpressions"])


def test_the_review_explains_request_profile_and_real_size() -> None:
    policy = sharing_policy("sharing: {mode: mig, gpuModel: A100-80GB}")
    result = mutate_object(_pod(memory="10Gi"), policy)
    assert result.object["spec"]["containers"][0]["resources"]["limits"] == {"nvidia.com/mig-1g.20gb": "1"}
    assert any("10Gi -> 1g.20gb (19968 MiB real, measured; 1/7 slices)" in w for w in result.warnings)


def test_single_strategy_keeps_nvidia_gpu_and_pins_gfd_single_labels() -> None:
    """L:257-266: single mode labels mig.strategy, gpu.slices.gi and gpu.memory (the slice's MiB)."""
    policy = sharing_policy("sharing: {mode: mig, gpuModel: A100-80GB, migStrategy: single}")
    result = mutate_object(_pod(memory="15Gi"), policy)
    assert result.object["spec"]["containers"][0]["resources"]["limits"] == {"nvidia.com/gpu": "1"}
    assert _terms(result.object) == [
        {"key": "nvidia.com/mig.strategy", "operator": "In", "values": ["single"]},
        {"key": "nvidia.com/gpu.slices.gi", "operator": "In", "values": ["1"]},
        {"key": "nvidia.com/gpu.memory", "operator": "Gt", "values": [str(15 * 1024 - 1)]},
    ]
    assert mutate_object(result.object, policy).patch == ()


def test_mixed_strategy_pins_the_nodes_own_measure_where_the_table_is_nominal() -> None:
    policy = sharing_policy("sharing: {mode: mig, gpuModel: GH200-96GB}")
    result = mutate_object(_pod(memory="12Gi"), policy)
    assert result.object["spec"]["containers"][0]["resources"]["limits"] == {"nvidia.com/mig-1g.12gb": "1"}
    assert _terms(result.object) == [
        {"key": "nvidia.com/mig-1g.12gb.memory", "operator": "Gt", "values": [str(12 * 1024 - 1)]}
    ]


MULTI = [
    ("wholeGpus", {"nvidia.com/gpu": "8"}, "keeps 8 whole GPUs"),
    ("slices", {"nvidia.com/mig-1g.20gb": "8"}, "8 MIG slices"),
]


@pytest.mark.parametrize(("rule", "limits", "warning"), MULTI)
def test_multi_gpu_containers_follow_the_policys_rule(
    rule: str, limits: dict[str, str], warning: str
) -> None:
    policy = sharing_policy(
        f"sharing: {{mode: mig, gpuModel: A100-80GB, defaultMemory: 15Gi, multiGpu: {rule}}}"
    )
    result = mutate_object(_pod("8"), policy)
    assert result.object["spec"]["containers"][0]["resources"]["limits"] == limits
    assert any(warning in w for w in result.warnings)


def test_multi_gpu_default_never_breaks_the_job() -> None:
    policy = sharing_policy("sharing: {mode: mig, gpuModel: H100-80GB, defaultMemory: 10Gi}")
    assert policy.sharing.multi_gpu == "wholeGpus"
    result = mutate_object(_pod("8"), policy)
    assert result.object["spec"]["containers"][0]["resources"]["limits"] == {"nvidia.com/gpu": "8"}


def test_multi_gpu_deny() -> None:
    policy = sharing_policy("sharing: {mode: mig, gpuModel: A100-80GB, defaultMemory: 15Gi, multiGpu: deny}")
    with pytest.raises(AdmissionDenied, match=r"8 GPUs.*multiGpu: deny"):
        mutate_object(_pod("8"), policy)


def test_single_strategy_whole_gpus_avoid_sliced_nodes() -> None:
    policy = sharing_policy(
        "sharing: {mode: mig, gpuModel: A100-80GB, defaultMemory: 15Gi, migStrategy: single}"
    )
    result = mutate_object(_pod("8"), policy)
    assert _terms(result.object) == [{"key": "nvidia.com/gpu.slices.gi", "operator": "DoesNotExist"}]


def _quota_pod(resource: str, count: str = "1") -> dict[str, Any]:
    return {
        "metadata": {"name": "p"},
        "spec": {"containers": [{"name": "main", "resources": {"limits": {resource: count}}}]},
    }


@pytest.mark.parametrize(
    "resource",
    [
        "nvidia.com/mig-1g.10gb.me",
        "nvidia.com/mig-1g.24gb.me.all",
        "nvidia.com/mig-1g.24gb.gfx",
        "nvidia.com/mig-1g.24gb-me",
    ],
)
def test_quota_counts_media_and_graphics_slices(resource: str) -> None:
    usage = pod_demand(_quota_pod(resource, "2"))
    assert usage.devices == 2 and usage.gpus > 0 and usage.gpu_memory_mib > 0


def test_quota_refuses_a_mig_name_it_cannot_read() -> None:
    with pytest.raises(QuotaInputError, match=r"mig-1g\.10gb\.xx"):
        pod_demand(_quota_pod("nvidia.com/mig-1g.10gb.xx"))


@pytest.mark.parametrize(
    ("spec", "fragment"),
    [
        ("{mode: mig, gpuModel: A100-80GB, migStrategy: both}", "migStrategy"),
        ("{mode: timeslice, migStrategy: single}", "applies only to modes mig"),
        ("{mode: mig, gpuModel: A100-80GB, multiGpu: some}", "multiGpu"),
        ("{mode: mig, gpuModel: A100-70GB}", "gpuModel"),
    ],
)
def test_policies_check_refuses_what_mig_cannot_do(spec: str, fragment: str) -> None:
    problems = compile_problems(f"sharing: {spec}")
    assert any(fragment in p for p in problems), problems


def test_a_quota_over_a_4_slice_model_counts_its_own_slices() -> None:
    settings = QuotaSettings(mig_slices_per_gpu=gpu.model_slices("A30-24GB"))
    shape = pod_shape(_quota_pod("nvidia.com/mig-2g.12gb", "1"))
    assert shape is not None
    assert shape_demand(shape, settings).gpus == Fraction(1, 2)


@pytest.mark.parametrize(
    ("spec", "fragment"),
    [
        ("sharing: {mode: mig, gpuModel: A100-80GB, defaultMemory: 80Gi}", "largest MIG slice holds"),
        (
            "sharing: {mode: mig, gpuModel: A100-80GB, migStrategy: single}\n"
            "inject:\n  nodeAffinity:\n    required:\n"
            "      - {key: nvidia.com/mig.strategy, operator: In, values: [mixed]}",
            "could never schedule",
        ),
        (
            "sharing: {mode: timeslice}\n"
            "inject:\n  nodeAffinity:\n    required:\n"
            "      - {key: nvidia.com/gpu.sharing-strategy, operator: In, values: [mps]}",
            "could never schedule",
        ),
    ],
)
def test_policies_that_could_never_schedule_are_refused(spec: str, fragment: str) -> None:
    assert any(fragment in p for p in compile_problems(spec))


def test_quota_understands_single_strategy_pods_by_their_pinning() -> None:
    """Under single strategy nvidia.com/gpu is a slice; the pod's own required affinity says which."""
    policy = sharing_policy(
        "sharing: {mode: mig, gpuModel: A100-80GB, migStrategy: single, multiGpu: slices}"
    )
    admitted = mutate_object(_pod("2", memory="15Gi"), policy).object
    usage = pod_demand(admitted)
    assert usage.gpus == Fraction(2, 7)  # two 1-slice profiles
    assert usage.gpu_memory_mib == 2 * 15 * 1024
    assert usage.devices == 2
    assert pod_demand(_pod("2")).gpus == 2  # the same pod without the pinning: whole GPUs


def test_a_pinning_that_leaves_any_term_open_counts_whole_gpus() -> None:
    policy = sharing_policy("sharing: {mode: mig, gpuModel: A100-80GB, migStrategy: single}")
    admitted = mutate_object(_pod("1", memory="15Gi"), policy).object
    required = admitted["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    required["nodeSelectorTerms"].append({"matchExpressions": [{"key": "zone", "operator": "Exists"}]})
    assert pod_demand(admitted).gpus == 1


MEDIA_QUOTA = """apiVersion: gpuwebhook.io/v1alpha1
kind: GPUQuota
metadata: {name: team}
spec:
  match: {namespaces: [team]}
  limits: {gpus: 1, resources: {nvidia.com/mig-1g.10gb.me: 1}}
  enforcementAction: deny
"""


def _quota_review(resource: str, count: str) -> Any:
    compiled, problems = compile_documents(parse_documents(MEDIA_QUOTA, "q.yaml"))
    assert not problems
    deps = ReviewDeps(policies=compiled, quota_gate=LocalGate(cache_from(Inventory("test"))))
    obj = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p", "namespace": "team"},
        "spec": {"containers": [{"name": "c", "image": "x", "resources": {"limits": {resource: count}}}]},
    }
    return review(parse_review(orjson.dumps(make_review(obj))), "validate", deps)


@pytest.mark.parametrize(
    ("resource", "count", "allowed"),
    [
        ("nvidia.com/mig-1g.10gb.me", "1", True),
        ("nvidia.com/mig-1g.10gb.me", "2", False),  # its own limit
        ("nvidia.com/mig-1g.24gb-me", "8", False),  # 8 x 1/7 GPU is more than 1
        ("nvidia.com/mig-1g.24gb-me", "7", True),
    ],
)
def test_quota_limits_media_extension_slices(resource: str, count: str, allowed: bool) -> None:
    assert _quota_review(resource, count).allowed is allowed


def test_a_quota_on_a_mig_name_nobody_advertises_is_refused() -> None:
    _, problems = compile_documents(
        parse_documents(MEDIA_QUOTA.replace("mig-1g.10gb.me", "mig-1g.10gb.xx"), "q.yaml")
    )
    assert any("not a MIG profile" in str(p) for p in problems)
