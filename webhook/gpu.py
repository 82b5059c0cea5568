"""GPU facts: resource names, scheduler names, MIG profile tables. Data and lookups, no I/O.

Sources: NVIDIA device plugin and GPU Feature Discovery, the MIG user guide's
profile tables, HAMi and KAI scheduler documentation (see DESIGN.md section 5).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

GPU = "nvidia.com/gpu"
SHARED_GPU = "nvidia.com/gpu.shared"
HAMI_MEMORY = "nvidia.com/gpumem"
HAMI_MEMORY_PERCENT = "nvidia.com/gpumem-percentage"
HAMI_CORES = "nvidia.com/gpucores"
MIG_PREFIX = "nvidia.com/mig-"
HAMI_SCHEDULER = "hami-scheduler"
KAI_SCHEDULER = "kai-scheduler"
DEFAULT_SCHEDULER = "default-scheduler"
KAI_FRACTION = "gpu-fraction"
KAI_MEMORY = "gpu-memory"
KAI_NUM_DEVICES = "gpu-fraction-num-devices"
# What asks KAI for a share of a GPU (KAI-Scheduler pkg/common/constants/constants.go).
KAI_ANNOTATIONS = frozenset({KAI_FRACTION, KAI_MEMORY, KAI_NUM_DEVICES})
MIG_SLICES = 7
_MIG_RESOURCE = re.compile(r"^nvidia\.com/mig-([1-7])g\.([0-9]{1,4})gb$")


@dataclass(frozen=True)
class MigProfile:
    slices: int
    memory_gib: int
    max_instances: int

    @property
    def name(self) -> str:
        return f"{self.slices}g.{self.memory_gib}gb"

    @property
    def resource(self) -> str:
        return MIG_PREFIX + self.name

    @property
    def memory_mib(self) -> int:
        return self.memory_gib * 1024


def _table(*rows: tuple[int, int, int]) -> tuple[MigProfile, ...]:
    return tuple(MigProfile(slices, memory, count) for slices, memory, count in rows)


MIG_PROFILES: dict[str, tuple[MigProfile, ...]] = {
    "A100-40GB": _table((1, 5, 7), (1, 10, 4), (2, 10, 3), (3, 20, 2), (4, 20, 1), (7, 40, 1)),
    "A100-80GB": _table((1, 10, 7), (1, 20, 4), (2, 20, 3), (3, 40, 2), (4, 40, 1), (7, 80, 1)),
    "H100-80GB": _table((1, 10, 7), (1, 20, 4), (2, 20, 3), (3, 40, 2), (4, 40, 1), (7, 80, 1)),
    "H100-94GB": _table((1, 12, 7), (1, 24, 4), (2, 24, 3), (3, 47, 2), (4, 47, 1), (7, 94, 1)),
    "H200-141GB": _table((1, 18, 7), (1, 35, 4), (2, 35, 3), (3, 71, 2), (4, 71, 1), (7, 141, 1)),
}
GPU_MODELS = tuple(MIG_PROFILES)


def model_memory_mib(model: str) -> int:
    """A whole card's memory, taken as its largest MIG profile's nominal size."""
    return MIG_PROFILES[model][-1].memory_mib


def fitting_profile(model: str, memory_mib: int, cores_percent: int | None = None) -> MigProfile | None:
    """The smallest profile with enough memory (and compute, if asked); ties go to fewer slices.

    Profile memory is the nominal size in its name, read as GiB: "1g.10gb" holds a 10Gi request.
    """
    candidates = [
        p
        for p in MIG_PROFILES[model]
        if p.memory_mib >= memory_mib
        and (cores_percent is None or p.slices * 100 >= cores_percent * MIG_SLICES)
    ]
    return min(candidates, key=lambda p: (p.memory_gib, p.slices), default=None)


_GPU_RESOURCES = frozenset({GPU, SHARED_GPU, HAMI_MEMORY, HAMI_MEMORY_PERCENT, HAMI_CORES})


def largest_profile(model: str) -> MigProfile:
    return max(MIG_PROFILES[model], key=lambda p: (p.memory_gib, p.slices))


def parse_mig_resource(name: str) -> MigProfile | None:
    """The profile a resource name like nvidia.com/mig-3g.40gb stands for (max_instances unknown: 0)."""
    match = _MIG_RESOURCE.fullmatch(name)
    return MigProfile(int(match[1]), int(match[2]), 0) if match else None


def is_gpu_resource(name: str, shared_names: Iterable[str] = ()) -> bool:
    return name in _GPU_RESOURCES or name.startswith(MIG_PREFIX) or name in shared_names
