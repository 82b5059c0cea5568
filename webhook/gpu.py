"""GPU facts: resource names, scheduler names, MIG profile tables. Data and lookups, no I/O.

Sources: NVIDIA device plugin and GPU Feature Discovery, mig-parted and go-nvml for the MIG
tables (webhook/migtable.py names the files), HAMi and KAI-Scheduler sources.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from webhook import migtable

GPU = "nvidia.com/gpu"
SHARED_GPU = "nvidia.com/gpu.shared"
HAMI_MEMORY = "nvidia.com/gpumem"
HAMI_MEMORY_PERCENT = "nvidia.com/gpumem-percentage"
HAMI_CORES = "nvidia.com/gpucores"
MIG_PREFIX = "nvidia.com/mig-"
HAMI_USE_GPU_TYPE = "nvidia.com/use-gputype"
HAMI_SCHEDULER = "hami-scheduler"
KAI_SCHEDULER = "kai-scheduler"
DEFAULT_SCHEDULER = "default-scheduler"
KAI_FRACTION = "gpu-fraction"
KAI_MEMORY = "gpu-memory"
KAI_NUM_DEVICES = "gpu-fraction-num-devices"
# What asks KAI for a share of a GPU (KAI-Scheduler pkg/common/constants/constants.go).
KAI_ANNOTATIONS = frozenset({KAI_FRACTION, KAI_MEMORY, KAI_NUM_DEVICES})
MIG_SLICES = 7  # compute slices of most cards; see model_slices()
SHARED_SUFFIX = ".shared"  # k8s-device-plugin api/config/v1/consts.go DefaultSharedResourceNameSuffix
# nvidia.com/mig-[<c>c.]<g>g.<n>gb[.me|.me.all|.gfx|-me][.shared]: go-nvlib's profile string, with
# the device plugin's '+' -> '.' (k8s-device-plugin internal/rm/rm.go), and the suffix that
# renameByDefault appends to every replicated resource, MIG slices included
# (api/config/v1/resources.go DefaultSharedRename, api/config/v1/replicas.go).
_MIG_RESOURCE = re.compile(
    r"^nvidia\.com/mig-(?:[1-7]c\.)?([1-7])g\.([0-9]{1,4})gb(\.me\.all|\.me|\.gfx|-me)?(\.shared)?$"
)


@dataclass(frozen=True)
class MigProfile:
    slices: int
    memory_gib: int  # the nominal size in the name
    max_instances: int
    memory_mib: int  # the real size (see webhook/migtable.py for where it comes from)
    attributes: str = ""  # "", "+me", "+me.all", "+gfx" or "-me"
    shared: bool = False  # a time-sliced replica of the slice (nvidia.com/mig-<profile>.shared)

    @property
    def name(self) -> str:
        return f"{self.slices}g.{self.memory_gib}gb{self.attributes}"

    @property
    def resource(self) -> str:
        return MIG_PREFIX + self.name.replace("+", ".") + (SHARED_SUFFIX if self.shared else "")

    @property
    def plain(self) -> bool:
        """A compute profile without media or graphics attributes: the ones a rewrite chooses."""
        return not self.attributes


def _profile(row: migtable.Row) -> MigProfile:
    name, instances, mib = row
    match = re.fullmatch(r"([1-8])g\.([0-9]+)gb([-+].*)?", name)
    assert match is not None, name
    gib = int(match[2])
    return MigProfile(int(match[1]), gib, instances, mib if mib is not None else gib * 1024, match[3] or "")


MIG_PROFILES: dict[str, tuple[MigProfile, ...]] = {
    model: tuple(_profile(row) for row in rows) for model, rows in migtable.TABLES.items()
}
GPU_MODELS = tuple(MIG_PROFILES)


def model_slices(model: str) -> int:
    return migtable.SLICES.get(model, MIG_SLICES)


def memory_is_measured(model: str) -> bool:
    """Whether the model's slice sizes come from go-nvml's device tables (else: nominal)."""
    return migtable.MEASURED[model]


def model_memory_mib(model: str) -> int:
    """A whole card's memory in MiB: go-nvml's MemoryMB, else what its largest profile holds
    (B300's 288 GB are decimal; its 7g.269gb is what a process can use)."""
    return migtable.CARD_MIB.get(model) or max(p.memory_mib for p in MIG_PROFILES[model])


def fitting_profile(model: str, memory_mib: int, cores_percent: int | None = None) -> MigProfile | None:
    """The smallest plain profile whose real memory holds the request (and enough compute slices,
    if asked); ties go to fewer slices. A100-80GB's 1g.10gb is 9,856 MiB: it does not hold 10Gi."""
    total = model_slices(model)
    candidates = [
        p
        for p in MIG_PROFILES[model]
        if p.plain
        and p.memory_mib >= memory_mib
        and (cores_percent is None or p.slices * 100 >= cores_percent * total)
    ]
    return min(candidates, key=lambda p: (p.memory_mib, p.slices), default=None)


def real_memory_mib(model: str, profile: MigProfile) -> int:
    """The slice's real MiB on `model` (go-nvml's tables, webhook/migtable.py); the name's nominal
    size where the model has no such profile."""
    found = next((p for p in MIG_PROFILES.get(model, ()) if p.name == profile.name), None)
    return found.memory_mib if found is not None else profile.memory_mib


def largest_profile(model: str) -> MigProfile:
    return max((p for p in MIG_PROFILES[model] if p.plain), key=lambda p: (p.memory_mib, p.slices))


def parse_mig_resource(name: str) -> MigProfile | None:
    """The profile a resource name like nvidia.com/mig-3g.40gb.me stands for. The name does not say
    the model, so max_instances is unknown (0) and memory is the nominal size in the name."""
    match = _MIG_RESOURCE.fullmatch(name)
    if match is None:
        return None
    suffix = match[3] or ""
    attributes = "+" + suffix[1:] if suffix.startswith(".") else suffix
    gib = int(match[2])
    return MigProfile(int(match[1]), gib, 0, gib * 1024, attributes, shared=match[4] is not None)


def is_mig_resource(name: str) -> bool:
    return name.startswith(MIG_PREFIX)


# HAMi's nvidia.com/use-gputype: comma-separated fragments, one of which the card's type must
# contain, case-insensitively (HAMi pkg/device/devices.go CheckType). Fragments are the card
# names of HAMi's charts/hami/templates/scheduler/device-configmap.yaml (migProfileAllowlist)
# and go-nvml's pkg/nvml/mock/gpus/*.go. Models left out have no fragment that matches only
# them (H20 is inside H200, B200 inside GB200), so a policy cannot ask for them by gpuModel.
HAMI_CARD_TYPES: dict[str, str] = {
    "A100-40GB": "A100-SXM4-40GB,A100-40GB-PCIe,A100-PCIE-40GB",
    "A100-80GB": "A100-SXM4-80GB,A100-80GB-PCIe,A100-PCIE-80GB",
    "A30-24GB": "A30",
    "H100-80GB": "H100-PCIE-80GB,H100-SXM5-80GB,H100 80GB HBM3",
    "H100-94GB": "H100-PCIE-94GB,H100-SXM5-94GB",
    "H200-141GB": "H200 NVL,H200-SXM5,H200 141GB HBM3e",
    "RTX-PRO-6000-96GB": "RTX PRO 6000 Blackwell Server Edition",
}


def hami_card_types(model: str) -> str:
    return HAMI_CARD_TYPES[model]
