"""The devices NVIDIA's DRA driver would publish for each GPU model we know, and its device classes. Pure.

When a cluster has published no ResourceSlices (offline, or before the driver runs), a class's and
a request's selectors are evaluated against this catalog instead. Each model gets one ResourceSlice
(resource.k8s.io/v1, read back through `slices.slice_devices`, so the catalog obeys the API's own
rules) holding what k8s-dra-driver-gpu cmd/gpu-kubelet-plugin builds for one card:

- the whole GPU (`GpuInfo.GetDevice`, and `PartGetDevice` under the DynamicMIG gate): `type: gpu`
  and the card's `memory` in bytes; DynamicMIG adds the largest profile's engine counts;
- one MIG device per profile in our tables (`MigDeviceInfo.GetDevice` for MIG devices that exist,
  `MigSpec.PartGetDevice` under DynamicMIG, both from `CommonAttributesMig` and
  `CommonCapacitiesMig`): `type: mig`, `profile`, the slice's real `memory` in bytes, and the
  `memorySlice<i>` capacities of its first placement;
- the GPU bound to vfio-pci for passthrough (`VfioDeviceInfo.GetDevice`): `type: vfio`.

Every attribute and capacity name the driver publishes is present, so a selector that names one
finds it. What identifies a device's kind is real: `type`, `profile`, `memory`, `architecture`,
`cudaComputeCapability`, `vendorID`. What only the machine knows is a placeholder, and a selector
that tests it does not describe the cluster: `uuid`, `parentUUID`, `driverVersion`,
`cudaDriverVersion`, `resource.kubernetes.io/pciBusID` and `pcieRoot`, `deviceID`, `numa`,
`iommuFDEnabled`, `addressableMemory`, `brand`, `addressingMode` (given on Grace systems only);
`productName` is "NVIDIA <model>" (real names read like "NVIDIA A100-SXM4-80GB", so a pattern on the
family, such as `a100`, matches, an exact name does not); a MIG device's engine counts
(`multiprocessors`, `copyEngines`, `decoders`, `encoders`, `jpegEngines`, `ofaEngines`), which our
tables do not hold, are its number of compute slices, so they grow with the profile but are not
NVML's numbers. The driver publishes no `index` or `minor` attribute, so selectors on them match
no device here or in a cluster.
"""

from __future__ import annotations

import dataclasses
import functools
import re
from collections.abc import Mapping
from typing import Any

from webhook import gpu
from webhook.dra.published import Device
from webhook.dra.slices import slice_devices
from webhook.gpu import MigProfile
from webhook.quantity import MiB

DRIVER = "gpu.nvidia.com"
STANDARD = "resource.kubernetes.io"  # k8s.io/dynamic-resource-allocation deviceattribute
NVIDIA_PCI_VENDOR = "0x10de"

# deployments/helm/dra-driver-nvidia-gpu/templates/deviceclass-*.yaml, rendered with the chart's
# default values (resources.gpus.enabled and resources.computeDomains.enabled are true).
NVIDIA_DEVICE_CLASSES: Mapping[str, tuple[str, ...]] = {
    "gpu.nvidia.com": (
        "device.driver == 'gpu.nvidia.com' && device.attributes['gpu.nvidia.com'].type == 'gpu'",
    ),
    "mig.nvidia.com": (
        "device.driver == 'gpu.nvidia.com' && device.attributes['gpu.nvidia.com'].type == 'mig'",
    ),
    "vfio.gpu.nvidia.com": (
        "device.driver == 'gpu.nvidia.com' && device.attributes['gpu.nvidia.com'].type == 'vfio'",
    ),
    "compute-domain-daemon.nvidia.com": (
        "device.driver == 'compute-domain.nvidia.com'"
        " && device.attributes['compute-domain.nvidia.com'].type == 'daemon'",
    ),
    "compute-domain-default-channel.nvidia.com": (
        "device.driver == 'compute-domain.nvidia.com'"
        " && device.attributes['compute-domain.nvidia.com'].type == 'channel'"
        " && device.attributes['compute-domain.nvidia.com'].id == 0",
    ),
}
# deviceclass-gpu.yaml sets it when the chart renders resource.k8s.io/v1.
NVIDIA_EXTENDED_RESOURCE_NAMES: Mapping[str, str] = {"gpu.nvidia.com": "nvidia.com/gpu"}

# (go-nvlib GetArchitectureAsString, CUDA compute capability) by the model's family.
_ARCHITECTURES: tuple[tuple[str, str, str], ...] = (
    ("A", "Ampere", "8.0"),
    ("RTX-PRO-6000", "Blackwell", "12.0"),
    ("B300", "Blackwell", "10.3"),
    ("GB300", "Blackwell", "10.3"),
    ("B", "Blackwell", "10.0"),
    ("GB", "Blackwell", "10.0"),
    ("H", "Hopper", "9.0"),
    ("GH", "Hopper", "9.0"),
)
_MIG_ENGINES = ("multiprocessors", "copyEngines", "decoders", "encoders", "jpegEngines", "ofaEngines")
_PLACEHOLDER_UUID = "00000000-0000-0000-0000-000000000000"
_PCI_BUS_ID = "0000:00:00.0"


# What only the machine knows: the catalog's values for these are placeholders.
PLACEHOLDER_ATTRIBUTES = frozenset(
    {
        "uuid",
        "parentUUID",
        "productName",
        "brand",
        "driverVersion",
        "cudaDriverVersion",
        "deviceID",
        "numa",
        "iommuFDEnabled",
        "addressingMode",
        f"{STANDARD}/pciBusID",
        f"{STANDARD}/pcieRoot",
    }
)
PLACEHOLDER_CAPACITIES = frozenset({"addressableMemory", *_MIG_ENGINES})


@functools.cache
def unknowns_absent() -> tuple[Device, ...]:
    """The catalog without its placeholders: a selector that tests what only the machine knows
    then fails on the device (a missing key) instead of refusing it, so that judging on the
    catalog can count the device rather than nothing."""
    return tuple(_without_placeholders(device) for device in nvidia_catalog())


def _without_placeholders(device: Device) -> Device:
    attributes = {
        domain: {
            n: v for n, v in names.items() if _qualified(domain, n, device) not in PLACEHOLDER_ATTRIBUTES
        }
        for domain, names in device.attributes.items()
    }
    capacity = {
        domain: {
            n: v for n, v in names.items() if _qualified(domain, n, device) not in PLACEHOLDER_CAPACITIES
        }
        for domain, names in device.capacity.items()
    }
    return dataclasses.replace(device, attributes=attributes, capacity=capacity)


def _qualified(domain: str, name: str, device: Device) -> str:
    return name if domain == device.driver else f"{domain}/{name}"


@functools.cache
def nvidia_catalog() -> tuple[Device, ...]:
    """Every model's devices, model by model in our tables' order: GPU, MIG devices, VFIO."""
    return tuple(device for model in gpu.GPU_MODELS for device in slice_devices(model_slice(model)))


def model_slice(model: str) -> dict[str, Any]:
    """The ResourceSlice (resource.k8s.io/v1) one card of `model` would publish, in a pool of its own."""
    common = _common_attributes(model)
    devices = [_gpu(model, common)]
    devices += [_mig(model, common, index, profile) for index, profile in enumerate(gpu.MIG_PROFILES[model])]
    devices.append(_vfio(model))
    pool = f"catalog-{model.lower()}"
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {"name": pool},
        "spec": {
            "driver": DRIVER,
            "pool": {"name": pool, "generation": 1, "resourceSliceCount": 1},
            "allNodes": True,
            "devices": devices,
        },
    }


def _gpu(model: str, common: Mapping[str, Any]) -> dict[str, Any]:
    largest = gpu.largest_profile(model)
    capacity = {name: _amount(largest.slices) for name in _MIG_ENGINES}
    capacity["memory"] = _amount(gpu.model_memory_mib(model) * MiB)
    attributes = {**common, "type": _string("gpu"), "uuid": _string(f"GPU-{_PLACEHOLDER_UUID}")}
    return {"name": "gpu-0", "attributes": attributes, "capacity": capacity}


def _mig(model: str, common: Mapping[str, Any], index: int, profile: MigProfile) -> dict[str, Any]:
    capacity = {name: _amount(profile.slices) for name in _MIG_ENGINES}
    capacity["memory"] = _amount(profile.memory_mib * MiB)
    capacity.update({f"memorySlice{i}": _amount(1) for i in range(_memory_slices(profile.slices))})
    attributes = {
        **common,
        "type": _string("mig"),
        "profile": _string(profile.name),
        "parentUUID": _string(f"GPU-{_PLACEHOLDER_UUID}"),
        "uuid": _string(f"MIG-{_PLACEHOLDER_UUID}"),
    }
    # MigSpecTuple.ToCanonicalName: gpu-<minor>-mig-<profile>-<profile id>-<placement start>; the
    # table's row stands in for NVML's profile id, which our tables do not hold.
    name = f"gpu-0-mig-{_rfc1123(profile.name.replace('.', ''))}-{index}-0"
    return {"name": name, "attributes": attributes, "capacity": capacity}


def _vfio(model: str) -> dict[str, Any]:
    attributes = {
        "type": _string("vfio"),
        "uuid": _string(_PLACEHOLDER_UUID),
        "deviceID": _string("0x0000"),
        "vendorID": _string(NVIDIA_PCI_VENDOR),
        "numa": {"int": 0},
        "productName": _string(_product_name(model)),
        "iommuFDEnabled": {"bool": False},
        f"{STANDARD}/pciBusID": _string(_PCI_BUS_ID),
        f"{STANDARD}/pcieRoot": _string("pci0000:00"),
    }
    capacity = {"addressableMemory": _amount(gpu.model_memory_mib(model) * MiB)}
    return {"name": "gpu-vfio-0", "attributes": attributes, "capacity": capacity}


def _common_attributes(model: str) -> dict[str, Any]:
    """What a GPU and its MIG devices share (GpuInfo.Attributes, CommonAttributesMig)."""
    architecture, capability = next(
        ((arch, cc) for prefix, arch, cc in _ARCHITECTURES if model.startswith(prefix)), ("Unknown", "0.0")
    )
    attributes: dict[str, Any] = {
        "productName": _string(_product_name(model)),
        "brand": _string("Nvidia"),
        "architecture": _string(architecture),
        # semver.MustParse(...).String() turns NVML's "8.0" into "8.0.0".
        "cudaComputeCapability": {"version": f"{capability}.0"},
        "driverVersion": {"version": "580.95.5"},
        "cudaDriverVersion": {"version": "13.0.0"},
        f"{STANDARD}/pciBusID": _string(_PCI_BUS_ID),
        f"{STANDARD}/pcieRoot": _string("pci0000:00"),
    }
    if model.startswith(("GH", "GB")):  # Grace: coherent memory, so NVML reports an addressing mode
        attributes["addressingMode"] = _string("ATS")
    return attributes


def _memory_slices(slices: int) -> int:
    """Memory slices a profile's placement spans: NVIDIA's layouts give 1, 2, 4 or 8 (3g takes 4)."""
    return 1 << (slices - 1).bit_length()


def _product_name(model: str) -> str:
    return f"NVIDIA {model}"


def _rfc1123(name: str) -> str:
    """mig.go toRFC1123Compliant, on a name already without dots."""
    return re.sub(r"[^a-z0-9-.]", "-", name.lower()).strip("-")


def _string(value: str) -> dict[str, str]:
    return {"string": value}


def _amount(value: int) -> dict[str, str]:
    return {"value": str(value)}
