"""The devices a ResourceSlice publishes (webhook.dra.slices).

Layouts from k8s.io/api resource/v1, v1beta2 and v1beta1 types.go; name resolution from
k8s.io/dynamic-resource-allocation cel/compile.go (parseQualifiedName); the devices' shapes from
k8s-dra-driver-gpu cmd/gpu-kubelet-plugin/deviceinfo.go and mig.go.
"""

from __future__ import annotations

import copy
from fractions import Fraction
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from webhook.dra.published import Device, RequestPolicy, Version
from webhook.dra.slices import MAX_ATTRIBUTES_AND_CAPACITIES, MAX_DEVICES, SliceError, slice_devices

DRIVER = "gpu.nvidia.com"
GI = 2**30

# GpuInfo.GetDevice: the attributes of GpuInfo.Attributes and fullGpuCapacity's memory.
GPU_ATTRIBUTES = {
    "type": {"string": "gpu"},
    "uuid": {"string": "GPU-4cf8db2d-06c0-7d70-1a51-e59b25b2c16c"},
    "productName": {"string": "NVIDIA A100-SXM4-80GB"},
    "brand": {"string": "Nvidia"},
    "architecture": {"string": "Ampere"},
    "cudaComputeCapability": {"version": "8.0.0"},
    "driverVersion": {"version": "580.65.6"},
    "cudaDriverVersion": {"version": "13.0.0"},
    "resource.kubernetes.io/pciBusID": {"string": "0000:07:00.0"},
    "resource.kubernetes.io/pcieRoot": {"string": "pci0000:00"},
}
GPU_CAPACITY = {"memory": {"value": "80Gi"}}
# MigDeviceInfo.GetDevice: CommonAttributesMig, CommonCapacitiesMig and the memory slices.
MIG_ATTRIBUTES = {
    "type": {"string": "mig"},
    "profile": {"string": "1g.10gb"},
    "parentUUID": {"string": "GPU-4cf8db2d-06c0-7d70-1a51-e59b25b2c16c"},
    "uuid": {"string": "MIG-ac2c8ef4-8a48-5d3e-9b04-4a4f7b4c3a8b"},
}
MIG_CAPACITY = {
    "multiprocessors": {"value": "14"},
    "memory": {"value": "9856Mi"},
    "memorySlice0": {"value": "1"},
}


def _gpu(name: str = "gpu-0", **fields: Any) -> dict[str, Any]:
    return {"name": name, "attributes": GPU_ATTRIBUTES, "capacity": GPU_CAPACITY, **fields}


def _slice(*devices: Any, version: str = "resource.k8s.io/v1", **spec: Any) -> dict[str, Any]:
    body = {
        "driver": DRIVER,
        "pool": {"name": "node-1", "generation": 1, "resourceSliceCount": 1},
        "nodeName": "node-1",
    }
    return {
        "apiVersion": version,
        "kind": "ResourceSlice",
        "metadata": {"name": "node-1-gpu.nvidia.com-x7k2p"},
        "spec": {**body, "devices": list(devices), **spec},
    }


def _basic(device: dict[str, Any]) -> dict[str, Any]:
    """The same device in v1beta1's layout (conversion.go Convert_v1_Device_To_v1beta1_Device)."""
    return {"name": device["name"], "basic": {k: v for k, v in device.items() if k != "name"}}


def test_a_whole_gpu_as_the_driver_publishes_it() -> None:
    """k8s-dra-driver-gpu cmd/gpu-kubelet-plugin/deviceinfo.go GpuInfo.GetDevice."""
    (device,) = slice_devices(_slice(_gpu()))
    assert device == Device(
        driver=DRIVER,
        pool="node-1",
        name="gpu-0",
        attributes={
            DRIVER: {
                "type": "gpu",
                "uuid": "GPU-4cf8db2d-06c0-7d70-1a51-e59b25b2c16c",
                "productName": "NVIDIA A100-SXM4-80GB",
                "brand": "Nvidia",
                "architecture": "Ampere",
                "cudaComputeCapability": Version("8.0.0"),
                "driverVersion": Version("580.65.6"),
                "cudaDriverVersion": Version("13.0.0"),
            },
            "resource.kubernetes.io": {"pciBusID": "0000:07:00.0", "pcieRoot": "pci0000:00"},
        },
        capacity={DRIVER: {"memory": Fraction(80 * GI)}},
        node="node-1",
    )


def test_a_mig_device_as_the_driver_publishes_it() -> None:
    """k8s-dra-driver-gpu cmd/gpu-kubelet-plugin/deviceinfo.go MigDeviceInfo.GetDevice, mig.go."""
    raw = {"name": "gpu-0-mig-1g10gb-19-0", "attributes": MIG_ATTRIBUTES, "capacity": MIG_CAPACITY}
    (device,) = slice_devices(_slice(raw))
    assert device.attribute("profile") == "1g.10gb"
    assert device.attribute("gpu.nvidia.com/type") == "mig"
    assert device.capacity == {DRIVER: {"multiprocessors": 14, "memory": 9856 * 2**20, "memorySlice0": 1}}


@pytest.mark.parametrize(
    "version",
    ["resource.k8s.io/v1", "resource.k8s.io/v1beta2"],
    ids=["k8s.io/api resource/v1", "resource/v1beta2"],
)
def test_v1_and_v1beta2_share_the_device_layout(version: str) -> None:
    assert slice_devices(_slice(_gpu(), version=version)) == slice_devices(_slice(_gpu()))


def test_v1beta1_holds_the_device_under_basic() -> None:
    """k8s.io/api resource/v1beta1/types.go BasicDevice; the slice's allNodes and nodeName."""
    shared = _gpu(allowMultipleAllocations=True)
    old = _slice(_basic(shared), version="resource.k8s.io/v1beta1")
    assert slice_devices(old) == slice_devices(_slice(shared))
    assert slice_devices(old)[0].allow_multiple_allocations


@pytest.mark.parametrize(
    ("spec", "device", "node"),
    [
        ({}, {}, "node-1"),
        ({"nodeName": None, "allNodes": True}, {}, ""),
        ({"nodeName": None, "nodeSelector": {"nodeSelectorTerms": []}}, {}, ""),
        ({"nodeName": None, "perDeviceNodeSelection": True}, {"nodeName": "node-7"}, "node-7"),
    ],
    ids=["nodeName", "allNodes", "nodeSelector", "perDeviceNodeSelection"],
)
def test_the_node_is_the_devices_or_the_slices(
    spec: dict[str, Any], device: dict[str, Any], node: str
) -> None:
    """k8s.io/api resource/v1/types.go ResourceSliceSpec.nodeName, Device.nodeName."""
    (found,) = slice_devices(_slice(_gpu(**device), **spec))
    assert found.node == node


@pytest.mark.parametrize(
    ("attributes", "domain", "name", "value"),
    [
        ({"index": {"int": 3}}, DRIVER, "index", 3),
        ({"gpu.nvidia.com/index": {"int": 3}}, DRIVER, "index", 3),
        (
            {"resource.kubernetes.io/pcieRoot": {"string": "pci0000:00"}},
            "resource.kubernetes.io",
            "pcieRoot",
            "pci0000:00",
        ),
        ({"coherent": {"bool": False}}, DRIVER, "coherent", False),
        (
            {"driverVersion": {"version": "580.65.6-rc.1+build.7"}},
            DRIVER,
            "driverVersion",
            Version("580.65.6-rc.1+build.7"),
        ),
        ({"empty": {"string": ""}}, DRIVER, "empty", ""),
        (
            {"type": {"string": "bare"}, "gpu.nvidia.com/type": {"string": "qualified"}},
            DRIVER,
            "type",
            "qualified",
        ),
        (
            {"gpu.nvidia.com/type": {"string": "qualified"}, "type": {"string": "bare"}},
            DRIVER,
            "type",
            "qualified",
        ),
    ],
    ids=[
        "bare-name-is-the-drivers",
        "qualified-in-the-drivers-domain",
        "another-domain",
        "bool",
        "semver-with-prerelease-and-build",
        "empty-string",
        "qualified-wins-over-bare",
        "qualified-wins-in-either-order",
    ],
)
def test_attribute_names_resolve_as_cel_sees_them(
    attributes: dict[str, Any], domain: str, name: str, value: Any
) -> None:
    """k8s.io/dynamic-resource-allocation cel/compile.go DeviceMatches, parseQualifiedName."""
    (device,) = slice_devices(_slice({"name": "d", "attributes": attributes}))
    assert device.attributes[domain][name] == value
    assert type(device.attributes[domain][name]) is type(value)
    assert sum(map(len, device.attributes.values())) == 1


def test_list_attributes_are_checked_then_left_out() -> None:
    """k8s.io/api resource/v1/types.go DeviceAttribute.ints ... versions (alpha DRAListTypeAttributes)."""
    attributes = {"type": {"string": "gpu"}, "links": {"ints": [1, 2]}, "modes": {"strings": ["a"]}}
    (device,) = slice_devices(_slice({"name": "d", "attributes": attributes}))
    assert device.attributes == {DRIVER: {"type": "gpu"}}


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("80Gi", 80 * GI),
        ("81559Mi", 81559 * 2**20),
        ("1", 1),
        ("500m", Fraction(1, 2)),
        ("1e3", 1000),
        (7, 7),
    ],
    ids=["Gi", "Mi", "plain", "milli", "exponent", "json-number"],
)
def test_capacities_are_exact(text: Any, value: Fraction) -> None:
    """k8s.io/api resource/v1/types.go DeviceCapacity.value is a Quantity."""
    (device,) = slice_devices(_slice({"name": "d", "capacity": {"memory": {"value": text}}}))
    assert device.capacity_of("memory") == value


def test_consumable_capacity_reads_its_request_policy() -> None:
    """k8s.io/api resource/v1/types.go CapacityRequestPolicy (DRAConsumableCapacity)."""
    capacity = {
        "memory": {
            "value": "80Gi",
            "requestPolicy": {"default": "10Gi", "validRange": {"min": "1Gi", "step": "1Gi"}},
        },
        "cores": {"value": "100", "requestPolicy": {"default": "10", "validValues": ["10", "50", "100"]}},
        "bandwidth": {"value": "1"},
    }
    (device,) = slice_devices(_slice({"name": "d", "capacity": capacity, "allowMultipleAllocations": True}))
    assert device.allow_multiple_allocations
    assert device.request_policy("memory") == RequestPolicy(
        default=Fraction(10 * GI), minimum=Fraction(GI), step=Fraction(GI)
    )
    assert device.request_policy("cores") == RequestPolicy(
        default=Fraction(10), valid_values=tuple(map(Fraction, (10, 50, 100)))
    )
    assert device.request_policy("bandwidth") is None
    assert device.capacity_of("cores") == 100


def test_a_slice_of_shared_counters_only_has_no_devices() -> None:
    """k8s-dra-driver-gpu cmd/gpu-kubelet-plugin/driver.go generateSplitResourceSlices: one slice
    holds only sharedCounters, which do not describe a device."""
    counters = [{"name": "gpu-0-counter-set", "counters": {"memory": {"value": "80Gi"}}}]
    obj = _slice(sharedCounters=counters)
    del obj["spec"]["devices"]
    assert slice_devices(obj) == ()
    assert slice_devices(_slice()) == ()


def test_devices_keep_the_slices_order_and_the_input_is_left_alone() -> None:
    obj = _slice(*(_gpu(f"gpu-{i}") for i in range(3)))
    before = copy.deepcopy(obj)
    assert [d.name for d in slice_devices(obj)] == ["gpu-0", "gpu-1", "gpu-2"]
    assert obj == before


def _many(count: int) -> dict[str, Any]:
    return {f"a{i}": {"int": i} for i in range(count)}


def _with(**fields: Any) -> dict[str, Any]:
    return _slice({"name": "d", **fields})


# (slice, words the one-line reason holds): every rule from k8s.io/api resource/v1/types.go.
MALFORMED: dict[str, tuple[Any, str]] = {
    "not-an-object": ([], "not a ResourceSlice"),
    "other-kind": ({**_slice(), "kind": "ResourceClaim"}, "not a ResourceSlice"),
    "v1alpha3": (
        {**_slice(), "apiVersion": "resource.k8s.io/v1alpha3"},
        "apiVersion 'resource.k8s.io/v1alpha3'",
    ),
    "no-spec": ({**_slice(), "spec": None}, "spec is not an object"),
    "no-driver": (_slice(driver=None), "spec.driver is not a non-empty string"),
    "driver-not-dns": (_slice(driver="GPU_Driver"), "spec.driver 'GPU_Driver' is not a valid name"),
    "driver-too-long": (_slice(driver="a" * 64), "longer than 63"),
    "no-pool": (_slice(pool=None), "spec.pool is not an object"),
    "pool-without-name": (_slice(pool={"generation": 1}), "spec.pool.name"),
    "node-not-a-string": (_slice(nodeName=7), "spec.nodeName is not a string"),
    "devices-not-a-list": (_slice(devices={"gpu-0": {}}), "spec.devices is not a list"),
    "ResourceSliceMaxDevices": (
        _slice(*(_gpu(f"gpu-{i}") for i in range(MAX_DEVICES + 1))),
        "129 devices, more than the API's 128",
    ),
    "device-not-an-object": (_slice("gpu-0"), "spec.devices[0] is not an object"),
    "device-without-name": (_slice({"attributes": {}}), "spec.devices[0].name"),
    "device-name-not-dns": (_with(name="GPU 0"), "is not a valid name"),
    "basic-in-v1": (_slice(_basic(_gpu())), "basic: read only in v1beta1"),
    "basic-not-an-object": (
        _slice({"name": "d", "basic": []}, version="resource.k8s.io/v1beta1"),
        "basic: read only in v1beta1",
    ),
    "attributes-not-an-object": (_with(attributes=[]), "attributes is not an object"),
    "ResourceSliceMaxAttributesAndCapacitiesPerDevice": (
        _with(
            attributes=_many(30), capacity={"c0": {"value": "1"}, "c1": {"value": "1"}, "c2": {"value": "1"}}
        ),
        f"33 attributes and capacities, more than the API's {MAX_ATTRIBUTES_AND_CAPACITIES}",
    ),
    "ResourceSliceMaxAttributeValuesPerDevice": (
        _with(attributes={"a": {"ints": list(range(30))}, "b": {"ints": list(range(19))}}),
        "more than the API's 48 attribute values",
    ),
    "two-values": (_with(attributes={"a": {"int": 1, "string": "x"}}), "must hold exactly one of"),
    "no-value": (_with(attributes={"a": {}}), "must hold exactly one of"),
    "unknown-value-kind": (_with(attributes={"a": {"float": 1.5}}), "must hold exactly one of"),
    "int-beyond-int64": (_with(attributes={"a": {"int": 2**63}}), "is not a 64-bit integer"),
    "bool-as-int": (_with(attributes={"a": {"int": True}}), "is not a 64-bit integer"),
    "int-as-bool": (_with(attributes={"a": {"bool": 1}}), "is not a boolean"),
    "DeviceAttributeMaxValueLength": (_with(attributes={"a": {"string": "x" * 65}}), "longer than 64"),
    "version-not-semver": (_with(attributes={"a": {"version": "8.0"}}), "'8.0' is not a semantic version"),
    "empty-list": (_with(attributes={"a": {"strings": []}}), "is not a non-empty list"),
    "bad-list-element": (_with(attributes={"a": {"versions": ["1.0.0", "x"]}}), "is not a semantic version"),
    "name-not-c-identifier": (
        _with(attributes={"gpu-type": {"string": "x"}}),
        "'gpu-type' is not a valid attribute",
    ),
    "DeviceMaxIDLength": (_with(attributes={"a" * 33: {"string": "x"}}), "is not a valid attribute"),
    "domain-not-dns": (_with(attributes={"GPU.com/type": {"string": "x"}}), "has an invalid domain"),
    "two-slashes": (_with(attributes={"a.com/b/c": {"string": "x"}}), "is not a valid attribute"),
    "capacity-without-value": (
        _with(capacity={"memory": {}}),
        "capacity['memory'].value: None is not a quantity",
    ),
    "capacity-not-a-quantity": (_with(capacity={"memory": {"value": "80 GiB"}}), "is not a valid quantity"),
    "capacity-out-of-range": (_with(capacity={"memory": {"value": "1e999"}}), "is out of range"),
    "allow-multiple-not-a-bool": (
        _with(allowMultipleAllocations="yes"),
        "allowMultipleAllocations is not a boolean",
    ),
    "request-policy-without-sharing": (
        _with(capacity={"memory": {"value": "1", "requestPolicy": {"default": "1"}}}),
        "does not allowMultipleAllocations",
    ),
    "too-many-valid-values": (
        _with(
            allowMultipleAllocations=True,
            capacity={"m": {"value": "1", "requestPolicy": {"validValues": ["1"] * 11}}},
        ),
        "validValues is not a list of at most 10",
    ),
}


@pytest.mark.parametrize(
    ("obj", "reason"), MALFORMED.values(), ids=[f"k8s.io/api resource types.go {k}" for k in MALFORMED]
)
def test_a_malformed_slice_is_refused_in_one_line(obj: Any, reason: str) -> None:
    with pytest.raises(SliceError) as caught:
        slice_devices(obj)
    message = str(caught.value)
    assert reason in message
    assert "\n" not in message and len(message) < 300
    if isinstance(obj, dict) and isinstance(obj.get("metadata"), dict):
        assert message.startswith("ResourceSlice 'node-1-gpu.nvidia.com-x7k2p': ")


def test_the_reason_names_the_device_and_part() -> None:
    obj = _slice(_gpu(), _gpu("gpu-1", attributes={"index": {"int": "1"}}))
    with pytest.raises(SliceError, match=r"spec\.devices\[1\] \(gpu-1\)\.attributes\['index'\]\.int"):
        slice_devices(obj)


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=6),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3),
    max_leaves=12,
)
KEYS = st.sampled_from(
    [
        "int",
        "bool",
        "string",
        "version",
        "ints",
        "value",
        "requestPolicy",
        "default",
        "type",
        "gpu.nvidia.com/x",
    ]
)
FIELD = st.dictionaries(KEYS, JSON | st.dictionaries(KEYS, JSON, max_size=2), max_size=3)
DEVICES = st.fixed_dictionaries(
    {"name": st.sampled_from(["gpu-0", "Bad", ""]) | JSON},
    optional={
        "attributes": st.dictionaries(KEYS, FIELD, max_size=3) | JSON,
        "capacity": st.dictionaries(KEYS, FIELD, max_size=3) | JSON,
        "allowMultipleAllocations": JSON,
        "basic": JSON
        | st.dictionaries(
            st.sampled_from(["attributes", "capacity"]), st.dictionaries(KEYS, FIELD), max_size=2
        ),
    },
)
SLICES = st.builds(
    lambda version, devices, node: _slice(*devices, version=version, nodeName=node),
    st.sampled_from(["resource.k8s.io/v1", "resource.k8s.io/v1beta1", "resource.k8s.io/v1beta2"]) | JSON,
    st.lists(DEVICES | JSON, max_size=3),
    JSON,
)


@given(SLICES | JSON)
def test_any_input_gives_devices_or_a_slice_error(obj: Any) -> None:
    result: tuple[Device, ...] | SliceError
    try:
        result = slice_devices(obj)
    except SliceError as e:
        result = e
    if isinstance(result, SliceError):
        assert "\n" not in str(result)
    else:
        assert all(isinstance(d, Device) and d.driver == DRIVER for d in result)
