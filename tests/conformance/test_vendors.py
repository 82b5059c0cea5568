"""The vendor catalog (webhook/vendors.py), pinned name by name to the device plugin that
advertises it, and counted the one way every rule counts (webhook/accounting/demand.py)."""

from __future__ import annotations

from fractions import Fraction
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.support.pods import make_pod, res, sidecar
from webhook import vendors
from webhook.accounting import names
from webhook.accounting.count import count_gpus
from webhook.accounting.demand import QuotaSettings, pod_demand
from webhook.mutation.void import VARIABLE, containers_without_gpus

# (resource, vendor, part, upstream file that names it)
NAMES = [
    ("nvidia.com/gpu", "nvidia", "count", "NVIDIA/k8s-device-plugin api/config/v1/resources.go"),
    ("nvidia.com/gpumem", "nvidia", "memory", "Project-HAMi/HAMi charts/hami/values.yaml resourceMem"),
    ("nvidia.com/gpumem-percentage", "nvidia", "percent", "Project-HAMi/HAMi charts/hami/values.yaml"),
    ("nvidia.com/gpucores", "nvidia", "cores", "Project-HAMi/HAMi charts/hami/values.yaml resourceCores"),
    (
        "volcano.sh/vgpu-number",
        "nvidia",
        "count",
        "volcano-vgpu-device-plugin deployments/helm/.../values.yaml",
    ),
    (
        "volcano.sh/vgpu-memory",
        "nvidia",
        "memory",
        "volcano-vgpu-device-plugin values.yaml resourceMemoryName",
    ),
    ("volcano.sh/vgpu-cores", "nvidia", "cores", "volcano-vgpu-device-plugin values.yaml resourceCoreName"),
    ("aliyun.com/gpu-mem", "nvidia", "memory", "gpushare-device-plugin pkg/gpu/nvidia/const.go resourceName"),
    (
        "aliyun.com/gpu-count",
        "nvidia",
        "count",
        "gpushare-device-plugin pkg/gpu/nvidia/const.go resourceCount",
    ),
    ("amd.com/gpu", "amd", "count", "ROCm/k8s-device-plugin internal/pkg/plugin/plugin.go"),
    ("amd.com/cpx_nps4", "amd", "count", "ROCm/k8s-device-plugin internal/pkg/amdgpu/amdgpu.go (mixed)"),
    ("amd.com/spx_nps1", "amd", "count", "ROCm/k8s-device-plugin cmd/k8s-device-plugin/main.go (mixed)"),
    ("amd.com/gpumem", "amd", "memory", "Project-HAMi/HAMi device-configmap.yaml amd"),
    (
        "gpu.intel.com/i915",
        "intel",
        "count",
        "intel-device-plugins-for-kubernetes cmd/gpu_plugin/gpu_plugin.go",
    ),
    (
        "gpu.intel.com/xe",
        "intel",
        "count",
        "intel-device-plugins-for-kubernetes cmd/gpu_plugin/gpu_plugin.go",
    ),
    ("gpu.intel.com/monitoring", "intel", "count", "cmd/gpu_plugin/gpu_plugin.go monitorResourceCombined"),
    ("huawei.com/Ascend910B3", "huawei", "count", "Project-HAMi/HAMi device-configmap.yaml vnpus"),
    ("huawei.com/Ascend910B3-memory", "huawei", "memory", "Project-HAMi/HAMi pkg/device/ascend/device.go"),
    ("huawei.com/Ascend910", "huawei", "count", "Ascend/ascend-device-plugin pkg/common/constants.go"),
    ("huawei.com/Ascend910-2c", "huawei", "count", "Ascend/ascend-device-plugin pkg/common/constants.go"),
    (
        "huawei.com/Ascend310P-4c.3cpu",
        "huawei",
        "count",
        "Ascend/ascend-device-plugin pkg/common/constants.go",
    ),
    ("cambricon.com/vmlu", "cambricon", "count", "Project-HAMi/HAMi charts/hami/values.yaml"),
    (
        "cambricon.com/mlu.smlu.vmemory",
        "cambricon",
        "memory",
        "Project-HAMi/HAMi pkg/device/cambricon/device.go",
    ),
    (
        "cambricon.com/mlu370",
        "cambricon",
        "count",
        "cambricon-k8s-device-plugin device-plugin/pkg/mlu/server.go",
    ),
    ("hygon.com/dcunum", "hygon", "count", "Project-HAMi/HAMi charts/hami/values.yaml"),
    (
        "hygon.com/hcu",
        "hygon",
        "count",
        "HYGON-AI/hcu-container-toolkit docs/user-guide/k8s-device-plugin.md",
    ),
    ("iluvatar.ai/BI-V150-vgpu", "iluvatar", "count", "Project-HAMi/HAMi device-configmap.yaml iluvatars"),
    ("mthreads.com/vgpu", "mthreads", "count", "Project-HAMi/HAMi device-configmap.yaml mthreads"),
    ("metax-tech.com/sgpu", "metax", "count", "Project-HAMi/HAMi pkg/device/metax/config.go"),
    ("enflame.com/drs-gcu", "enflame", "count", "Project-HAMi/HAMi pkg/device/enflame/config.go"),
    ("kunlunxin.com/vxpu", "kunlunxin", "count", "Project-HAMi/HAMi pkg/device/kunlun/config.go"),
]
NOT_ACCELERATORS = [
    "cpu",
    "memory",
    "amd.com/gpux",
    "amd.com/cpx_nps9",  # the amdgpu driver has no NPS9
    "gpu.intel.com/millicores",  # a node label since the plugin dropped its resource manager
    "huawei.com/Ascend910-Unhealthy",  # an annotation of the Ascend plugin, never requested
    "cambricon.com/mlu.smlu",
    "example.com/gpu",
]


@pytest.mark.parametrize(("name", "vendor", "part", "source"), NAMES, ids=[n[0] for n in NAMES])
def test_every_name_has_its_vendor_and_part(name: str, vendor: str, part: str, source: str) -> None:
    found = vendors.family_of(name)
    assert found is not None, f"{name} ({source}) is missing from the catalog"
    family, found_part = found
    assert (family.vendor, found_part) == (vendor, part), source
    assert names.is_accelerator(name) and names.vendor(name) == vendor
    assert family.source  # every family cites the upstream file its names come from


@pytest.mark.parametrize("name", NOT_ACCELERATORS)
def test_other_names_are_no_accelerator(name: str) -> None:
    assert not names.is_accelerator(name)


def test_no_name_is_in_two_families() -> None:
    listed = [name for family in vendors.FAMILIES for name in family.names()]
    assert len(listed) == len(set(listed))


# (pod's containers, settings, GPU-equivalents, devices, GPU memory MiB)
A100 = QuotaSettings(card_memory_mib=81920)
DEMANDS: list[tuple[str, list[dict[str, Any]], QuotaSettings, Fraction, int, int]] = [
    ("AMD whole GPUs", [res("a", {"amd.com/gpu": 16})], QuotaSettings(), Fraction(16), 16, 0),
    (
        "AMD partitions count as devices",
        [res("a", {"amd.com/cpx_nps4": 8})],
        QuotaSettings(),
        Fraction(8),
        8,
        0,
    ),
    (
        "AMD partitions as replicas where the quota says so",
        [res("a", {"amd.com/cpx_nps4": 8})],
        QuotaSettings(shared_replicas=(("amd.com/cpx_nps4", 8),)),
        Fraction(1),
        8,
        0,
    ),
    ("Intel i915", [res("a", {"gpu.intel.com/i915": 4})], QuotaSettings(), Fraction(4), 4, 0),
    (
        "Intel monitoring holds no GPU",
        [res("a", {"gpu.intel.com/monitoring": 1})],
        QuotaSettings(),
        Fraction(0),
        0,
        0,
    ),
    ("Ascend through HAMi", [res("a", {"huawei.com/Ascend910B3": 16})], QuotaSettings(), Fraction(16), 16, 0),
    (
        # HAMi pkg/device/ascend/device.go: -memory is MiB per device.
        "Ascend memory share",
        [res("a", {"huawei.com/Ascend910B3": 2, "huawei.com/Ascend910B3-memory": 16384})],
        QuotaSettings(card_memory_mib=65536),
        Fraction(1, 2),
        2,
        32768,
    ),
    ("Volcano vGPUs", [res("a", {"volcano.sh/vgpu-number": 64})], QuotaSettings(), Fraction(64), 64, 0),
    (
        # volcano-vgpu-device-plugin: vgpu-memory in MiB per vGPU (gpuMemoryFactor 1).
        "Volcano memory share",
        [res("a", {"volcano.sh/vgpu-number": 2, "volcano.sh/vgpu-memory": 20480})],
        A100,
        Fraction(1, 2),
        2,
        40960,
    ),
    (
        # gpushare cmd/nvidia/main.go: --memory-unit GiB by default; one GPU.
        "gpushare memory in GiB",
        [res("a", {"aliyun.com/gpu-mem": 20})],
        A100,
        Fraction(1, 4),
        1,
        20480,
    ),
    (
        # HAMi pkg/device/mthreads/device.go: 16 sgpu-core make one GPU.
        "Mthreads compute share",
        [res("a", {"mthreads.com/vgpu": 1, "mthreads.com/sgpu-core": 8})],
        QuotaSettings(),
        Fraction(1, 2),
        1,
        0,
    ),
    (
        "a sidecar then an init container: Kubernetes' rule",
        [res("a", {"amd.com/gpu": 1})],
        QuotaSettings(),
        Fraction(3),
        3,
        0,
    ),
    (
        # k8s-device-plugin api/config/v1/replicas.go: renameByDefault appends .shared to MIG too.
        "a shared MIG slice counts as its slice",
        [res("a", {"nvidia.com/mig-1g.10gb.shared": 2})],
        QuotaSettings(),
        Fraction(2, 7),
        2,
        20480,
    ),
    (
        # go-nvml pkg/nvml/mock/gpus (webhook/migtable.py): A100-80GB's 1g.10gb holds 9,856 MiB.
        "a MIG slice counts its real memory on the quota's card",
        [res("a", {"nvidia.com/mig-1g.10gb": 2})],
        QuotaSettings(gpu_model="A100-80GB"),
        Fraction(2, 7),
        2,
        2 * 9856,
    ),
    (
        "a shared MIG slice as replicas where the quota says so",
        [res("a", {"nvidia.com/mig-1g.10gb.shared": 2})],
        QuotaSettings(shared_replicas=(("nvidia.com/mig-1g.10gb.shared", 2),)),
        Fraction(1, 7),
        2,
        10240,
    ),
]


# A native sidecar adds to the app containers and to every init container after it.
INITS = {
    "a sidecar then an init container: Kubernetes' rule": [
        sidecar("s", {"amd.com/gpu": 1}),
        res("i", {"amd.com/gpu": 2}),
    ]
}


@pytest.mark.parametrize(
    ("case", "containers", "settings", "gpus", "devices", "memory"), DEMANDS, ids=[d[0] for d in DEMANDS]
)
def test_every_vendor_counts(
    case: str,
    containers: list[dict[str, Any]],
    settings: QuotaSettings,
    gpus: Fraction,
    devices: int,
    memory: int,
) -> None:
    pod = make_pod("p", "team", containers, init=INITS.get(case, []))
    usage = pod_demand(pod, settings)
    assert (usage.gpus, usage.devices, usage.gpu_memory_mib) == (gpus, Fraction(devices), Fraction(memory)), (
        case
    )
    assert count_gpus(pod).devices == devices  # max-per-pod and quota read the same count


# Which containers keep the environment their device plugin writes (k8s-device-plugin
# internal/plugin/server.go, volcano-vgpu-device-plugin pkg/plugin/server.go, gpushare-device-plugin
# pkg/gpu/nvidia/allocate.go: each sets NVIDIA_VISIBLE_DEVICES in Allocate), and which need void.
VOID = [
    ({"nvidia.com/gpu": 1}, False),
    ({"nvidia.com/mig-1g.10gb.shared": 1}, False),
    ({"volcano.sh/vgpu-number": 1, "volcano.sh/vgpu-memory": 4096}, False),
    ({"aliyun.com/gpu-mem": 4}, False),
    # Volcano's scheduler gives a memory-only ask its default count (defaultGPUNum), so it keeps
    # the environment too: void there would take away the vGPU it does get.
    ({"volcano.sh/vgpu-memory": 4096}, False),
    ({"amd.com/gpu": 1}, True),
    ({"gpu.intel.com/i915": 1}, True),
    ({"huawei.com/Ascend910B3": 1}, True),
    ({"cpu": 1}, True),
]


@pytest.mark.parametrize(("amounts", "voided"), VOID, ids=[",".join(a) for a, _ in VOID])
def test_void_only_where_no_nvidia_gpu_comes(amounts: dict[str, int], voided: bool) -> None:
    pod = make_pod("p", "team", [res("main", amounts)])
    assert bool(list(containers_without_gpus(pod))) is voided, VARIABLE


@given(st.text(max_size=40))
def test_the_catalog_answers_any_name(name: str) -> None:
    found = vendors.family_of(name)
    assert found is None or name in found[0].names()
    assert names.is_accelerator(name) == (
        found is not None or name.startswith("nvidia.com/mig-") or name == "nvidia.com/gpu.shared"
    )


def test_device_variables_name_their_runtime() -> None:
    by_name = {v.name: v for v in vendors.DEVICE_VARIABLES}
    assert by_name["AMD_VISIBLE_DEVICES"].source == "ROCm/container-toolkit internal/oci/oci.go"
    assert by_name["DOCKER_RESOURCE_"].prefix
    assert by_name["ASCEND_VISIBLE_DEVICES"].vendor == "huawei"
    assert all(v.source for v in vendors.DEVICE_VARIABLES)
