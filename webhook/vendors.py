"""The vendor catalog: every accelerator resource name a device plugin advertises, as data.

A *family* is what one device plugin offers for one kind of device: a count of devices,
and, for the plugins that share a device (HAMi and its per-vendor backends, Volcano's vGPU,
Aliyun's gpushare), the memory and compute each device of the count may use. The rules
count a family the same way whoever wrote it: devices, and GPU-equivalents from the share
of memory or compute (see webhook/accounting/demand.py).

`nvidia_runtime` marks the families that hand a container an NVIDIA GPU through the NVIDIA
container runtime, with the device plugin's own `NVIDIA_VISIBLE_DEVICES`. Those containers
must keep that environment: `void` is only for containers that get no NVIDIA GPU at all.

Each family names the upstream file its names come from; tests/conformance/test_vendors.py
pins them. A cluster adds its own names through `extraGpuResources` and quota settings.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from fractions import Fraction
from typing import Literal

Part = Literal["count", "memory", "percent", "cores"]


@dataclass(frozen=True)
class Family:
    """One device plugin's resources for one kind of device."""

    vendor: str
    plugin: str
    source: str  # the upstream file the names come from
    count: str  # devices; "" when the family asks memory alone
    memory: str = ""  # memory of each device of the count
    memory_mib: Fraction = Fraction(1)  # MiB in one unit of `memory`
    percent: str = ""  # memory of each device, in percent of the card
    cores: str = ""  # compute of each device
    cores_whole: int = 100  # units of `cores` that make one whole device
    # The names whose device plugin sets NVIDIA_VISIBLE_DEVICES in the container (NVIDIA GPUs
    # handed out through the NVIDIA container runtime).
    nvidia_env: tuple[str, ...] = ()
    # Device plugins that can advertise N shares of a device under the device's own name (Intel's
    # -shared-dev-num, AMD's partitions, Ascend's vNPUs): a unit is a whole device unless the quota's
    # sharedReplicas says how many units make one. docs/vendors.md tells users which (a test holds it).
    maybe_shared: bool = False
    weight: Fraction = Fraction(1)  # GPU-equivalents of one device (0: access for monitoring only)

    def parts(self) -> tuple[tuple[str, Part], ...]:
        named: tuple[tuple[str, Part], ...] = (
            (self.count, "count"),
            (self.memory, "memory"),
            (self.percent, "percent"),
            (self.cores, "cores"),
        )
        return tuple((name, part) for name, part in named if name)

    def names(self) -> tuple[str, ...]:
        return tuple(name for name, _ in self.parts())


_NVIDIA_PLUGIN = "NVIDIA/k8s-device-plugin api/config/v1/resources.go, internal/rm/rm.go"
_HAMI = "Project-HAMi/HAMi charts/hami/values.yaml, charts/hami/templates/scheduler/device-configmap.yaml"
_INTEL = "intel/intel-device-plugins-for-kubernetes cmd/gpu_plugin/gpu_plugin.go"
_AMD = "ROCm/k8s-device-plugin internal/pkg/plugin/plugin.go, cmd/k8s-device-plugin/main.go"
_ASCEND = "Ascend/ascend-device-plugin pkg/common/constants.go"
_GCUSHARE = "EnflameTechnology/gcushare gcushare-device-plugin/pkg/consts/const.go"
_CAMBRICON = "Cambricon/cambricon-k8s-device-plugin device-plugin/pkg/mlu/server.go"

NVIDIA = Family(
    "nvidia",
    "nvidia-device-plugin, HAMi",
    f"{_NVIDIA_PLUGIN}; {_HAMI} (nvidia: resourceMem, resourceMemPercentage, resourceCores)",
    count="nvidia.com/gpu",
    memory="nvidia.com/gpumem",
    percent="nvidia.com/gpumem-percentage",
    cores="nvidia.com/gpucores",
    # HAMi's webhook adds nvidia.com/gpu to a container that asks only memory or cores
    # (pkg/device/nvidia/device.go MutateAdmission), so each of them ends with the plugin's variable.
    nvidia_env=("nvidia.com/gpu", "nvidia.com/gpumem", "nvidia.com/gpumem-percentage", "nvidia.com/gpucores"),
)


def _hami(
    vendor: str, count: str, memory: str = "", unit: int = 1, cores: str = "", whole: int = 100
) -> Family:
    return Family(
        vendor,
        "HAMi",
        _HAMI,
        count=count,
        memory=memory,
        memory_mib=Fraction(unit),
        cores=cores,
        cores_whole=whole,
    )


def _ascend(chip: str, source: str = _HAMI) -> Family:
    """HAMi's per-chip Ascend names, with `-memory` in MiB and `-core` (pkg/device/ascend/device.go)."""
    name = f"huawei.com/{chip}"
    return Family("huawei", "HAMi", source, count=name, memory=f"{name}-memory", cores=f"{name}-core")


def _whole(vendor: str, plugin: str, source: str, count: str, *, shared: bool = False) -> Family:
    return Family(vendor, plugin, source, count=count, maybe_shared=shared)


FAMILIES: tuple[Family, ...] = (
    NVIDIA,
    # NVIDIA GPUs under other plugins' names. The variable comes with the device count
    # (vgpu-number; pkg/plugin/server.go Allocate answers memory and cores with nothing), and a
    # container that asks memory or cores alone is given the default count (defaultGPUNum: 1,
    # values.yaml), as HAMi's webhook does for its own names: every name keeps the environment,
    # since `void` on a container that does get a vGPU would take the GPU away.
    Family(
        "nvidia",
        "volcano-vgpu-device-plugin",
        "Project-HAMi/volcano-vgpu-device-plugin deployments/helm/volcano-vgpu-device-plugin/values.yaml",
        count="volcano.sh/vgpu-number",
        memory="volcano.sh/vgpu-memory",
        percent="volcano.sh/vgpu-memory-percentage",
        cores="volcano.sh/vgpu-cores",
        nvidia_env=(
            "volcano.sh/vgpu-number",
            "volcano.sh/vgpu-memory",
            "volcano.sh/vgpu-memory-percentage",
            "volcano.sh/vgpu-cores",
        ),
    ),
    # gpu-mem is the plugin's resource, in GiB by default (--memory-unit, cmd/nvidia/main.go);
    # gpu-count is the node capacity the plugin patches, which the scheduler extender reads.
    Family(
        "nvidia",
        "gpushare-device-plugin",
        "AliyunContainerService/gpushare-device-plugin pkg/gpu/nvidia/const.go, pkg/gpu/nvidia/allocate.go",
        count="aliyun.com/gpu-count",
        memory="aliyun.com/gpu-mem",
        memory_mib=Fraction(1024),
        nvidia_env=("aliyun.com/gpu-mem",),
    ),
    Family(
        "amd",
        "amd-device-plugin, HAMi",
        f"{_AMD}; {_HAMI} (amd: resourceMemoryName, resourceCoreName)",
        count="amd.com/gpu",
        memory="amd.com/gpumem",
        cores="amd.com/gpucores",
        maybe_shared=True,  # the single naming strategy counts every partition as amd.com/gpu
    ),
    _whole("intel", "intel-gpu-plugin", _INTEL, "gpu.intel.com/i915", shared=True),
    _whole("intel", "intel-gpu-plugin", _INTEL, "gpu.intel.com/xe", shared=True),
    _whole("intel", "intel-gpu-plugin", _INTEL, "gpu.intel.com/dxg", shared=True),
    # -enable-monitoring: every GPU of the node for telemetry, allocated to no workload.
    *(
        Family("intel", "intel-gpu-plugin", _INTEL, count=name, weight=Fraction(0))
        for name in (
            "gpu.intel.com/monitoring",
            "gpu.intel.com/i915_monitoring",
            "gpu.intel.com/xe_monitoring",
        )
    ),
    _hami(
        "cambricon",
        "cambricon.com/vmlu",
        "cambricon.com/mlu.smlu.vmemory",
        256,
        "cambricon.com/mlu.smlu.vcore",
    ),
    _whole(
        "cambricon", "HAMi", _HAMI + " (pkg/device/cambricon/device.go flag default)", "cambricon.com/mlu"
    ),
    _hami("hygon", "hygon.com/dcunum", "hygon.com/dcumem", 1, "hygon.com/dcucores"),
    _whole(
        "hygon",
        "hcu-device-plugin",
        "HYGON-AI/hcu-container-toolkit docs/user-guide/k8s-device-plugin.md",
        "hygon.com/hcu",
    ),
    _whole(
        "iluvatar",
        "ix-device-plugin",
        "Deep-Spark/ix-device-plugin pkg/dpm/plugin.go",
        "iluvatar.com/gpu",
        shared=True,
    ),
    _whole("metax", "HAMi", _HAMI, "metax-tech.com/gpu"),
    _hami("metax", "metax-tech.com/sgpu", "metax-tech.com/vmemory", 1024, "metax-tech.com/vcore"),
    _whole("enflame", "HAMi", _HAMI, "enflame.com/gcu"),
    _hami("enflame", "enflame.com/drs-gcu", "enflame.com/gcu-memory", 1024, "enflame.com/gcu-core"),
    Family("enflame", "HAMi", _HAMI, count="enflame.com/vgcu", percent="enflame.com/vgcu-percentage"),
    _whole("enflame", "gcushare", _GCUSHARE, "enflame.com/shared-gcu", shared=True),
    _hami("mthreads", "mthreads.com/vgpu", "mthreads.com/sgpu-memory", 512, "mthreads.com/sgpu-core", 16),
    *(
        _hami(
            "iluvatar",
            f"iluvatar.ai/{chip}-vgpu",
            f"iluvatar.ai/{chip}.vMem",
            256,
            f"iluvatar.ai/{chip}.vCore",
        )
        for chip in ("MR-V100", "MR-V50", "BI-V150", "BI-V100")
    ),
    _whole("kunlunxin", "HAMi", _HAMI, "kunlunxin.com/xpu"),
    _hami("kunlunxin", "kunlunxin.com/vxpu", "kunlunxin.com/vxpu-memory", 1),
    _whole("aws", "HAMi", _HAMI, "aws.amazon.com/neuron"),
    _whole("aws", "HAMi", _HAMI, "aws.amazon.com/neuroncore", shared=True),
    _whole("vastai", "HAMi", _HAMI, "vastaitech.com/va"),
    _whole("biren", "HAMi", _HAMI, "birentech.com/gpu"),
    *(_ascend(chip) for chip in ("Ascend910A", "Ascend910B2", "Ascend910B3", "Ascend910B4", "Ascend910B4-1")),
    *(_ascend(chip) for chip in ("Ascend910C", "Ascend310P")),
    *(
        _whole("huawei", "ascend-device-plugin", _ASCEND, f"huawei.com/{chip}")
        for chip in ("Ascend910", "Ascend310", "Ascend310P-V", "Ascend310P-VPro", "Ascend310P-IPro")
    ),
    _whole(
        "huawei",
        "ascend-device-plugin",
        _ASCEND + " (AiCoreResourceName)",
        "huawei.com/npu-core",
        shared=True,
    ),
)


@dataclass(frozen=True)
class Pattern:
    """A family whose count is any name matching `regex` (one family per matched name)."""

    regex: re.Pattern[str]
    vendor: str
    plugin: str
    source: str


PATTERNS: tuple[Pattern, ...] = (
    # The mixed naming strategy: <compute partition>_<memory partition>, lowercased from sysfs
    # (cmd/k8s-device-plugin/main.go, internal/pkg/amdgpu/amdgpu.go). The plugin keeps no list;
    # these are the amdgpu driver's modes.
    Pattern(re.compile(r"^amd\.com/(spx|dpx|tpx|qpx|cpx)_nps[1-8]$"), "amd", "amd-device-plugin", _AMD),
    # Per model (EnableDeviceType: cambricon.com/mlu370), env-share (.share) and MIM (.mim-<profile>).
    Pattern(
        re.compile(r"^cambricon\.com/mlu[0-9a-z-]*(\.share|\.mim-[0-9a-z.]+)?$"),
        "cambricon",
        "mlu",
        _CAMBRICON,
    ),
    # Virtual NPUs, named by AI cores and the rest of their template (pkg/common/constants.go).
    Pattern(
        re.compile(r"^huawei\.com/Ascend(910|310P)-[0-9]+c(\.[0-9a-z]+)*$"),
        "huawei",
        "ascend-device-plugin",
        _ASCEND,
    ),
)


_INDEX: dict[str, tuple[Family, Part]] = {
    name: (family, part) for family in FAMILIES for name, part in family.parts()
}


@functools.lru_cache(maxsize=1024)
def family_of(name: str) -> tuple[Family, Part] | None:
    """The family a resource name belongs to and its part in it; None for names of no accelerator."""
    found = _INDEX.get(name)
    if found is not None:
        return found
    for pattern in PATTERNS:
        if pattern.regex.fullmatch(name):
            return Family(
                pattern.vendor, pattern.plugin, pattern.source, count=name, maybe_shared=True
            ), "count"
    return None


def vendor_of(name: str) -> str | None:
    found = family_of(name)
    return found[0].vendor if found is not None else None


@dataclass(frozen=True)
class DeviceVariable:
    """An environment variable a container runtime reads to choose which devices to add."""

    name: str
    vendor: str
    source: str
    prefix: bool = False  # every variable whose name starts with `name`


# Each runtime adds the devices these name, whatever the kubelet allocated: on a node whose
# default runtime is that vendor's, a container that sets one reaches devices it was never given.
DEVICE_VARIABLES: tuple[DeviceVariable, ...] = (
    *(
        DeviceVariable(name, "nvidia", "NVIDIA/nvidia-container-toolkit internal/config/image/envvars.go")
        for name in ("NVIDIA_VISIBLE_DEVICES", "NVIDIA_MIG_CONFIG_DEVICES", "NVIDIA_MIG_MONITOR_DEVICES")
    ),
    *(
        DeviceVariable(name, "nvidia", "NVIDIA/nvidia-container-toolkit internal/modifier/gated.go")
        for name in (
            "NVIDIA_IMEX_CHANNELS",
            "NVIDIA_GDS",
            "NVIDIA_MOFED",
            "NVIDIA_NVSWITCH",
            "NVIDIA_GDRCOPY",
        )
    ),
    DeviceVariable("AMD_VISIBLE_DEVICES", "amd", "ROCm/container-toolkit internal/oci/oci.go"),
    DeviceVariable("DOCKER_RESOURCE_", "amd", "ROCm/container-toolkit internal/oci/oci.go", prefix=True),
    DeviceVariable("ASCEND_VISIBLE_DEVICES", "huawei", "Ascend/ascend-docker-runtime runtime/main.go"),
    DeviceVariable(
        "CAMBRICON_VISIBLE_DEVICES",
        "cambricon",
        "Cambricon/cambricon-k8s-device-plugin device-plugin/pkg/mlu/const.go",
    ),
    *(
        DeviceVariable(name, "hygon", "HYGON-AI/hcu-container-toolkit internal/config/image/envvars.go")
        for name in ("HCU_VISIBLE_DEVICES", "VHCU_VISIBLE_DEVICES")
    ),
    *(
        DeviceVariable(name, "iluvatar", "Deep-Spark/ix-device-plugin pkg/dpm/plugin.go")
        for name in ("IX_VISIBLE_DEVICES", "ILUVATAR_COREX_VISIBLE_DEVICES")
    ),
    *(
        DeviceVariable(
            name, "enflame", "EnflameTechnology/gcushare gcushare-device-plugin/pkg/consts/const.go"
        )
        for name in ("ENFLAME_VISIBLE_DEVICES", "TOPS_VISIBLE_DEVICES")
    ),
)
