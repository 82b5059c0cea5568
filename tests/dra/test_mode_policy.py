"""GPUSharingPolicy mode dra: its fields, defaults and the combinations the loader refuses.

Every refusal mirrors a rule of NVIDIA's k8s-dra-driver-gpu, named in the case's id: the driver's
feature gates (pkg/featuregates/featuregates.go), its config validation
(api/nvidia.com/resource/v1beta1/validate.go, sharing.go) and what its kubelet plugin applies to
which device (cmd/gpu-kubelet-plugin/device_state.go).
"""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from tests.support.policies import sharing_policy
from webhook.errors import PolicyError
from webhook.policy.loader import load_directory
from webhook.sharing_policy import DEFAULT_DRIVER_GATES, DRIVER_FEATURE_GATES, Dra

HEADER = "apiVersion: gpuwebhook.io/v1alpha1\nkind: GPUSharingPolicy\nmetadata:\n  name: p\nspec:\n"
TS_GATE = "driverFeatureGates: {TimeSlicingSettings: true}"
MPS_GATE = "driverFeatureGates: {MPSSupport: true}"
TS = frozenset({*DEFAULT_DRIVER_GATES, "TimeSlicingSettings"})
MPS = frozenset({*DEFAULT_DRIVER_GATES, "MPSSupport"})

# k8s-dra-driver-gpu pkg/featuregates/featuregates.go defaultFeatureGates, copied as data: the
# alpha gates default off, the beta ones on.
UPSTREAM_GATE_DEFAULTS = {
    "TimeSlicingSettings": False,  # Alpha, 0.2
    "MPSSupport": False,  # Alpha, 0.2
    "IMEXDaemonsWithDNSNames": True,  # Beta, 0.2
    "PassthroughSupport": False,  # Alpha, 0.3
    "DynamicMIG": False,  # Alpha, 0.3
    "NVMLDeviceHealthCheck": False,  # Alpha, 0.3
    "ComputeDomainCliques": True,  # Beta, 0.3
    "CrashOnNVLinkFabricErrors": True,  # Beta, 0.3
    "DeviceMetadata": False,  # Alpha, 0.4
}


def test_the_gates_and_defaults_are_the_drivers() -> None:
    """k8s-dra-driver-gpu pkg/featuregates/featuregates.go defaultFeatureGates."""
    assert dict(DRIVER_FEATURE_GATES) == UPSTREAM_GATE_DEFAULTS
    assert Dra().driver_gates == {gate for gate, on in UPSTREAM_GATE_DEFAULTS.items() if on}
    assert sharing_policy("sharing: {mode: dra}").sharing.dra == Dra()


@pytest.mark.parametrize(
    ("sharing", "expected"),
    [
        pytest.param("{mode: dra}", Dra(), id="exclusive-default"),
        pytest.param("{mode: dra, strategy: Exclusive}", Dra("Exclusive", "gpu.nvidia.com"), id="exclusive"),
        pytest.param(
            f"{{mode: dra, strategy: TimeSlicing, timeSlicing: {{interval: Long}}, {TS_GATE}}}",
            Dra("TimeSlicing", "gpu.nvidia.com", time_slice_interval="Long", driver_gates=TS),
            id="timeslicing",
        ),
        pytest.param(
            "{mode: dra, strategy: MPS, mps: "
            f"{{defaultActiveThreadPercentage: 50, defaultPinnedDeviceMemoryLimit: 10Gi}}, {MPS_GATE}}}",
            Dra("MPS", mps_thread_percentage=50, mps_pinned_memory="10Gi", driver_gates=MPS),
            id="mps",
        ),
        pytest.param(
            "{mode: dra, strategy: MPS, maxGpusPerPod: 2, mps: {defaultPerDevicePinnedMemoryLimit: "
            f"{{'1': 2Gi, '0': 1Mi}}}}, {MPS_GATE}}}",
            Dra("MPS", mps_per_device_pinned_memory=((0, "1Mi"), (1, "2Gi")), driver_gates=MPS),
            id="mps-per-device",
        ),
        pytest.param(
            "{mode: dra, strategy: MIG, gpuModel: A100-40GB}", Dra("MIG", "mig.nvidia.com"), id="mig"
        ),
        pytest.param(
            f"{{mode: dra, strategy: MIG, gpuModel: A100-40GB, migSharing: TimeSlicing, {TS_GATE}}}",
            Dra("MIG", "mig.nvidia.com", mig_sharing="TimeSlicing", driver_gates=TS),
            id="mig-timeslicing",
        ),
        pytest.param(
            "{mode: dra, strategy: MIG, gpuModel: A100-40GB, migSharing: MPS, "
            f"mps: {{defaultActiveThreadPercentage: 20}}, {MPS_GATE}}}",
            Dra("MIG", "mig.nvidia.com", mps_thread_percentage=20, mig_sharing="MPS", driver_gates=MPS),
            id="mig-mps",
        ),
        pytest.param(
            "{mode: dra, strategy: MIG, gpuModel: A100-40GB, fallback: [wholeGpu, largerProfile]}",
            Dra("MIG", "mig.nvidia.com", fallback=("wholeGpu", "largerProfile")),
            id="mig-fallback-in-order",
        ),
        pytest.param(
            "{mode: dra, deviceClassName: gpu.example.com}",
            Dra("Exclusive", "gpu.example.com"),
            id="own-class",
        ),
        pytest.param(
            "{mode: dra, driverFeatureGates: {DynamicMIG: true, IMEXDaemonsWithDNSNames: true}}",
            Dra(driver_gates=frozenset({*DEFAULT_DRIVER_GATES, "DynamicMIG"})),
            id="gates-override-defaults",
        ),
    ],
)
def test_dra_fields_compile(sharing: str, expected: Dra) -> None:
    policy = sharing_policy(f"sharing: {sharing}\n")
    assert policy.sharing.mode == "dra"
    assert policy.sharing.dra == expected


def test_mig_strategy_keeps_model_and_memory() -> None:
    policy = sharing_policy("sharing: {mode: dra, strategy: MIG, gpuModel: A100-40GB, defaultMemory: 8Gi}\n")
    assert (policy.sharing.gpu_model, policy.sharing.default_memory_mib) == ("A100-40GB", 8192)


FEATUREGATES = "featuregates.go"
VALIDATE = "api/nvidia.com/resource/v1beta1/validate.go"
SHARING = "api/nvidia.com/resource/v1beta1/sharing.go"
DEVICE_STATE = "cmd/gpu-kubelet-plugin/device_state.go"
MIG = "{mode: dra, strategy: MIG, gpuModel: A100-40GB"
BAD = [
    pytest.param(
        "{mode: dra, strategy: Shared}", "spec.sharing.strategy", "is not one of", id="strategy-enum"
    ),
    pytest.param(
        "{mode: dra, strategy: MIG}", "spec.sharing.gpuModel", "strategy MIG needs gpuModel", id="mig-model"
    ),
    pytest.param(
        "{mode: dra, gpuModel: A100-40GB}", "spec.sharing.gpuModel", "only to strategy MIG", id="model"
    ),
    pytest.param(
        "{mode: dra, strategy: MPS, defaultMemory: 4Gi}",
        "spec.sharing.defaultMemory",
        "only to strategy MIG",
        id="memory",
    ),
    pytest.param(
        f"{{mode: dra, strategy: MPS, timeSlicing: {{interval: Short}}, {MPS_GATE}}}",
        "spec.sharing.timeSlicing",
        "only to strategy TimeSlicing",
        id=f"{SHARING} GpuSharing.GetMpsConfig: no TimeSlicingConfig with MPS",
    ),
    pytest.param(
        f"{{mode: dra, strategy: TimeSlicing, mps: {{defaultActiveThreadPercentage: 5}}, {TS_GATE}}}",
        "spec.sharing.mps",
        "only to strategy MPS",
        id=f"{SHARING} GpuSharing.GetTimeSlicingConfig: no MpsConfig with TimeSlicing",
    ),
    pytest.param(
        f"{{mode: dra, strategy: TimeSlicing, timeSlicing: {{interval: Tiny}}, {TS_GATE}}}",
        "spec.sharing.timeSlicing.interval",
        "is not one of Default, Short, Medium, Long",
        id=f"{VALIDATE} TimeSliceInterval.Validate",
    ),
    pytest.param(
        f"{{mode: dra, strategy: MPS, mps: {{defaultActiveThreadPercentage: 101}}, {MPS_GATE}}}",
        "spec.sharing.mps.defaultActiveThreadPercentage",
        "maximum",
        id=f"{VALIDATE} MpsConfig.Validate: at most 100",
    ),
    pytest.param(
        f"{{mode: dra, strategy: MPS, mps: {{defaultActiveThreadPercentage: -1}}, {MPS_GATE}}}",
        "spec.sharing.mps.defaultActiveThreadPercentage",
        "minimum",
        id=f"{VALIDATE} MpsConfig.Validate: not negative",
    ),
    pytest.param(
        f"{{mode: dra, strategy: MPS, mps: {{defaultPinnedDeviceMemoryLimit: lots}}, {MPS_GATE}}}",
        "spec.sharing.mps.defaultPinnedDeviceMemoryLimit",
        "not a valid quantity",
        id="pinned-quantity",
    ),
    pytest.param(
        f"{{mode: dra, strategy: MPS, mps: {{defaultPinnedDeviceMemoryLimit: 1048575}}, {MPS_GATE}}}",
        "spec.sharing.mps.defaultPinnedDeviceMemoryLimit",
        "under 1Mi",
        id=f"{SHARING} limit.Megabyte: under 1 MiB is too low",
    ),
    pytest.param(
        f"{{mode: dra, strategy: MPS, mps: {{defaultPinnedDeviceMemoryLimit: 0.5Mi}}, {MPS_GATE}}}",
        "spec.sharing.mps.defaultPinnedDeviceMemoryLimit",
        "under 1Mi",
        id=f"{SHARING} limit.Megabyte: half a MiB is too low",
    ),
    pytest.param(
        "{mode: dra, strategy: MPS, mps: {defaultPerDevicePinnedMemoryLimit: {'0': 512Ki}}, "
        f"{MPS_GATE}}}",
        "spec.sharing.mps.defaultPerDevicePinnedMemoryLimit.0",
        "under 1Mi",
        id=f"{SHARING} MpsPerDevicePinnedMemoryLimit.Normalize: per-device under 1 MiB",
    ),
    pytest.param(
        "{mode: dra, strategy: MPS, mps: {defaultPerDevicePinnedMemoryLimit: "
        f"{{GPU-4a2e5f0c-0000-0000-0000-000000000000: 4Gi}}}}, {MPS_GATE}}}",
        "spec.sharing.mps.defaultPerDevicePinnedMemoryLimit.GPU-4a2e5f0c-0000-0000-0000-000000000000",
        "by its index",
        id=f"{SHARING} uuidSet.Normalize: a template can name devices by index only",
    ),
    pytest.param(
        "{mode: dra, strategy: MPS, mps: {defaultPerDevicePinnedMemoryLimit: {'+1': 4Gi}}, "
        f"{MPS_GATE}}}",
        "spec.sharing.mps.defaultPerDevicePinnedMemoryLimit.+1",
        "by its index",
        id="per-device-index-canonical",
    ),
    pytest.param(
        "{mode: dra, strategy: MPS, maxGpusPerPod: 2, mps: {defaultPerDevicePinnedMemoryLimit: "
        f"{{'2': 4Gi}}}}, {MPS_GATE}}}",
        "spec.sharing.mps.defaultPerDevicePinnedMemoryLimit.2",
        "no template has 3 devices",
        id=f"{SHARING} uuidSet.Normalize: index beyond the claim's devices",
    ),
    pytest.param(
        f"{{mode: dra, strategy: MPS, mps: {{defaultPerDevicePinnedMemoryLimit: {{0: 4Gi}}}}, {MPS_GATE}}}",
        "spec.sharing.mps.defaultPerDevicePinnedMemoryLimit",
        "must be of type string",
        id="per-device-key-quoted",
    ),
    pytest.param(
        "{mode: dra, strategy: TimeSlicing}",
        "spec.sharing.strategy",
        "needs the DRA driver's TimeSlicingSettings feature gate",
        id=f"{VALIDATE} validateSharingStrategy: TimeSlicing needs TimeSlicingSettings",
    ),
    pytest.param(
        "{mode: dra, strategy: TimeSlicing, driverFeatureGates: {TimeSlicingSettings: false}}",
        "spec.sharing.strategy",
        "TimeSlicingSettings",
        id=f"{VALIDATE} validateSharingStrategy: TimeSlicing with its gate off",
    ),
    pytest.param(
        "{mode: dra, strategy: MPS}",
        "spec.sharing.strategy",
        "needs the DRA driver's MPSSupport feature gate",
        id=f"{VALIDATE} validateSharingStrategy: MPS needs MPSSupport",
    ),
    pytest.param(
        "{mode: dra, strategy: MPS, driverFeatureGates: {MPSSupport: true, DynamicMIG: true}}",
        "spec.sharing.driverFeatureGates.DynamicMIG",
        "DynamicMIG and MPSSupport exclude each other",
        id=f"{FEATUREGATES} ValidateFeatureGates: DynamicMIG excludes MPSSupport",
    ),
    pytest.param(
        "{mode: dra, strategy: MPS, driverFeatureGates: {DynamicMIG: true}}",
        "spec.sharing.strategy",
        "refused by the DRA driver while its DynamicMIG feature gate is on",
        id=f"{DEVICE_STATE} applySharingConfig: no MPS under DynamicMIG",
    ),
    pytest.param(
        f"{MIG}, migSharing: TimeSlicing}}",
        "spec.sharing.migSharing",
        "TimeSlicingSettings",
        id=f"{VALIDATE} MigDeviceSharing.Validate: TimeSlicing needs TimeSlicingSettings",
    ),
    pytest.param(
        f"{MIG}, migSharing: MPS}}",
        "spec.sharing.migSharing",
        "MPSSupport",
        id=f"{VALIDATE} MigDeviceSharing.Validate: MPS needs MPSSupport",
    ),
    pytest.param(
        f"{MIG}, migSharing: TimeSlicing, timeSlicing: {{interval: Long}}, {TS_GATE}}}",
        "spec.sharing.timeSlicing",
        "MIG device takes no time-slice interval",
        id=f"{SHARING} MigDeviceSharing has no TimeSlicingConfig",
    ),
    pytest.param(
        f"{MIG}, mps: {{defaultActiveThreadPercentage: 20}}, {MPS_GATE}}}",
        "spec.sharing.mps",
        "without migSharing: MPS",
        id="mig-mps-settings-need-mig-sharing",
    ),
    pytest.param(
        f"{{mode: dra, strategy: TimeSlicing, deviceClassName: mig.nvidia.com, {TS_GATE}}}",
        "spec.sharing.deviceClassName",
        "GpuConfig, which it refuses on mig.nvidia.com's mig devices",
        id=f"{DEVICE_STATE} prepareDevices: no GpuConfig on a MIG device (TimeSlicing)",
    ),
    pytest.param(
        f"{{mode: dra, strategy: MPS, deviceClassName: mig.nvidia.com, {MPS_GATE}}}",
        "spec.sharing.deviceClassName",
        "migSharing",
        id=f"{DEVICE_STATE} prepareDevices: no GpuConfig on a MIG device (MPS)",
    ),
    pytest.param(
        f"{MIG}, deviceClassName: gpu.nvidia.com}}",
        "spec.sharing.deviceClassName",
        "MigDeviceConfig, which it refuses on gpu.nvidia.com's gpu devices",
        id=f"{DEVICE_STATE} prepareDevices: no MigDeviceConfig on a full GPU",
    ),
    pytest.param(
        "{mode: dra, driverFeatureGates: {TimeSlicing: true}}",
        "spec.sharing.driverFeatureGates.TimeSlicing",
        "not a feature gate of NVIDIA's DRA driver; its gates: TimeSlicingSettings, MPSSupport",
        id=f"{FEATUREGATES} the driver's gate names",
    ),
    pytest.param(
        "{mode: dra, driverFeatureGates: {IMEXDaemonsWithDNSNames: false}}",
        "spec.sharing.driverFeatureGates.IMEXDaemonsWithDNSNames",
        "ComputeDomainCliques requires IMEXDaemonsWithDNSNames",
        id=f"{FEATUREGATES} ValidateFeatureGates: ComputeDomainCliques requires IMEXDaemonsWithDNSNames",
    ),
    pytest.param(
        "{mode: dra, driverFeatureGates: {DeviceMetadata: true}}",
        "spec.sharing.driverFeatureGates.DeviceMetadata",
        "DeviceMetadata requires PassthroughSupport",
        id=f"{FEATUREGATES} ValidateFeatureGates: DeviceMetadata requires PassthroughSupport",
    ),
    pytest.param(
        "{mode: dra, driverFeatureGates: {PassthroughSupport: true, DynamicMIG: true}}",
        "spec.sharing.driverFeatureGates.DynamicMIG",
        "DynamicMIG and PassthroughSupport exclude each other",
        id=f"{FEATUREGATES} ValidateFeatureGates: DynamicMIG excludes PassthroughSupport",
    ),
    pytest.param(
        "{mode: dra, driverFeatureGates: {NVMLDeviceHealthCheck: true, DynamicMIG: true}}",
        "spec.sharing.driverFeatureGates.DynamicMIG",
        "DynamicMIG and NVMLDeviceHealthCheck exclude each other",
        id=f"{FEATUREGATES} ValidateFeatureGates: DynamicMIG excludes NVMLDeviceHealthCheck",
    ),
    pytest.param(
        "{mode: dra, driverFeatureGates: {NVMLDeviceHealthCheck: true, PassthroughSupport: true}}",
        "spec.sharing.driverFeatureGates.PassthroughSupport",
        "PassthroughSupport and NVMLDeviceHealthCheck exclude each other",
        id=f"{FEATUREGATES} ValidateFeatureGates: PassthroughSupport excludes NVMLDeviceHealthCheck",
    ),
    pytest.param(
        "{mode: dra, driverFeatureGates: {MPSSupport: yes please}}",
        "spec.sharing.driverFeatureGates.MPSSupport",
        "must be of type boolean",
        id="gate-values-are-booleans",
    ),
    pytest.param(
        "{mode: dra, driverFeatureGates: {1: true}}",
        "spec.sharing.driverFeatureGates",
        "must be of type string",
        id="gate-names-are-strings",
    ),
    pytest.param(
        "{mode: dra, migSharing: MPS}", "spec.sharing.migSharing", "only to strategy MIG", id="mig-sharing"
    ),
    pytest.param(
        "{mode: dra, fallback: [wholeGpu]}", "spec.sharing.fallback", "only to strategy MIG", id="fallback"
    ),
    pytest.param(
        f"{MIG}, fallback: [wholeGpu, wholeGpu]}}",
        "spec.sharing.fallback",
        "non-unique",
        id="fallback-unique",
    ),
    pytest.param(
        f"{MIG}, fallback: [smaller]}}", "spec.sharing.fallback[0]", "is not one of", id="fallback-enum"
    ),
    pytest.param(
        f"{MIG}, defaultMemory: 40500Mi}}",
        "spec.sharing.defaultMemory",
        "largest MIG slice",
        id="mig-memory-fits",
    ),
    pytest.param(
        "{mode: dra, deviceClassName: Not_A_Class}",
        "spec.sharing.deviceClassName",
        "DNS subdomain",
        id="class",
    ),
    pytest.param("{mode: dra, cores: 20}", "spec.sharing.cores", "applies only to modes", id="cores"),
    pytest.param(
        "{mode: mig, gpuModel: A100-40GB, strategy: MIG}",
        "spec.sharing.strategy",
        "applies only to modes dra",
        id="strategy-is-dra",
    ),
    pytest.param(
        "{mode: timeslice, mps: {}}", "spec.sharing.mps", "applies only to modes dra", id="mps-is-dra"
    ),
    pytest.param(
        "{mode: mps, driverFeatureGates: {MPSSupport: true}}",
        "spec.sharing.driverFeatureGates",
        "applies only to modes dra",
        id="gates-are-dra",
    ),
]


@pytest.mark.parametrize(("sharing", "path", "reason"), BAD)
def test_invalid_combinations_are_located(tmp_path: Path, sharing: str, path: str, reason: str) -> None:
    (tmp_path / "p.yaml").write_text(HEADER + textwrap.indent(f"sharing: {sharing}\n", "  "))
    with pytest.raises(PolicyError) as info:
        load_directory(tmp_path)
    found = [(p.file, p.line, p.path, p.reason) for p in info.value.problems]
    assert any(f.endswith("p.yaml") and line == 6 and p == path and reason in r for f, line, p, r in found), (
        found
    )


GOOD = [
    pytest.param(
        f"{{mode: dra, strategy: MPS, mps: {{defaultPinnedDeviceMemoryLimit: 1Mi}}, {MPS_GATE}}}",
        id=f"{SHARING} limit.Megabyte: 1 MiB is the least",
    ),
    pytest.param(
        f"{{mode: dra, strategy: MPS, mps: {{defaultPinnedDeviceMemoryLimit: '1048575.5'}}, {MPS_GATE}}}",
        id=f"{SHARING} limit.Megabyte: resource.Quantity.Value rounds up to 1 MiB",
    ),
    pytest.param(
        f"{{mode: dra, strategy: MPS, mps: {{defaultActiveThreadPercentage: 0}}, {MPS_GATE}}}",
        id=f"{VALIDATE} MpsConfig.Validate: 0 is allowed",
    ),
    pytest.param(
        f"{{mode: dra, strategy: TimeSlicing, timeSlicing: {{interval: Default}}, {TS_GATE}}}",
        id=f"{VALIDATE} TimeSliceInterval.Validate: Default",
    ),
    pytest.param(
        "{mode: dra, strategy: MPS, driverFeatureGates: {MPSSupport: true, TimeSlicingSettings: true}}",
        id=f"{FEATUREGATES} TimeSlicingSettings and MPSSupport together",
    ),
    pytest.param(
        "{mode: dra, strategy: MIG, gpuModel: A100-40GB, driverFeatureGates: {DynamicMIG: true}}",
        id=f"{FEATUREGATES} unshared MIG under DynamicMIG",
    ),
    pytest.param(
        f"{{mode: dra, strategy: MPS, deviceClassName: gpu.example.com, {MPS_GATE}}}",
        id="a class of the cluster's own is not judged",
    ),
    pytest.param(
        "{mode: dra, driverFeatureGates: {ComputeDomainCliques: false, IMEXDaemonsWithDNSNames: false}}",
        id=f"{FEATUREGATES} ValidateFeatureGates: both compute-domain gates off",
    ),
]


@pytest.mark.parametrize("sharing", GOOD)
def test_what_the_driver_accepts_loads(sharing: str) -> None:
    assert sharing_policy(f"sharing: {sharing}\n").sharing.dra is not None
