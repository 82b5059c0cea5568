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
    count: str  # devices; "" when the family asks memory alone (gpushare)
    memory: str = ""  # memory of each device of the count
    memory_mib: Fraction = Fraction(1)  # MiB in one unit of `memory`
    percent: str = ""  # memory of each device, in percent of the card
    cores: str = ""  # compute of each device, in percent
    nvidia_runtime: bool = False
    # Device plugins that advertise an unknown number of shares of one device under the device's
    # own name (Intel's -shared-dev-num): each unit is then a share, not known here.
    maybe_shared: bool = False

    def names(self) -> tuple[str, ...]:
        return tuple(n for n in (self.count, self.memory, self.percent, self.cores) if n)

    def part(self, name: str) -> Part | None:
        parts: dict[str, Part] = {self.count: "count", self.memory: "memory", self.percent: "percent"}
        parts[self.cores] = "cores"
        return parts.get(name) if name else None


_K8S_DEVICE_PLUGIN = "NVIDIA/k8s-device-plugin api/config/v1/resources.go, internal/rm/rm.go"
_HAMI_VALUES = "Project-HAMi/HAMi charts/hami/values.yaml"

NVIDIA = Family(
    "nvidia",
    "nvidia-device-plugin, HAMi",
    f"{_K8S_DEVICE_PLUGIN}; {_HAMI_VALUES} (resourceMem, resourceMemPercentage, resourceCores)",
    count="nvidia.com/gpu",
    memory="nvidia.com/gpumem",
    percent="nvidia.com/gpumem-percentage",
    cores="nvidia.com/gpucores",
    nvidia_runtime=True,
)

FAMILIES: tuple[Family, ...] = (
    NVIDIA,
    Family(
        "nvidia",
        "volcano-vgpu-device-plugin",
        "Project-HAMi/volcano-vgpu-device-plugin pkg/plugin/vgpu/config/config.go",
        count="volcano.sh/vgpu-number",
        memory="volcano.sh/vgpu-memory",
        cores="volcano.sh/vgpu-cores",
        nvidia_runtime=True,
    ),
    Family(
        "nvidia",
        "gpushare-device-plugin",
        "AliyunContainerService/gpushare-device-plugin pkg/gpu/nvidia/const.go",
        count="aliyun.com/gpu-count",
        memory="aliyun.com/gpu-mem",
        memory_mib=Fraction(1024),
        nvidia_runtime=True,
    ),
    Family(
        "amd",
        "amd-device-plugin",
        "ROCm/k8s-device-plugin internal/pkg/plugin/plugin.go, cmd/k8s-device-plugin/main.go",
        count="amd.com/gpu",
    ),
    Family(
        "intel",
        "intel-gpu-plugin",
        "intel/intel-device-plugins-for-kubernetes cmd/gpu_plugin/gpu_plugin.go",
        count="gpu.intel.com/i915",
        maybe_shared=True,
    ),
    Family(
        "intel",
        "intel-gpu-plugin",
        "intel/intel-device-plugins-for-kubernetes cmd/gpu_plugin/gpu_plugin.go",
        count="gpu.intel.com/xe",
        maybe_shared=True,
    ),
)


@dataclass(frozen=True)
class Pattern:
    """A family whose count is any name matching `regex` (one family per matched name)."""

    regex: re.Pattern[str]
    vendor: str
    plugin: str
    source: str
    memory_suffix: str = ""  # the memory resource is the count's name plus this


PATTERNS: tuple[Pattern, ...] = (
    # mixed resource naming: <compute partition>_<memory partition>, lowercased from sysfs
    # (cmd/k8s-device-plugin/main.go, internal/pkg/amdgpu/amdgpu.go). The modes are the
    # amdgpu driver's: SPX, DPX, TPX, QPX, CPX and NPS1 to NPS8.
    Pattern(
        re.compile(r"^amd\.com/(spx|dpx|tpx|qpx|cpx)_nps[1-8]$"),
        "amd",
        "amd-device-plugin",
        "ROCm/k8s-device-plugin cmd/k8s-device-plugin/main.go, internal/pkg/amdgpu/amdgpu.go",
    ),
)


@functools.lru_cache(maxsize=1024)
def family_of(name: str) -> tuple[Family, Part] | None:
    """The family a resource name belongs to and its part in it; None for names of no accelerator."""
    for family in FAMILIES:
        part = family.part(name)
        if part is not None:
            return family, part
    for pattern in PATTERNS:
        found = _pattern_family(pattern, name)
        if found is not None:
            return found
    return None


def _pattern_family(pattern: Pattern, name: str) -> tuple[Family, Part] | None:
    if pattern.regex.fullmatch(name):
        return _from_pattern(pattern, name), "count"
    suffix = pattern.memory_suffix
    if suffix and name.endswith(suffix) and pattern.regex.fullmatch(name.removesuffix(suffix)):
        return _from_pattern(pattern, name.removesuffix(suffix)), "memory"
    return None


def _from_pattern(pattern: Pattern, count: str) -> Family:
    memory = count + pattern.memory_suffix if pattern.memory_suffix else ""
    return Family(pattern.vendor, pattern.plugin, pattern.source, count=count, memory=memory)


def vendor_of(name: str) -> str | None:
    found = family_of(name)
    return found[0].vendor if found is not None else None
