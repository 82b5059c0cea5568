"""NVIDIA's DRA driver's devices per GPU model, its device classes (webhook.dra.catalog), and what a
device weighs (webhook.dra.weights).

The device shapes come from k8s-dra-driver-gpu cmd/gpu-kubelet-plugin/deviceinfo.go
(GpuInfo.Attributes, GetDevice), mig.go (CommonAttributesMig, CommonCapacitiesMig), partitions.go
(PartGetDevice); the classes from deployments/helm/dra-driver-nvidia-gpu/templates/deviceclass-*.yaml.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterator
from fractions import Fraction
from typing import Any

import pytest

from tests.support.cel import CelProcess
from webhook import gpu
from webhook.dra.catalog import (
    NVIDIA_DEVICE_CLASSES,
    NVIDIA_EXTENDED_RESOURCE_NAMES,
    model_slice,
    nvidia_catalog,
)
from webhook.dra.published import Device, Version
from webhook.dra.weights import DeviceWeight, device_weight

DRIVER = "gpu.nvidia.com"
MiB = 2**20
STANDARD = {"resource.kubernetes.io/pciBusID", "resource.kubernetes.io/pcieRoot"}
# deviceinfo.go GpuInfo.Attributes (addressingMode only where NVML reports one).
GPU_ATTRIBUTES = {
    "type",
    "uuid",
    "productName",
    "brand",
    "architecture",
    "cudaComputeCapability",
    "driverVersion",
    "cudaDriverVersion",
} | STANDARD
# mig.go CommonAttributesMig, and the uuid of deviceinfo.go MigDeviceInfo.GetDevice.
MIG_ATTRIBUTES = {
    "type",
    "parentUUID",
    "profile",
    "productName",
    "brand",
    "architecture",
    "cudaComputeCapability",
    "driverVersion",
    "cudaDriverVersion",
    "uuid",
} | STANDARD
# mig.go CommonCapacitiesMig.
MIG_CAPACITIES = {
    "multiprocessors",
    "copyEngines",
    "decoders",
    "encoders",
    "jpegEngines",
    "ofaEngines",
    "memory",
}
# deviceinfo.go VfioDeviceInfo.GetDevice.
VFIO_ATTRIBUTES = {"type", "uuid", "deviceID", "vendorID", "numa", "productName", "iommuFDEnabled"} | STANDARD
GRACE = {m for m in gpu.GPU_MODELS if m.startswith(("GH", "GB"))}


def _names(device: Device) -> tuple[set[str], set[str]]:
    attributes = {
        name if domain == DRIVER else f"{domain}/{name}"
        for domain, names in device.attributes.items()
        for name in names
    }
    return attributes, set(device.capacity.get(DRIVER, {}))


def _of_model(model: str) -> list[Device]:
    return [d for d in nvidia_catalog() if d.pool == f"catalog-{model.lower()}"]


def _typed(model: str, kind: str) -> list[Device]:
    return [d for d in _of_model(model) if d.attribute("type") == kind]


MODELS = list(gpu.GPU_MODELS)


def test_the_catalog_is_memoised_and_covers_every_model() -> None:
    assert nvidia_catalog() is nvidia_catalog()
    assert {d.pool for d in nvidia_catalog()} == {f"catalog-{m.lower()}" for m in MODELS}
    assert {d.driver for d in nvidia_catalog()} == {DRIVER}


@pytest.mark.parametrize("model", MODELS)
def test_each_model_has_its_gpu_its_mig_devices_and_its_vfio_device(model: str) -> None:
    kinds = Counter(d.attribute("type") for d in _of_model(model))
    assert kinds == {"gpu": 1, "mig": len(gpu.MIG_PROFILES[model]), "vfio": 1}
    assert sorted(str(d.attribute("profile")) for d in _typed(model, "mig")) == sorted(
        p.name for p in gpu.MIG_PROFILES[model]
    )


@pytest.mark.parametrize("model", MODELS)
def test_a_gpu_carries_every_name_the_driver_publishes(model: str) -> None:
    """deviceinfo.go GpuInfo.GetDevice (memory); partitions.go PartGetDevice (the largest
    profile's capacities)."""
    (device,) = _typed(model, "gpu")
    attributes, capacities = _names(device)
    assert attributes == GPU_ATTRIBUTES | ({"addressingMode"} if model in GRACE else set())
    assert capacities == MIG_CAPACITIES
    assert device.capacity_of("memory") == gpu.model_memory_mib(model) * MiB


@pytest.mark.parametrize("model", MODELS)
def test_a_mig_device_carries_every_name_the_driver_publishes(model: str) -> None:
    """mig.go CommonAttributesMig, CommonCapacitiesMig; deviceinfo.go MigDeviceInfo.GetDevice
    (memorySlice<i>)."""
    for device in _typed(model, "mig"):
        attributes, capacities = _names(device)
        assert attributes == MIG_ATTRIBUTES | ({"addressingMode"} if model in GRACE else set())
        assert capacities >= MIG_CAPACITIES
        assert all(re.fullmatch(r"memorySlice[0-9]", name) for name in capacities - MIG_CAPACITIES)


@pytest.mark.parametrize(
    ("profile", "memory_slices"),
    [("1g.10gb", 1), ("2g.20gb", 2), ("3g.40gb", 4), ("4g.40gb", 4), ("7g.80gb", 8)],
    ids=lambda v: str(v),
)
def test_a_mig_device_spans_its_placements_memory_slices(profile: str, memory_slices: int) -> None:
    """partitions.go: on B200 the 3g.90gb device consumes 4 of 8 memory slices; A100-80GB alike."""
    (device,) = [d for d in _typed("A100-80GB", "mig") if d.attribute("profile") == profile]
    slices = {n for n in device.capacity[DRIVER] if n.startswith("memorySlice")}
    assert slices == {f"memorySlice{i}" for i in range(memory_slices)}
    assert all(device.capacity[DRIVER][n] == 1 for n in slices)


@pytest.mark.parametrize("model", MODELS)
def test_a_mig_device_holds_the_slices_real_memory_in_bytes(model: str) -> None:
    """mig.go CommonCapacitiesMig: memory is MemorySizeMB (MiB) * 1024 * 1024."""
    profiles = {p.name: p for p in gpu.MIG_PROFILES[model]}
    for device in _typed(model, "mig"):
        profile = profiles[str(device.attribute("profile"))]
        assert device.capacity_of("memory") == profile.memory_mib * MiB
        assert device.capacity_of("multiprocessors") == profile.slices


@pytest.mark.parametrize("model", MODELS)
def test_a_vfio_device_carries_every_name_the_driver_publishes(model: str) -> None:
    (device,) = _typed(model, "vfio")
    attributes, capacities = _names(device)
    assert attributes == VFIO_ATTRIBUTES
    assert capacities == {"addressableMemory"}
    assert device.attribute("vendorID") == "0x10de"


@pytest.mark.parametrize(
    ("model", "architecture", "capability"),
    [
        ("A100-80GB", "Ampere", "8.0.0"),
        ("A30-24GB", "Ampere", "8.0.0"),
        ("H100-80GB", "Hopper", "9.0.0"),
        ("GH200-144GB", "Hopper", "9.0.0"),
        ("B200-180GB", "Blackwell", "10.0.0"),
        ("GB200-186GB", "Blackwell", "10.0.0"),
        ("B300-288GB", "Blackwell", "10.3.0"),
        ("RTX-PRO-6000-96GB", "Blackwell", "12.0.0"),
    ],
)
def test_architecture_and_compute_capability_are_the_models(
    model: str, architecture: str, capability: str
) -> None:
    """go-nvlib GetArchitectureAsString; deviceinfo.go semver.MustParse(cc).String() writes "8.0.0"."""
    for device in _typed(model, "gpu") + _typed(model, "mig"):
        assert device.attribute("architecture") == architecture
        assert device.attribute("cudaComputeCapability") == Version(capability)


def test_device_names_follow_the_drivers_canonical_names() -> None:
    """mig.go canonicalMigNameRegex; deviceinfo.go gpu-<minor>, gpu-vfio-<index>; unique per pool."""
    for model in MODELS:
        names = [d.name for d in _of_model(model)]
        assert len(set(names)) == len(names)
        assert names[0] == "gpu-0" and names[-1] == "gpu-vfio-0"
        assert all(re.fullmatch(r"gpu-(\d+)-mig-(.+)-(\d+)-(\d+)", n) for n in names[1:-1])


def test_a_model_slice_is_a_v1_resource_slice_for_all_nodes() -> None:
    obj = model_slice("A100-80GB")
    assert (obj["apiVersion"], obj["kind"]) == ("resource.k8s.io/v1", "ResourceSlice")
    assert obj["spec"]["allNodes"] is True and "nodeName" not in obj["spec"]


@pytest.fixture(scope="module")
def cel() -> Iterator[CelProcess]:
    """cel-python in its own process (tests/support/cel.py says why)."""
    process = CelProcess()
    yield process
    process.close()


def _activation(device: Device) -> dict[str, Any]:
    attributes = {
        domain: {name: value.text if isinstance(value, Version) else value for name, value in names.items()}
        for domain, names in device.attributes.items()
    }
    return {"device": {"driver": device.driver, "attributes": attributes}}


def _matches(cel: CelProcess, expression: str, device: Device) -> bool:
    return cel.evaluate(expression, _activation(device))


@pytest.mark.parametrize(
    ("device_class", "kind"),
    [("gpu.nvidia.com", "gpu"), ("mig.nvidia.com", "mig"), ("vfio.gpu.nvidia.com", "vfio")],
    ids=[f"templates/deviceclass-{n}.yaml" for n in ("gpu", "mig", "vfio-gpu")],
)
def test_each_gpu_class_selects_its_kind_of_device(cel: CelProcess, device_class: str, kind: str) -> None:
    """deployments/helm/dra-driver-nvidia-gpu/templates/deviceclass-{gpu,mig,vfio-gpu}.yaml."""
    (expression,) = NVIDIA_DEVICE_CLASSES[device_class]
    for device in _of_model("H100-80GB"):
        assert _matches(cel, expression, device) == (device.attribute("type") == kind)


@pytest.mark.parametrize(
    ("device_class", "attributes", "selected"),
    [
        ("compute-domain-daemon.nvidia.com", {"type": "daemon", "id": 0}, True),
        ("compute-domain-daemon.nvidia.com", {"type": "channel", "id": 0}, False),
        ("compute-domain-default-channel.nvidia.com", {"type": "channel", "id": 0}, True),
        ("compute-domain-default-channel.nvidia.com", {"type": "channel", "id": 1}, False),
    ],
    ids=["daemon", "daemon-not-channel", "channel-0", "not-channel-1"],
)
def test_the_compute_domain_classes_select_their_devices(
    cel: CelProcess, device_class: str, attributes: dict[str, Any], selected: bool
) -> None:
    """templates/deviceclass-compute-domain-{daemon,default-channel}.yaml; devices as
    cmd/compute-domain-kubelet-plugin/deviceinfo.go publishes them. No GPU is selected."""
    driver = "compute-domain.nvidia.com"
    device = Device(driver=driver, pool="p", name="channel-0", attributes={driver: attributes})
    (expression,) = NVIDIA_DEVICE_CLASSES[device_class]
    assert _matches(cel, expression, device) is selected
    assert not any(_matches(cel, expression, d) for d in _of_model("GB200-186GB"))


def test_the_chart_renders_these_classes_only() -> None:
    assert set(NVIDIA_DEVICE_CLASSES) == {
        "gpu.nvidia.com",
        "mig.nvidia.com",
        "vfio.gpu.nvidia.com",
        "compute-domain-daemon.nvidia.com",
        "compute-domain-default-channel.nvidia.com",
    }
    assert NVIDIA_EXTENDED_RESOURCE_NAMES == {"gpu.nvidia.com": "nvidia.com/gpu"}


def test_the_demo_a100_selector_finds_the_a100_by_product_family(cel: CelProcess) -> None:
    """demo/specs/quickstart/v1/gpu-test6.yaml tests productName.lowerAscii().matches('^.*a100.*$');
    lowerAscii is a Kubernetes CEL extension that cel-python lacks, so the test spells the case."""
    expression = "device.attributes['gpu.nvidia.com'].productName.matches('^.*A100.*$')"
    found = {
        d.pool for d in nvidia_catalog() if d.attribute("type") == "gpu" and _matches(cel, expression, d)
    }
    assert found == {"catalog-a100-40gb", "catalog-a100-80gb"}


@pytest.mark.parametrize("model", MODELS)
def test_a_catalog_device_weighs_its_tables_profile(model: str) -> None:
    """weights: a MIG device is its model's profile (found by name and real memory)."""
    (whole,) = _typed(model, "gpu")
    assert device_weight(whole) == DeviceWeight(None, gpu.model_memory_mib(model))
    for device in _typed(model, "mig"):
        weight = device_weight(device)
        assert weight is not None and weight.mig_profile is not None
        expected = next(p for p in gpu.MIG_PROFILES[model] if p.name == device.attribute("profile"))
        assert weight.mig_profile == expected
        assert weight.memory_mib == expected.memory_mib
    (vfio,) = _typed(model, "vfio")
    assert device_weight(vfio) == DeviceWeight(None, None)


def _published(
    kind: str,
    memory: Fraction | None = None,
    profile: str | None = None,
    driver: str = DRIVER,
    product: str = "",
) -> Device:
    attributes: dict[str, Any] = {"type": kind} | ({"profile": profile} if profile else {})
    attributes |= {"productName": product} if product else {}
    capacity = {"memory": memory} if memory is not None else {}
    return Device(
        driver=driver, pool="node-1", name="d", attributes={driver: attributes}, capacity={driver: capacity}
    )


def _profile(model: str, name: str) -> Any:
    return next(p for p in gpu.MIG_PROFILES[model] if p.name == name)


A100_80_1G, A100_40_1G = _profile("A100-80GB", "1g.10gb"), _profile("A100-40GB", "1g.10gb")
H200_1G, GB300_1G = _profile("H200-141GB", "1g.35gb"), _profile("GB300-288GB", "1g.35gb")
GIB_10 = Fraction(9856 * MiB)
CASES = {
    "whole-gpu-81559MiB": (_published("gpu", Fraction(81559 * MiB)), DeviceWeight(None, 81559)),
    "memory-rounds-up": (_published("gpu", Fraction(MiB + 1)), DeviceWeight(None, 2)),
    "no-memory": (_published("gpu"), DeviceWeight(None, None)),
    "zero-memory": (_published("gpu", Fraction(0)), DeviceWeight(None, None)),
    "mig-by-memory-on-h100": (
        _published("mig", Fraction(10240 * MiB), "1g.10gb"),
        DeviceWeight(_profile("H100-80GB", "1g.10gb"), 10240),
    ),
    "mig-a100-80gb-by-product": (
        _published("mig", GIB_10, "1g.10gb", product="NVIDIA A100-SXM4-80GB"),
        DeviceWeight(A100_80_1G, 9856),
    ),
    "mig-a100-40gb-by-product": (
        _published("mig", GIB_10, "1g.10gb", product="NVIDIA A100-SXM4-40GB"),
        DeviceWeight(A100_40_1G, 9856),
    ),
    "mig-tie-takes-the-first-model": (_published("mig", GIB_10, "1g.10gb"), DeviceWeight(A100_40_1G, 9856)),
    "mig-by-product-family": (
        _published("mig", Fraction(35840 * MiB), "1g.35gb", product="NVIDIA GB300"),
        DeviceWeight(GB300_1G, 35840),
    ),
    "mig-family-is-a-word": (
        _published("mig", Fraction(35840 * MiB), "1g.35gb", product="NVIDIA H200 NVL"),
        DeviceWeight(H200_1G, 35840),
    ),
    "mig-unmeasured-size-by-product": (
        _published("mig", Fraction(35000 * MiB), "1g.35gb", product="NVIDIA GB300"),
        DeviceWeight(GB300_1G, 35000),
    ),
    "mig-name-of-one-model": (
        _published("mig", Fraction(5900 * MiB), "1g.6gb"),
        DeviceWeight(_profile("A30-24GB", "1g.6gb"), 5900),
    ),
    "mig-tables-agree-without-a-memory-match": (
        _published("mig", Fraction(12000 * MiB), "1g.12gb"),
        DeviceWeight(_profile("H100-94GB", "1g.12gb"), 12000),
    ),
    "mig-ambiguous-size-parsed": (
        _published("mig", Fraction(9000 * MiB), "1g.10gb"),
        DeviceWeight(gpu.parse_mig_resource("nvidia.com/mig-1g.10gb"), 9000),
    ),
    "mig-unknown-profile-parsed": (
        _published("mig", None, "2g.33gb+me"),
        DeviceWeight(gpu.parse_mig_resource("nvidia.com/mig-2g.33gb.me"), None),
    ),
    "mig-unreadable-profile-is-whole": (_published("mig", Fraction(MiB), "big"), DeviceWeight(None, 1)),
    "mig-without-profile-is-whole": (_published("mig", Fraction(MiB)), DeviceWeight(None, 1)),
    "vfio-is-whole": (_published("vfio"), DeviceWeight(None, None)),
    "other-driver-weighs-nothing": (_published("gpu", Fraction(MiB), driver="gpu.example.com"), None),
}


@pytest.mark.parametrize(("device", "weight"), CASES.values(), ids=[f"deviceinfo.go {k}" for k in CASES])
def test_what_a_published_device_weighs(device: Device, weight: DeviceWeight | None) -> None:
    assert device_weight(device) == weight
