"""Older resource.k8s.io versions read as v1, the one version the DRA modules understand. Pure.

Kubernetes converts between the served versions of a DRA object on the way in and out of
storage (k8s.io/dynamic-resource-allocation api/v1beta1/conversion.go, api/v1beta2/conversion.go).
The same conversion, done here on decoded JSON, lets an inventory file or a cluster that serves
only an older version be read by code written for v1:

- `v1beta2` has v1's layout: only `apiVersion` changes.
- `v1beta1` device requests hold their fields flat (`deviceClassName`, `selectors`, ...); v1
  moves them under `exactly`, created only when one of them is set in Go's sense (a non-empty
  string, a non-zero count, any list or object that is not null), while `firstAvailable` stays.
- `v1beta1` ResourceSlice devices keep attributes, capacity and the rest under `basic`; v1
  holds them on the device itself. The slice's `nodeName: ""` and `allNodes: false` are unset.

Empty lists and maps are left out as a v1 object serialised by the API server leaves them out
(`omitempty`). Anything malformed is carried over as it stands: validation comes later.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

GROUP = "resource.k8s.io"
V1 = f"{GROUP}/v1"
V1BETA1 = f"{GROUP}/v1beta1"
V1BETA2 = f"{GROUP}/v1beta2"
KINDS = frozenset({"ResourceClaim", "ResourceClaimTemplate", "DeviceClass", "ResourceSlice"})

# v1beta1 DeviceRequest fields that v1 holds in ExactDeviceRequest, with the test for "set"
# (api/v1beta1/conversion.go, hasAnyMainRequestFieldsSet): Go reads an absent or null field as
# its zero value, so "" and 0 are unset, while an empty list or object is not nil.


def _not_null(value: Any) -> bool:
    return value is not None


def _not_zero(value: Any) -> bool:
    return value is not None and value != "" and value != 0


EXACT_FIELDS: Mapping[str, Callable[[Any], bool]] = {
    "deviceClassName": _not_zero,
    "selectors": _not_null,
    "allocationMode": _not_zero,
    "count": _not_zero,
    "adminAccess": _not_null,
    "tolerations": _not_null,
    "capacity": _not_null,
}
# Device fields that are lists or maps in v1 (`omitempty`): empty, they are not written.
_DEVICE_COLLECTIONS = frozenset(
    {
        "attributes",
        "capacity",
        "consumesCounters",
        "taints",
        "bindingConditions",
        "bindingFailureConditions",
        "nodeAllocatableResources",
        "nodeAllocatableResourceMappings",
    }
)


def as_v1(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    """`obj` as resource.k8s.io/v1 holds it; v1 objects and other kinds are returned as they are.

    Never raises and never changes `obj`: parts that change are new dicts, the rest is shared."""
    kind = obj.get("kind") if isinstance(obj, Mapping) else None
    if not isinstance(kind, str) or kind not in KINDS:
        return obj
    version = obj.get("apiVersion")
    if version == V1BETA2:
        return {**obj, "apiVersion": V1}
    if version != V1BETA1:
        return obj
    converted: dict[str, Any] = {**obj, "apiVersion": V1}
    spec = obj.get("spec")
    if isinstance(spec, Mapping):
        converted["spec"] = _SPEC_CONVERSIONS[kind](spec)
    return converted


def _claim_spec(spec: Mapping[str, Any]) -> Mapping[str, Any]:
    devices = spec.get("devices")
    if not isinstance(devices, Mapping) or not isinstance(devices.get("requests"), list):
        return spec
    requests = devices["requests"]
    return {**spec, "devices": {**devices, "requests": [_request(each) for each in requests]}}


def _template_spec(spec: Mapping[str, Any]) -> Mapping[str, Any]:
    claim_spec = spec.get("spec")
    if not isinstance(claim_spec, Mapping):
        return spec
    return {**spec, "spec": _claim_spec(claim_spec)}


def _request(request: Any) -> Any:
    """A v1beta1 DeviceRequest as v1's: the flat fields move under `exactly`."""
    if not isinstance(request, Mapping):
        return request
    converted = {key: value for key, value in request.items() if key not in EXACT_FIELDS}
    if any(is_set(request.get(key)) for key, is_set in EXACT_FIELDS.items()):
        converted["exactly"] = _exactly(request)
    return converted


def _exactly(request: Mapping[str, Any]) -> dict[str, Any]:
    deviceclass = request.get("deviceClassName")
    exactly: dict[str, Any] = {"deviceClassName": "" if deviceclass is None else deviceclass}
    for key in ("selectors", "allocationMode", "count", "adminAccess", "tolerations", "capacity"):
        value = request.get(key)
        if EXACT_FIELDS[key](value) and value != []:
            exactly[key] = value
    return exactly


def _slice_spec(spec: Mapping[str, Any]) -> Mapping[str, Any]:
    """v1 makes `nodeName` and `allNodes` optional: their zero values become unset."""
    converted = {key: value for key, value in spec.items() if key not in ("nodeName", "allNodes")}
    if spec.get("nodeName") not in (None, ""):
        converted["nodeName"] = spec["nodeName"]
    if spec.get("allNodes") not in (None, False):
        converted["allNodes"] = spec["allNodes"]
    devices = spec.get("devices")
    if isinstance(devices, list):
        converted["devices"] = [_device(each) for each in devices]
    return converted


def _device(device: Any) -> Any:
    """A v1beta1 Device as v1's: what `basic` held moves onto the device (and wins over strays)."""
    basic = device.get("basic") if isinstance(device, Mapping) else None
    if not isinstance(device, Mapping) or not isinstance(basic, Mapping | None):
        return device
    basic = basic or {}
    converted = {key: value for key, value in device.items() if key != "basic"}
    for key, value in basic.items():
        if value is None or (key in _DEVICE_COLLECTIONS and value in ([], {})):
            converted.pop(key, None)
        else:
            converted[key] = value
    return converted


_SPEC_CONVERSIONS: Mapping[str, Callable[[Mapping[str, Any]], Mapping[str, Any]]] = {
    "ResourceClaim": _claim_spec,
    "ResourceClaimTemplate": _template_spec,
    "DeviceClass": lambda spec: spec,
    "ResourceSlice": _slice_spec,
}
