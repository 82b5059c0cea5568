"""The devices a ResourceSlice publishes, as CEL selectors see them. Pure.

A DRA driver publishes its devices in ResourceSlices (resource.k8s.io v1, v1beta2 or v1beta1;
older versions are read through `versions.as_v1`). A slice comes from the cluster or from a
user's inventory file, so it is checked as kube-apiserver would before anything is believed,
within the API's own bounds (k8s.io/api resource/v1/types.go): at most
`ResourceSliceMaxDevices` devices, each with at most
`ResourceSliceMaxAttributesAndCapacitiesPerDevice` attributes and capacities together. A slice
that breaks a rule is refused whole with a one-line `SliceError`, as the API server refuses the
whole object: the caller logs it and keeps watching.

Read: the driver, pool and node; each device's name, attributes (`int`, `bool`, `string`,
`version`), capacities (exact quantities, with their `requestPolicy`) and
`allowMultipleAllocations`; a device's own `nodeName` (`perDeviceNodeSelection`) over the slice's.
Left out, on purpose: list-valued attributes (`ints`, `bools`, `strings`, `versions`, alpha
`DRAListTypeAttributes`: checked, then dropped, so a selector on one finds nothing), shared
counters and `consumesCounters` (they limit which devices can be allocated together, not what
one device is), taints, binding conditions and node-allocatable mappings.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from fractions import Fraction
from typing import Any

from webhook import quantity
from webhook.dra.published import Attribute, Device, RequestPolicy, Version, split_name
from webhook.dra.versions import V1, V1BETA1, V1BETA2, as_v1

VERSIONS = frozenset({V1, V1BETA1, V1BETA2})
# k8s.io/api resource/v1/types.go
MAX_DEVICES = 128  # ResourceSliceMaxDevices
MAX_ATTRIBUTES_AND_CAPACITIES = 32  # ResourceSliceMaxAttributesAndCapacitiesPerDevice
MAX_ATTRIBUTE_VALUES = 48  # ResourceSliceMaxAttributeValuesPerDevice
MAX_VALUE_LENGTH = 64  # DeviceAttributeMaxValueLength
MAX_DRIVER_LENGTH = 63  # DriverNameMaxLength, DeviceMaxDomainLength
MAX_ID_LENGTH = 32  # DeviceMaxIDLength
MAX_POOL_LENGTH = 253  # PoolNameMaxLength
MAX_VALID_VALUES = 10  # CapacityRequestPolicy.validValues
INT64 = range(-(2**63), 2**63)

_DNS_LABEL = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_DNS_SUBDOMAIN = re.compile(rf"{_DNS_LABEL}(\.{_DNS_LABEL})*")
_DEVICE_NAME = re.compile(_DNS_LABEL)
_C_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
# semver.org 2.0.0, as the API server checks a version attribute.
_NUMBER = r"(0|[1-9][0-9]*)"
_IDENT = r"(0|[1-9][0-9]*|[0-9]*[A-Za-z-][0-9A-Za-z-]*)"
_SEMVER = re.compile(
    rf"{_NUMBER}\.{_NUMBER}\.{_NUMBER}(-{_IDENT}(\.{_IDENT})*)?(\+[0-9A-Za-z-]+(\.[0-9A-Za-z-]+)*)?"
)
_SCALARS = ("int", "bool", "string", "version")
_LISTS = ("ints", "bools", "strings", "versions")


class SliceError(ValueError):
    """A ResourceSlice that cannot be read; the message is one line naming the slice and the part."""


def slice_devices(obj: Mapping[str, Any]) -> tuple[Device, ...]:
    """Every device `obj` publishes, in the slice's order; SliceError if any part is malformed."""
    label = _label(obj)
    try:
        return _devices(obj)
    except SliceError as e:
        raise SliceError(f"{label}: {e}") from None


def _label(obj: Any) -> str:
    metadata = obj.get("metadata") if isinstance(obj, Mapping) else None
    name = metadata.get("name") if isinstance(metadata, Mapping) else None
    return f"ResourceSlice {_show(name)}" if isinstance(name, str) else "ResourceSlice"


def _devices(obj: Any) -> tuple[Device, ...]:
    if not isinstance(obj, Mapping) or obj.get("kind") != "ResourceSlice":
        raise SliceError("not a ResourceSlice")
    if not isinstance(obj.get("apiVersion"), str) or obj["apiVersion"] not in VERSIONS:
        raise SliceError(
            f"apiVersion {_show(obj.get('apiVersion'))} is not one of {', '.join(sorted(VERSIONS))}"
        )
    spec = _mapping(as_v1(obj).get("spec"), "spec")
    driver = _name(spec.get("driver"), "spec.driver", _DNS_SUBDOMAIN, MAX_DRIVER_LENGTH)
    pool = _mapping(spec.get("pool"), "spec.pool")
    pool_name = _text(pool.get("name"), "spec.pool.name", MAX_POOL_LENGTH)
    node = _optional_text(spec.get("nodeName"), "spec.nodeName", MAX_POOL_LENGTH)
    devices = spec.get("devices")
    if devices is None:
        return ()
    if not isinstance(devices, list):
        raise SliceError("spec.devices is not a list")
    if len(devices) > MAX_DEVICES:
        raise SliceError(f"spec.devices has {len(devices)} devices, more than the API's {MAX_DEVICES}")
    return tuple(
        _device(each, f"spec.devices[{i}]", driver, pool_name, node) for i, each in enumerate(devices)
    )


def _device(raw: Any, where: str, driver: str, pool: str, node: str) -> Device:
    device = _mapping(raw, where)
    name = _name(device.get("name"), f"{where}.name", _DEVICE_NAME, MAX_DRIVER_LENGTH)
    where = f"{where} ({name})"
    if "basic" in device:
        raise SliceError(f"{where}.basic: read only in v1beta1, and only as an object")
    attributes = _optional_mapping(device.get("attributes"), f"{where}.attributes")
    capacity = _optional_mapping(device.get("capacity"), f"{where}.capacity")
    if len(attributes) + len(capacity) > MAX_ATTRIBUTES_AND_CAPACITIES:
        raise SliceError(
            f"{where}: {len(attributes) + len(capacity)} attributes and capacities, "
            f"more than the API's {MAX_ATTRIBUTES_AND_CAPACITIES}"
        )
    shared = device.get("allowMultipleAllocations")
    if shared is not None and not isinstance(shared, bool):
        raise SliceError(f"{where}.allowMultipleAllocations is not a boolean")
    amounts, policies = _capacities(capacity, f"{where}.capacity", driver)
    if policies and not shared:
        raise SliceError(
            f"{where}: a capacity has a requestPolicy but the device does not allowMultipleAllocations"
        )
    own_node = _optional_text(device.get("nodeName"), f"{where}.nodeName", MAX_POOL_LENGTH)
    return Device(
        driver=driver,
        pool=pool,
        name=name,
        attributes=_attributes(attributes, f"{where}.attributes", driver),
        capacity=amounts,
        allow_multiple_allocations=bool(shared),
        node=own_node or node,
        request_policies=policies,
    )


def _attributes(raw: Mapping[Any, Any], where: str, driver: str) -> dict[str, dict[str, Attribute]]:
    found: dict[str, dict[str, Attribute]] = {}
    values = 0
    for qualified, entry in _by_resolved_name(raw, where, driver):
        name = f"{where}[{_show(qualified)}]"
        kind, value = _one_value(entry, name)
        values += len(value) if isinstance(value, list) else 1
        if values > MAX_ATTRIBUTE_VALUES:
            raise SliceError(f"{where}: more than the API's {MAX_ATTRIBUTE_VALUES} attribute values")
        checked = _attribute(kind, value, name)
        if checked is not None:
            domain, short = split_name(qualified, driver)
            found.setdefault(domain, {})[short] = checked
    return found


def _one_value(entry: Any, where: str) -> tuple[str, Any]:
    held = [(kind, value) for kind, value in _mapping(entry, where).items() if value is not None]
    if len(held) != 1 or held[0][0] not in _SCALARS + _LISTS:
        raise SliceError(f"{where} must hold exactly one of {', '.join(_SCALARS + _LISTS)}")
    return held[0]


def _attribute(kind: str, value: Any, where: str) -> Attribute | None:
    """The scalar value; None for a list-valued attribute, once its values are checked."""
    if kind in _LISTS:
        if not isinstance(value, list) or not value:
            raise SliceError(f"{where}.{kind} is not a non-empty list")
        for each in value:
            _attribute(kind[:-1], each, f"{where}.{kind}")
        return None
    if kind == "int":
        if type(value) is not int or value not in INT64:
            raise SliceError(f"{where}.int is not a 64-bit integer")
        return value
    if kind == "bool":
        if not isinstance(value, bool):
            raise SliceError(f"{where}.bool is not a boolean")
        return value
    text = _text(value, f"{where}.{kind}", MAX_VALUE_LENGTH, empty=True)
    if kind == "version":
        if not _SEMVER.fullmatch(text):
            raise SliceError(f"{where}.version {_show(text)} is not a semantic version")
        return Version(text)
    return text


def _capacities(
    raw: Mapping[Any, Any], where: str, driver: str
) -> tuple[dict[str, dict[str, Fraction]], dict[str, dict[str, RequestPolicy]]]:
    amounts: dict[str, dict[str, Fraction]] = {}
    policies: dict[str, dict[str, RequestPolicy]] = {}
    for qualified, entry in _by_resolved_name(raw, where, driver):
        name = f"{where}[{_show(qualified)}]"
        capacity = _mapping(entry, name)
        domain, short = split_name(qualified, driver)
        amounts.setdefault(domain, {})[short] = _quantity(capacity.get("value"), f"{name}.value")
        if capacity.get("requestPolicy") is not None:
            policy = _request_policy(capacity["requestPolicy"], f"{name}.requestPolicy")
            policies.setdefault(domain, {})[short] = policy
    return amounts, policies


def _request_policy(raw: Any, where: str) -> RequestPolicy:
    policy = _mapping(raw, where)
    valid = policy.get("validValues")
    if valid is not None and (not isinstance(valid, list) or len(valid) > MAX_VALID_VALUES):
        raise SliceError(f"{where}.validValues is not a list of at most {MAX_VALID_VALUES} quantities")
    span = _optional_mapping(policy.get("validRange"), f"{where}.validRange")
    return RequestPolicy(
        default=_optional_quantity(policy.get("default"), f"{where}.default"),
        valid_values=tuple(
            _quantity(each, f"{where}.validValues[{i}]") for i, each in enumerate(valid or ())
        ),
        minimum=_optional_quantity(span.get("min"), f"{where}.validRange.min"),
        maximum=_optional_quantity(span.get("max"), f"{where}.validRange.max"),
        step=_optional_quantity(span.get("step"), f"{where}.validRange.step"),
    )


def _by_resolved_name(raw: Mapping[Any, Any], where: str, driver: str) -> list[tuple[str, Any]]:
    """(name, entry) pairs with each name checked; where a name is given both fully qualified and
    bare in the driver's domain (CEL sees one), the fully qualified entry wins."""
    chosen: dict[tuple[str, str], tuple[bool, str, Any]] = {}
    for qualified, entry in raw.items():
        _qualified_name(qualified, where)
        key = split_name(qualified, driver)
        explicit = "/" in qualified
        if key not in chosen or (explicit and not chosen[key][0]):
            chosen[key] = (explicit, qualified, entry)
    return [(qualified, entry) for _, qualified, entry in chosen.values()]


def _qualified_name(name: Any, where: str) -> None:
    """A C identifier, optionally after a DNS subdomain and a slash (k8s.io/api QualifiedName)."""
    if not isinstance(name, str):
        raise SliceError(f"{where}: a name is not a string")
    domain, slash, short = name.partition("/")
    if not slash:
        domain, short = "", name
    if not (0 < len(short) <= MAX_ID_LENGTH and _C_IDENTIFIER.fullmatch(short)):
        raise SliceError(f"{where}: {_show(name)} is not a valid attribute or capacity name")
    if slash and not (len(domain) <= MAX_DRIVER_LENGTH and _DNS_SUBDOMAIN.fullmatch(domain)):
        raise SliceError(f"{where}: {_show(name)} has an invalid domain")


def _quantity(value: Any, where: str) -> Fraction:
    try:
        return quantity.parse(value)
    except quantity.QuantityError as e:
        raise SliceError(f"{where}: {e}") from None


def _optional_quantity(value: Any, where: str) -> Fraction | None:
    return None if value is None else _quantity(value, where)


def _mapping(value: Any, where: str) -> Mapping[Any, Any]:
    if not isinstance(value, Mapping):
        raise SliceError(f"{where} is not an object")
    return value


def _optional_mapping(value: Any, where: str) -> Mapping[Any, Any]:
    return {} if value is None else _mapping(value, where)


def _text(value: Any, where: str, limit: int, empty: bool = False) -> str:
    if not isinstance(value, str) or not (empty or value):
        raise SliceError(f"{where} is not a non-empty string" if not empty else f"{where} is not a string")
    if len(value) > limit:
        raise SliceError(f"{where} is longer than {limit} characters")
    return value


def _optional_text(value: Any, where: str, limit: int) -> str:
    return "" if value is None else _text(value, where, limit, empty=True)


def _name(value: Any, where: str, pattern: re.Pattern[str], limit: int) -> str:
    text = _text(value, where, limit)
    if not pattern.fullmatch(text):
        raise SliceError(f"{where} {_show(text)} is not a valid name")
    return text


def _show(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."
