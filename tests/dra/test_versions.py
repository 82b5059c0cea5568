"""Older resource.k8s.io versions read as v1 (webhook.dra.versions).

Rules from k8s.io/dynamic-resource-allocation api/v1beta1/conversion.go (DeviceRequest,
ResourceSliceSpec, Device) and api/v1beta2/conversion.go (no manual conversion: v1's layout),
with field meanings from k8s.io/api resource/v1beta1/types.go.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st

from webhook.dra.versions import KINDS, V1, V1BETA1, V1BETA2, as_v1

DEMOS = Path(__file__).parent / "data" / "quickstart_claims.yaml"


def _demo_documents() -> dict[str, dict[str, Any]]:
    """Each excerpt by the upstream path its comment names."""
    found: dict[str, dict[str, Any]] = {}
    for text in DEMOS.read_text().split("\n---\n")[1:]:
        path = text.splitlines()[0].removeprefix("# ")
        found[path] = yaml.safe_load(text)
    return found


DEMO = _demo_documents()
QUICKSTART = "demo/specs/quickstart"
PAIRED = sorted(
    path.removeprefix(f"{QUICKSTART}/v1beta1/")
    for path, doc in DEMO.items()
    if path.startswith(f"{QUICKSTART}/v1beta1/") and doc["apiVersion"] == V1BETA1
)


def _blank_expressions(obj: Any) -> Any:
    """CEL expressions with runs of whitespace collapsed: the v1beta1 gpu-test6 indents its
    multi-line selector one space deeper than the v1 one, which CEL does not see."""
    if isinstance(obj, dict):
        return {
            key: " ".join(value.split()) if key == "expression" else _blank_expressions(value)
            for key, value in obj.items()
        }
    if isinstance(obj, list):
        return [_blank_expressions(each) for each in obj]
    return obj


def test_the_demo_data_holds_both_versions_of_each_demo() -> None:
    assert len(PAIRED) == 8
    assert all(f"{QUICKSTART}/v1/{name}" in DEMO for name in PAIRED)


@pytest.mark.parametrize("name", PAIRED, ids=[f"k8s-dra-driver-gpu {QUICKSTART}/v1beta1/{n}" for n in PAIRED])
def test_a_v1beta1_demo_reads_as_its_v1_demo(name: str) -> None:
    old, new = DEMO[f"{QUICKSTART}/v1beta1/{name}"], DEMO[f"{QUICKSTART}/v1/{name}"]
    assert _blank_expressions(as_v1(old)) == _blank_expressions(new)


def test_the_vfio_demo_filed_under_v1beta1_is_v1alpha3_and_not_converted() -> None:
    """k8s-dra-driver-gpu demo/specs/quickstart/v1beta1/gpu-test-vfiopci.yaml says v1alpha3."""
    old = DEMO[f"{QUICKSTART}/v1beta1/gpu-test-vfiopci.yaml"]
    assert as_v1(old) is old


@pytest.mark.parametrize(
    "path", sorted(p for p in DEMO if "/v1/" in p), ids=lambda p: f"k8s-dra-driver-gpu {p}"
)
def test_a_v1_object_is_returned_itself(path: str) -> None:
    assert as_v1(DEMO[path]) is DEMO[path]


@pytest.mark.parametrize(
    "obj",
    [
        {
            "apiVersion": V1BETA1,
            "kind": "Pod",
            "spec": {"devices": {"requests": [{"name": "a", "count": 2}]}},
        },
        {"apiVersion": "v1", "kind": "ConfigMap"},
        {"apiVersion": "resource.k8s.io/v1alpha3", "kind": "ResourceClaim", "spec": {}},
        {"apiVersion": V1BETA1, "kind": ["ResourceClaim"]},
        {"apiVersion": V1BETA1},
        {},
    ],
    ids=["other-kind", "core-kind", "v1alpha3", "kind-not-a-string", "no-kind", "empty"],
)
def test_other_objects_are_returned_themselves(obj: dict[str, Any]) -> None:
    assert as_v1(obj) is obj


def _claim(version: str, *requests: Any) -> dict[str, Any]:
    return {
        "apiVersion": version,
        "kind": "ResourceClaim",
        "metadata": {"name": "c", "namespace": "ns"},
        "spec": {"devices": {"requests": list(requests), "config": [{"requests": ["gpu"]}]}},
    }


def _requests(obj: Any) -> Any:
    return obj["spec"]["devices"]["requests"]


def test_v1beta2_has_v1s_layout_only_the_version_changes() -> None:
    """k8s-dra-driver-gpu vendor/k8s.io/api/resource/v1beta2/types.go; api/v1beta2/conversion.go is empty."""
    request = {"name": "gpu", "exactly": {"deviceClassName": "gpu.nvidia.com", "count": 2}}
    old = _claim(V1BETA2, request)
    assert as_v1(old) == {**old, "apiVersion": V1}
    assert old["apiVersion"] == V1BETA2


SELECTOR = {"cel": {"expression": "device.attributes['gpu.nvidia.com'].profile == '1g.10gb'"}}
TOLERATION = {"key": "k", "operator": "Exists", "effect": "NoSchedule"}
SUB = {"name": "big", "deviceClassName": "gpu.nvidia.com", "count": 1}

# (v1beta1 request, v1 request): api/v1beta1/conversion.go Convert_v1beta1_DeviceRequest_To_v1_DeviceRequest.
REQUESTS = {
    "class-only": (
        {"name": "gpu", "deviceClassName": "gpu.nvidia.com"},
        {"name": "gpu", "exactly": {"deviceClassName": "gpu.nvidia.com"}},
    ),
    "every-flat-field": (
        {
            "name": "gpu",
            "deviceClassName": "mig.nvidia.com",
            "selectors": [SELECTOR],
            "allocationMode": "ExactCount",
            "count": 2,
            "adminAccess": True,
            "tolerations": [TOLERATION],
            "capacity": {"requests": {"memory": "10Gi"}},
        },
        {
            "name": "gpu",
            "exactly": {
                "deviceClassName": "mig.nvidia.com",
                "selectors": [SELECTOR],
                "allocationMode": "ExactCount",
                "count": 2,
                "adminAccess": True,
                "tolerations": [TOLERATION],
                "capacity": {"requests": {"memory": "10Gi"}},
            },
        },
    ),
    "all-mode": (
        {"name": "all", "deviceClassName": "gpu.nvidia.com", "allocationMode": "All"},
        {"name": "all", "exactly": {"deviceClassName": "gpu.nvidia.com", "allocationMode": "All"}},
    ),
    "first-available-stays": (
        {"name": "any", "firstAvailable": [SUB]},
        {"name": "any", "firstAvailable": [SUB]},
    ),
    "name-only-gets-no-exactly": ({"name": "x"}, {"name": "x"}),
    "zero-count-is-unset": ({"name": "x", "count": 0}, {"name": "x"}),
    "empty-class-is-unset": ({"name": "x", "deviceClassName": ""}, {"name": "x"}),
    "nulls-are-unset": (
        {"name": "x", "selectors": None, "adminAccess": None, "capacity": None},
        {"name": "x"},
    ),
    "zero-count-dropped-beside-a-class": (
        {"name": "x", "deviceClassName": "gpu.nvidia.com", "count": 0},
        {"name": "x", "exactly": {"deviceClassName": "gpu.nvidia.com"}},
    ),
    "admin-access-false-is-set": (
        {"name": "x", "adminAccess": False},
        {"name": "x", "exactly": {"deviceClassName": "", "adminAccess": False}},
    ),
    "empty-selectors-are-set-not-written": (
        {"name": "x", "selectors": []},
        {"name": "x", "exactly": {"deviceClassName": ""}},
    ),
    "empty-tolerations-are-set-not-written": (
        {"name": "x", "tolerations": []},
        {"name": "x", "exactly": {"deviceClassName": ""}},
    ),
    "empty-capacity-is-kept": (
        {"name": "x", "capacity": {}},
        {"name": "x", "exactly": {"deviceClassName": "", "capacity": {}}},
    ),
    "flat-fields-beside-first-available": (
        {"name": "both", "deviceClassName": "gpu.nvidia.com", "firstAvailable": [SUB]},
        {"name": "both", "exactly": {"deviceClassName": "gpu.nvidia.com"}, "firstAvailable": [SUB]},
    ),
    "malformed-values-carried-over": (
        {"name": "x", "deviceClassName": 7, "count": "two"},
        {"name": "x", "exactly": {"deviceClassName": 7, "count": "two"}},
    ),
}


@pytest.mark.parametrize(
    ("old", "new"), REQUESTS.values(), ids=[f"api/v1beta1/conversion.go {k}" for k in REQUESTS]
)
def test_a_v1beta1_request_moves_its_flat_fields_under_exactly(
    old: dict[str, Any], new: dict[str, Any]
) -> None:
    claim = _claim(V1BETA1, old)
    template = {"apiVersion": V1BETA1, "kind": "ResourceClaimTemplate", "spec": {"spec": claim["spec"]}}
    assert _requests(as_v1(claim)) == [new]
    assert as_v1(template)["spec"]["spec"]["devices"]["requests"] == [new]
    assert as_v1(claim)["spec"]["devices"]["config"] == claim["spec"]["devices"]["config"]


def test_conversion_leaves_its_input_alone() -> None:
    claim = _claim(V1BETA1, *(old for old, _ in REQUESTS.values()))
    before = copy.deepcopy(claim)
    as_v1(claim)
    assert claim == before


def test_a_device_class_changes_only_its_version() -> None:
    """api/v1beta1 zz_generated.conversion.go: DeviceClassSpec is converted field for field."""
    spec = {
        "selectors": [{"cel": {"expression": "device.driver == 'gpu.nvidia.com'"}}],
        "extendedResourceName": "example.com/gpu",
    }
    old = {"apiVersion": V1BETA1, "kind": "DeviceClass", "metadata": {"name": "gpu.nvidia.com"}, "spec": spec}
    assert as_v1(old) == {**old, "apiVersion": V1}


def _slice(version: str, **spec: Any) -> dict[str, Any]:
    pool = {"name": "node-1", "generation": 1, "resourceSliceCount": 1}
    return {
        "apiVersion": version,
        "kind": "ResourceSlice",
        "metadata": {"name": "s"},
        "spec": {"driver": "gpu.nvidia.com", "pool": pool, **spec},
    }


ATTRIBUTES = {"type": {"string": "gpu"}, "index": {"int": 0}}
CAPACITY = {"memory": {"value": "80Gi"}}
# (v1beta1 device, v1 device): api/v1beta1/conversion.go Convert_v1beta1_Device_To_v1_Device.
DEVICES = {
    "basic-flattened": (
        {"name": "gpu-0", "basic": {"attributes": ATTRIBUTES, "capacity": CAPACITY}},
        {"name": "gpu-0", "attributes": ATTRIBUTES, "capacity": CAPACITY},
    ),
    "every-basic-field": (
        {
            "name": "gpu-0",
            "basic": {
                "attributes": ATTRIBUTES,
                "capacity": CAPACITY,
                "consumesCounters": [{"counterSet": "gpu-0", "counters": {"memory": {"value": "80Gi"}}}],
                "nodeName": "node-1",
                "taints": [{"key": "k", "effect": "NoSchedule"}],
                "bindsToNode": True,
                "bindingConditions": ["ready"],
                "bindingFailureConditions": ["failed"],
                "allowMultipleAllocations": True,
            },
        },
        {
            "name": "gpu-0",
            "attributes": ATTRIBUTES,
            "capacity": CAPACITY,
            "consumesCounters": [{"counterSet": "gpu-0", "counters": {"memory": {"value": "80Gi"}}}],
            "nodeName": "node-1",
            "taints": [{"key": "k", "effect": "NoSchedule"}],
            "bindsToNode": True,
            "bindingConditions": ["ready"],
            "bindingFailureConditions": ["failed"],
            "allowMultipleAllocations": True,
        },
    ),
    "empty-maps-and-lists-unset": (
        {"name": "d", "basic": {"attributes": {}, "capacity": {}, "taints": [], "consumesCounters": []}},
        {"name": "d"},
    ),
    "pointer-false-kept": (
        {"name": "d", "basic": {"allowMultipleAllocations": False}},
        {"name": "d", "allowMultipleAllocations": False},
    ),
    "no-basic": ({"name": "d"}, {"name": "d"}),
    "null-basic": ({"name": "d", "basic": None}, {"name": "d"}),
    "basic-not-an-object-left-for-validation": ({"name": "d", "basic": "x"}, {"name": "d", "basic": "x"}),
}


@pytest.mark.parametrize(
    ("old", "new"), DEVICES.values(), ids=[f"api/v1beta1/conversion.go {k}" for k in DEVICES]
)
def test_a_v1beta1_device_holds_its_basic_fields_itself(old: dict[str, Any], new: dict[str, Any]) -> None:
    assert as_v1(_slice(V1BETA1, nodeName="node-1", devices=[old])) == _slice(
        V1, nodeName="node-1", devices=[new]
    )


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ({"nodeName": "node-1"}, {"nodeName": "node-1"}),
        ({"nodeName": ""}, {}),
        ({"allNodes": True}, {"allNodes": True}),
        ({"allNodes": False, "nodeName": ""}, {}),
        ({"nodeSelector": {"nodeSelectorTerms": []}}, {"nodeSelector": {"nodeSelectorTerms": []}}),
    ],
    ids=["node-name", "empty-node-name-unset", "all-nodes", "all-nodes-false-unset", "node-selector"],
)
def test_a_v1beta1_slice_leaves_zero_node_fields_unset(old: dict[str, Any], new: dict[str, Any]) -> None:
    """api/v1beta1/conversion.go Convert_v1beta1_ResourceSliceSpec_To_v1_ResourceSliceSpec."""
    assert as_v1(_slice(V1BETA1, **old)) == _slice(V1, **new)


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=20,
)
FIELDS = st.sampled_from(
    [
        "name",
        "deviceClassName",
        "selectors",
        "count",
        "adminAccess",
        "capacity",
        "basic",
        "attributes",
        "nodeName",
        "allNodes",
        "exactly",
    ]
)
SHAPED = st.recursive(
    JSON,
    lambda inner: st.dictionaries(FIELDS, inner, max_size=5) | st.lists(inner, max_size=3),
    max_leaves=30,
)
OBJECTS = st.fixed_dictionaries(
    {
        "apiVersion": st.sampled_from([V1, V1BETA1, V1BETA2, "resource.k8s.io/v1alpha3", "v1"]) | JSON,
        "kind": st.sampled_from(sorted(KINDS)) | JSON,
        "spec": st.fixed_dictionaries(
            {
                "devices": st.fixed_dictionaries({"requests": st.lists(SHAPED, max_size=3)}) | SHAPED,
                "spec": SHAPED,
                "nodeName": JSON,
            }
        )
        | SHAPED,
    }
)


@given(OBJECTS | JSON)
def test_as_v1_never_raises_and_is_idempotent(obj: Any) -> None:
    once = as_v1(obj)
    assert as_v1(once) == once
    if isinstance(once, dict) and isinstance(once.get("kind"), str) and once["kind"] in KINDS:
        assert once.get("apiVersion") not in (V1BETA1, V1BETA2)


@given(OBJECTS)
def test_a_converted_v1beta1_request_has_no_flat_field_left(obj: Any) -> None:
    once = as_v1(obj)
    if obj["apiVersion"] != V1BETA1 or obj["kind"] not in ("ResourceClaim",):
        return
    requests = (
        once["spec"].get("devices", {}).get("requests")
        if isinstance(once["spec"], dict) and isinstance(once["spec"].get("devices"), dict)
        else None
    )
    for request in requests if isinstance(requests, list) else []:
        if isinstance(request, dict):
            assert not {"deviceClassName", "selectors", "count", "adminAccess", "capacity"} & set(request)
