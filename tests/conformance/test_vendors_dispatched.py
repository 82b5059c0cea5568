"""Every vendor end to end: through the installed webhook configurations (manifests/base), as
kube-apiserver dispatches them, /mutate with its patch applied, then /validate, with the bundled
policies, GPU quotas and an inventory as the cluster's state. One count for every rule: quota,
max-per-pod (GpuMaxPerPod, max 8), `quota status`, the audit record and placement hints."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from fractions import Fraction
from typing import Any

import pytest

from tests.dra.objects import device_class
from tests.dra.objects import pod as dra_pod
from tests.support.dispatch import Admission, Dispatcher, Request, installed
from tests.support.pods import make_pod, namespace, quota, res, sidecar
from tests.support.policies import bundled_policies, sharing_policy
from webhook.accounting.count import count_gpus
from webhook.inventory import Inventory, cache_from
from webhook.mutation.hints import pod_demand
from webhook.offline import offline_deps
from webhook.quota.status import status_rows

TEAM = "team-accel"
QUOTAS = (
    quota("accel", {"gpus": 4}, match={"namespaces": [TEAM]}),
    # A per-resource line on another vendor's name is enforced like nvidia.com/gpu's.
    quota("amd-line", {"resources": {"amd.com/gpu": 8}}, match={"namespaces": ["team-amd"]}),
)
EXISTING = (
    namespace(TEAM),
    namespace("team-amd"),
    make_pod("running", "team-amd", [res("main", {"amd.com/gpu": 6})]),
    # A GPU DeviceClass serving an extended resource: its devices are GPUs to every rule.
    device_class("big.example.com", "device.driver == 'gpu.nvidia.com'", "example.com/big-gpu"),
)
INVENTORY = Inventory("test", EXISTING)
TIMESLICE_PACKED = sharing_policy(
    "match: {namespaces: [packed]}\nsharing: {mode: timeslice, sharedDevicesAllocationPolicy: packed}",
    name="packed",
)
CAPPED = sharing_policy(
    "match: {namespaces: [capped]}\nsharing: {mode: timeslice, maxGpusPerPod: 2}", name="capped"
)
HAMI_DENY = sharing_policy(
    "match: {namespaces: [hami-deny]}\nsharing: {mode: hami, defaultMemory: 20Gi, multiGpu: deny}",
    name="hami-deny",
)


@pytest.fixture(scope="module")
def dispatcher() -> Iterator[Dispatcher]:
    bundled = bundled_policies()
    policies = dataclasses.replace(
        bundled, sharing=(*bundled.sharing, TIMESLICE_PACKED, HAMI_DENY, CAPPED), quotas=QUOTAS
    )
    with installed(offline_deps(policies, INVENTORY)) as dispatcher:
        yield dispatcher


def _admit(dispatcher: Dispatcher, obj: dict[str, Any]) -> Admission:
    return dispatcher.admit(Request("CREATE", obj))


def _env(obj: dict[str, Any] | None, container: int = 0) -> list[dict[str, Any]]:
    assert obj is not None
    return list(obj["spec"]["containers"][container].get("env", []))


# Each vendor's devices (webhook/vendors.py names the upstream file of each name).
VENDORS = [
    "amd.com/gpu",
    "amd.com/cpx_nps4",
    "gpu.intel.com/i915",
    "gpu.intel.com/xe",
    "huawei.com/Ascend910B3",
    "volcano.sh/vgpu-number",
    "cambricon.com/vmlu",
]


@pytest.mark.parametrize("name", VENDORS)
def test_every_vendors_devices_count_against_the_quota(dispatcher: Dispatcher, name: str) -> None:
    outcome = _admit(dispatcher, make_pod("six", TEAM, [res("main", {name: 6})]))
    assert not outcome.allowed
    assert "GPUQuota" in outcome.message and "accel" in outcome.message, outcome.message


@pytest.mark.parametrize("name", VENDORS)
def test_max_per_pod_counts_every_vendors_devices(dispatcher: Dispatcher, name: str) -> None:
    outcome = _admit(dispatcher, make_pod("big", "plain", [res("main", {name: 16})]))
    assert not outcome.allowed
    assert "asks for 16 GPUs; at most 8 are allowed per pod" in outcome.message, outcome.message


@pytest.mark.parametrize(
    "amounts", [{"amd.com/gpu": 2}, {"gpu.intel.com/i915": 3}, {"huawei.com/Ascend910": 4}]
)
def test_within_the_quota_every_vendor_is_admitted(dispatcher: Dispatcher, amounts: dict[str, int]) -> None:
    outcome = _admit(dispatcher, make_pod("small", TEAM, [res("main", amounts)]))
    assert outcome.allowed, outcome.message


def test_a_per_resource_line_on_an_amd_name_is_enforced(dispatcher: Dispatcher) -> None:
    assert _admit(dispatcher, make_pod("two", "team-amd", [res("main", {"amd.com/gpu": 2})])).allowed
    outcome = _admit(dispatcher, make_pod("four", "team-amd", [res("main", {"amd.com/gpu": 4})]))
    assert not outcome.allowed and "amd.com/gpu" in outcome.message, outcome.message


def test_quota_status_shows_the_amd_line_as_used() -> None:
    cache = cache_from(INVENTORY)
    rows = [r for r in status_rows(QUOTAS, cache) if r.namespace == "team-amd"]
    assert [(r.resource, r.used, r.limit) for r in rows] == [("amd.com/gpu", Fraction(6), Fraction(8))]


# NVIDIA GPUs under other device plugins' names keep the environment their plugin writes
# (volcano-vgpu-device-plugin pkg/plugin/server.go, gpushare-device-plugin
# pkg/gpu/nvidia/allocate.go); a shared MIG slice is a GPU too (k8s-device-plugin
# api/config/v1/replicas.go renameByDefault).
KEEP_THEIR_GPU = [
    {"volcano.sh/vgpu-number": 1, "volcano.sh/vgpu-memory": 8192},
    {"aliyun.com/gpu-mem": 8},
    {"nvidia.com/mig-1g.10gb.shared": 1},
]


@pytest.mark.parametrize("amounts", KEEP_THEIR_GPU, ids=[next(iter(a)) for a in KEEP_THEIR_GPU])
def test_nvidia_gpus_under_other_names_keep_their_gpu(
    dispatcher: Dispatcher, amounts: dict[str, int]
) -> None:
    outcome = _admit(dispatcher, make_pod("shared", "plain", [res("main", amounts)]))
    assert outcome.allowed, outcome.message
    assert not any(e.get("name") == "NVIDIA_VISIBLE_DEVICES" for e in _env(outcome.object))


def test_a_container_with_another_vendors_device_gets_void(dispatcher: Dispatcher) -> None:
    outcome = _admit(dispatcher, make_pod("amd", "plain", [res("main", {"amd.com/gpu": 1})]))
    assert outcome.allowed, outcome.message
    assert {"name": "NVIDIA_VISIBLE_DEVICES", "value": "void"} in _env(outcome.object)


# Other runtimes' device-selecting variables (ROCm container-toolkit internal/oci/oci.go,
# ascend-docker-runtime runtime/main.go) are routes as NVIDIA's are.
ROUTES = [
    ("AMD_VISIBLE_DEVICES", "all", False),
    ("DOCKER_RESOURCE_GPU", "0", False),
    ("ASCEND_VISIBLE_DEVICES", "0,1", False),
    ("HCU_VISIBLE_DEVICES", "all", False),
    ("ASCEND_VISIBLE_DEVICES", "", True),  # what HAMi writes itself (pkg/device/ascend/device.go)
    ("AMD_VISIBLE_DEVICES", "void", True),
]


@pytest.mark.parametrize(("variable", "value", "allowed"), ROUTES)
def test_other_runtimes_device_variables_are_routes(
    dispatcher: Dispatcher, variable: str, value: str, allowed: bool
) -> None:
    container = {**res("main", {"cpu": 1}), "env": [{"name": variable, "value": value}]}
    outcome = _admit(dispatcher, make_pod("env", "plain", [container]))
    assert outcome.allowed is allowed, outcome.message
    if not allowed:
        assert variable in outcome.message


def test_an_envfrom_prefix_that_spells_a_device_family_is_denied(dispatcher: Dispatcher) -> None:
    container = {**res("main", {"cpu": 1}), "envFrom": [{"prefix": "DOCKER_", "configMapRef": {"name": "x"}}]}
    outcome = _admit(dispatcher, make_pod("env", "plain", [container]))
    assert not outcome.allowed and "DOCKER_RESOURCE_*" in outcome.message, outcome.message


# The readers agree.


def test_kai_num_devices_alone_is_refused_with_kais_message(dispatcher: Dispatcher) -> None:
    obj = make_pod("kai", "plain", [res("main", {"cpu": 1})], annotations={"gpu-fraction-num-devices": "2"})
    outcome = _admit(dispatcher, obj)
    assert not outcome.allowed
    assert "cannot request multiple fractional devices without specifying fraction portion or gpu-memory" in (
        outcome.message
    )


def test_a_fraction_kai_accepts_is_counted_by_the_quota(dispatcher: Dispatcher) -> None:
    # KAI reads gpu-fraction with Go's strconv.ParseFloat (gpu_request_validator.go).
    obj = make_pod("half", TEAM, [res("main", {"cpu": 1})], annotations={"gpu-fraction": "5e-1"})
    obj["spec"]["schedulerName"] = "kai-scheduler"
    outcome = _admit(dispatcher, obj)
    assert outcome.allowed, outcome.message


def test_placement_hints_and_the_quota_count_a_sidecar_then_init_pod_alike() -> None:
    slice_ = "nvidia.com/mig-1g.10gb"
    pod = make_pod(
        "p", TEAM, [res("main", {slice_: 1})], init=[sidecar("s", {slice_: 1}), res("i", {slice_: 2})]
    )
    from webhook.accounting.target import pod_target

    target = pod_target(pod)
    assert target is not None
    assert pod_demand(target) == {slice_: 3} == dict(count_gpus(pod).resources)


# A DeviceClass serves example.com/big-gpu (EXISTING): its devices are GPUs to the policy's cap too.
@pytest.mark.parametrize("name", ["example.com/big-gpu", "amd.com/gpu"])
def test_a_policys_max_gpus_per_pod_counts_what_the_quota_counts(dispatcher: Dispatcher, name: str) -> None:
    outcome = _admit(dispatcher, dra_pod("capped", namespace="capped", limits={name: "3"}))
    assert not outcome.allowed
    assert "asks for 3 GPUs; at most 2 per pod (policy capped)" in outcome.message, outcome.message


def test_max_per_pod_counts_an_extended_resource_a_gpu_device_class_serves(dispatcher: Dispatcher) -> None:
    obj = dra_pod("backed", namespace=TEAM, limits={"example.com/big-gpu": "9"})
    outcome = _admit(dispatcher, obj)
    assert not outcome.allowed
    assert "asks for 9 GPUs" in outcome.message, outcome.message


# No silent shrinking: a multi-GPU container that a policy would share is warned or denied.


def test_hami_warns_for_each_shared_multi_gpu_container(dispatcher: Dispatcher) -> None:
    outcome = _admit(dispatcher, make_pod("train", "example-hami", [res("main", {"nvidia.com/gpu": 4})]))
    assert outcome.allowed, outcome.message
    assert any("each of its 4 GPUs is shared by hami" in w for w in outcome.warnings), outcome.warnings


def test_hami_denies_a_multi_gpu_container_where_the_policy_says_so(dispatcher: Dispatcher) -> None:
    outcome = _admit(dispatcher, make_pod("train", "hami-deny", [res("main", {"nvidia.com/gpu": 4})]))
    assert not outcome.allowed and "multiGpu: deny" in outcome.message, outcome.message


def test_kai_warns_for_a_multi_gpu_container(dispatcher: Dispatcher) -> None:
    outcome = _admit(dispatcher, make_pod("train", "example-kai", [res("main", {"nvidia.com/gpu": 2})]))
    assert outcome.allowed, outcome.message
    assert any("each of its 2 GPUs is shared by kai" in w for w in outcome.warnings), outcome.warnings


@pytest.mark.parametrize(
    ("namespace_", "said"),
    [
        ("example-timeslice", "distributed allocation spreads them over up to 2 GPUs"),
        ("packed", "packed on one"),
    ],
)
def test_the_time_slicing_warning_follows_the_allocation_policy(
    dispatcher: Dispatcher, namespace_: str, said: str
) -> None:
    outcome = _admit(dispatcher, make_pod("train", namespace_, [res("main", {"nvidia.com/gpu": 2})]))
    assert outcome.allowed, outcome.message
    assert any(said in w for w in outcome.warnings), outcome.warnings


@pytest.mark.parametrize("amounts", [{"volcano.sh/vgpu-number": 1}, {"aliyun.com/gpu-mem": 8}])
def test_nvidia_gpus_through_another_plugin_sidestep_no_sharing_policy(
    dispatcher: Dispatcher, amounts: dict[str, int]
) -> None:
    outcome = _admit(dispatcher, make_pod("other", "example-timeslice", [res("main", amounts)]))
    assert not outcome.allowed
    assert "NVIDIA GPUs through" in outcome.message and "shares GPUs here by timeslice" in outcome.message
