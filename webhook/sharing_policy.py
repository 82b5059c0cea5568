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
# How the driver shares a claimed device (sharing.go TimeSlicingStrategy, MpsStrategy). On a MIG
# device (MigDeviceSharing) MPS keeps its mpsConfig, and TimeSlicing takes no timeSlicingConfig.
DeviceSharing: TypeAlias = Literal["TimeSlicing", "MPS"]
DEVICE_SHARING: tuple[DeviceSharing, ...] = ("TimeSlicing", "MPS")
# Strategy MIG: what a template may fall back to, in the order given, when no slice of the chosen
# profile is free (the request becomes resource.k8s.io/v1 firstAvailable).
MigFallback: TypeAlias = Literal["largerProfile", "wholeGpu"]
MIG_FALLBACKS: tuple[MigFallback, ...] = ("largerProfile", "wholeGpu")
# The driver's own feature gates and their defaults (k8s-dra-driver-gpu pkg/featuregates/
# featuregates.go defaultFeatureGates): the alpha ones are off, the beta ones on.
DRIVER_FEATURE_GATES: Mapping[str, bool] = {
    "TimeSlicingSettings": False,
    "MPSSupport": False,
    "IMEXDaemonsWithDNSNames": True,
    "PassthroughSupport": False,
    "DynamicMIG": False,
    "NVMLDeviceHealthCheck": False,
    "ComputeDomainCliques": True,
    "CrashOnNVLinkFabricErrors": True,
    "DeviceMetadata": False,
}
DEFAULT_DRIVER_GATES = frozenset(gate for gate, on in DRIVER_FEATURE_GATES.items() if on)
# featuregates.go ValidateFeatureGates: the driver does not start when a gate lacks the one it
# requires, or when two gates it holds mutually exclusive are both on.
GATE_REQUIRES: tuple[tuple[str, str], ...] = (
    ("ComputeDomainCliques", "IMEXDaemonsWithDNSNames"),
    ("DeviceMetadata", "PassthroughSupport"),
)
GATES_EXCLUSIVE: tuple[tuple[str, str], ...] = (
    ("DynamicMIG", "PassthroughSupport"),
    ("DynamicMIG", "NVMLDeviceHealthCheck"),
    ("DynamicMIG", "MPSSupport"),
    ("PassthroughSupport", "NVMLDeviceHealthCheck"),
)
# The gate each sharing strategy needs (api/nvidia.com/resource/v1beta1/validate.go
# validateSharingStrategy, for GpuConfig and MigDeviceConfig alike).
SHARING_GATES: Mapping[str, str] = {"TimeSlicing": "TimeSlicingSettings", "MPS": "MPSSupport"}
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
    # MPS pinned memory per device of a claim: (index among the claim's devices, quantity).
    mps_per_device_pinned_memory: tuple[tuple[int, str], ...] = ()
    mig_sharing: DeviceSharing | None = None  # strategy MIG only
    fallback: tuple[MigFallback, ...] = ()  # strategy MIG only
    driver_gates: frozenset[str] = DEFAULT_DRIVER_GATES  # the gates the cluster's driver runs with

    @property
    def sharing(self) -> DeviceSharing | None:
        """The driver's sharing strategy for the claimed devices; None: unshared."""
        if self.strategy == "MIG":
            return self.mig_sharing
        return next((s for s in DEVICE_SHARING if s == self.strategy), None)

    @property
    def shares_claim(self) -> bool:
        """The driver shares a device only among the containers of one claim, so a pod whose GPUs
        are shared has one claim that all its GPU containers reference."""
        return self.sharing is not None


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
