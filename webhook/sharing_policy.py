"""GPUSharingPolicy as compiled: the sharing modes, what a policy rewrites and injects, and the policy
itself. Plain frozen dataclasses; webhook.policy.sharing_kind builds them from the files."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, TypeAlias

from webhook.match import Match

SharingMode: TypeAlias = Literal["exclusive", "timeslice", "mps", "mig", "hami", "kai", "dra"]
SHARING_MODES: tuple[SharingMode, ...] = ("exclusive", "timeslice", "mps", "mig", "hami", "kai", "dra")
# mode dra: how the NVIDIA DRA driver shares the claimed device (its GpuConfig sharing strategies,
# k8s-dra-driver-gpu api/nvidia.com/resource/v1beta1/sharing.go), or a MIG slice.
DraStrategy: TypeAlias = Literal["Exclusive", "TimeSlicing", "MPS", "MIG"]
DRA_STRATEGIES: tuple[DraStrategy, ...] = ("Exclusive", "TimeSlicing", "MPS", "MIG")
# k8s-dra-driver-gpu api/nvidia.com/resource/v1beta1/sharing.go TimeSliceInterval values.
TIME_SLICE_INTERVALS = ("Default", "Short", "Medium", "Long")
MigStrategy: TypeAlias = Literal["mixed", "single"]
MIG_STRATEGIES: tuple[MigStrategy, ...] = ("mixed", "single")
# What MIG does with a container that asks for more than one GPU (a CUDA process sees one
# MIG device): keep its whole GPUs (the default), deny it, or give it that many slices.
MultiGpu: TypeAlias = Literal["wholeGpus", "deny", "slices"]
MULTI_GPU_RULES: tuple[MultiGpu, ...] = ("wholeGpus", "deny", "slices")
# The device plugin's sharedDevicesAllocationPolicy (k8s-device-plugin api/config/v1/consts.go,
# from v0.20.0): `distributed`, its default, spreads one container's replicas over distinct GPUs
# (internal/rm/allocate.go); `packed` fills one GPU first.
AllocationPolicy: TypeAlias = Literal["distributed", "packed"]
ALLOCATION_POLICIES: tuple[AllocationPolicy, ...] = ("distributed", "packed")


@dataclass(frozen=True)
class Dra:
    """mode dra: what the ResourceClaimTemplates that pods are pointed at ask the driver for."""

    strategy: DraStrategy = "Exclusive"
    device_class: str = "gpu.nvidia.com"
    time_slice_interval: str | None = None
    mps_thread_percentage: int | None = None
    mps_pinned_memory: str | None = None  # a quantity, passed to the driver as written


@dataclass(frozen=True)
class Sharing:
    mode: SharingMode
    resource_name: str | None = None
    gpu_model: str | None = None
    default_memory_mib: int | None = None
    cores: int | None = None
    allow_opt_out: bool = False
    mig_strategy: MigStrategy = "mixed"
    # What a container asking for several GPUs gets: `mig` keeps them whole by default, while
    # `hami` and `kai` share each of them ("slices"), always with a warning; `deny` refuses it.
    multi_gpu: MultiGpu = "wholeGpus"
    allocation_policy: AllocationPolicy = "distributed"  # timeslice and mps only
    # The device plugin's failRequestsGreaterThanOne: true by default for MPS, false for time-slicing.
    fail_requests_greater_than_one: bool = False
    set_gpu_type: bool = False  # HAMi: nvidia.com/use-gputype from gpuModel
    # Caps on what one pod may take where GPUs are shared, so that nobody gets a whole card by
    # asking for its memory: GPUs per pod, and memory per GPU (MiB).
    max_gpus_per_pod: int | None = None
    max_memory_mib: int | None = None
    dra: Dra | None = None


@dataclass(frozen=True)
class Preference:
    weight: int
    requirement: Mapping[str, Any]


@dataclass(frozen=True)
class PreferUnderutilized:
    """Placement hints toward the nodes with the most spare GPU capacity (opt-in)."""

    weight: int
    max_nodes: int = 3


@dataclass(frozen=True)
class Inject:
    tolerations: tuple[Mapping[str, Any], ...] = ()
    required: tuple[Mapping[str, Any], ...] = ()
    preferred: tuple[Preference, ...] = ()
    priority_class_name: str | None = None
    scheduler_name: str | None = None
    runtime_class_name: str | None = None
    labels: Mapping[str, str] = field(default_factory=dict)
    annotations: Mapping[str, str] = field(default_factory=dict)
    force: bool = False
    prefer_underutilized: PreferUnderutilized | None = None


@dataclass(frozen=True)
class Checkpoint:
    image: str
    interval_seconds: int = 600
    mount_path: str = "/checkpoints"
    volume: Mapping[str, Any] = field(default_factory=lambda: {"emptyDir": {}})
    native_sidecar: bool = True
    termination_grace_period_seconds: int = 120
    resources: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class SharingPolicy:
    name: str
    digest: str
    priority: int
    match: Match
    sharing: Sharing
    inject: Inject = Inject()
    checkpoint: Checkpoint | None = None
    file: str = ""

    @property
    def stamp(self) -> str:
        """What `gpuwebhook.io/applied` records: the policy and the exact version applied."""
        return f"{self.name}@{self.digest[:12]}"
