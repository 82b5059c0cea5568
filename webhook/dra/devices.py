"""The GPU devices one ResourceClaim spec asks for. Pure.

A claim (`spec.devices`, or a template's `spec.spec.devices`) lists requests. Each is
either `exactly` one device request or `firstAvailable`, a list of alternatives of which
the scheduler takes the first that fits. Only requests on a GPU device class count:
- `exactly`: `count` devices (default 1) with `allocationMode: ExactCount` (the default);
  `All` takes every matching device of a node, a number admission cannot know;
- `firstAvailable`: the largest GPU alternative, since any of them may be chosen;
- MIG: the profile comes from a CEL selector on `device.attributes['gpu.nvidia.com'].profile`
  (in the request or in the device class), as NVIDIA's DRA driver demo specs write it;
- memory: `capacity.requests.memory` when set, else the MIG profile's.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from webhook import gpu, quantity
from webhook.gpu import MigProfile

GPU_CLASS = "gpu.nvidia.com"
MIG_CLASS = "mig.nvidia.com"
DEFAULT_GPU_CLASSES = (GPU_CLASS, MIG_CLASS)
DRIVER = "gpu.nvidia.com"
EXACT_COUNT, ALL = "ExactCount", "All"
_PROFILE = re.compile(r"""\.profile\s*==\s*['"]([1-7])g\.([0-9]{1,4})gb['"]""")
_DRIVER = re.compile(r"""device\.driver\s*==\s*['"]([^'"]+)['"]""")


class ClaimError(ValueError):
    """A claim spec that cannot be counted; the message names the request."""


@dataclass(frozen=True)
class DeviceClassInfo:
    """What counting needs of a DeviceClass."""

    name: str
    gpu: bool
    profile: MigProfile | None = None
    extended_resource: str | None = None


@dataclass(frozen=True)
class DeviceAsk:
    """The GPU devices of one request (for `firstAvailable`, of its largest GPU alternative)."""

    request: str
    device_class: str
    count: int
    all_devices: bool = False
    admin_access: bool = False
    profile: MigProfile | None = None
    memory_mib: int = 0  # per device; 0 when neither capacity nor a profile says


def class_info(obj: Mapping[str, Any], gpu_classes: Sequence[str] = DEFAULT_GPU_CLASSES) -> DeviceClassInfo:
    """A DeviceClass object: a GPU class when configured as one or when it selects NVIDIA's driver."""
    meta, spec = obj.get("metadata"), obj.get("spec")
    name = str(meta.get("name") or "") if isinstance(meta, dict) else ""
    spec = spec if isinstance(spec, dict) else {}
    expressions = _expressions(spec.get("selectors"))
    drivers = {m for e in expressions for m in _DRIVER.findall(e)}
    extended = spec.get("extendedResourceName")
    return DeviceClassInfo(
        name,
        name in gpu_classes or DRIVER in drivers,
        _profile(expressions),
        extended if isinstance(extended, str) and extended else None,
    )


def default_class(name: str, gpu_classes: Sequence[str] = DEFAULT_GPU_CLASSES) -> DeviceClassInfo:
    """A class known only by name (not in the cache): a GPU class if configured as one."""
    return DeviceClassInfo(name, name in gpu_classes)


def claim_asks(
    devices: object, classes: Mapping[str, DeviceClassInfo], gpu_classes: Sequence[str] = DEFAULT_GPU_CLASSES
) -> tuple[DeviceAsk, ...]:
    """The GPU asks of a claim's `devices` field; raises ClaimError on values it cannot count."""
    if devices is None:
        return ()
    if not isinstance(devices, dict):
        raise ClaimError("spec.devices must be a mapping")
    requests = devices.get("requests") or []
    if not isinstance(requests, list):
        raise ClaimError("spec.devices.requests must be a list")
    asks = []
    for request in requests:
        if not isinstance(request, dict):
            raise ClaimError("spec.devices.requests must hold mappings")
        ask = _request_ask(request, classes, gpu_classes)
        if ask is not None:
            asks.append(ask)
    return tuple(asks)


def _request_ask(
    request: Mapping[str, Any], classes: Mapping[str, DeviceClassInfo], gpu_classes: Sequence[str]
) -> DeviceAsk | None:
    name = str(request.get("name") or "?")
    exactly = request.get("exactly")
    if exactly is not None:
        return _one(name, exactly, classes, gpu_classes)
    alternatives = request.get("firstAvailable") or []
    if not isinstance(alternatives, list):
        raise ClaimError(f"request {name!r}: firstAvailable must be a list")
    asks = [_one(f"{name}/{_sub_name(a)}", a, classes, gpu_classes) for a in alternatives]
    found = [a for a in asks if a is not None]
    # The scheduler may pick any alternative: count the one that takes the most.
    return max(found, key=_weight, default=None)


def _sub_name(alternative: object) -> str:
    return str(alternative.get("name") or "?") if isinstance(alternative, dict) else "?"


def _weight(ask: DeviceAsk) -> tuple[bool, int, int, int]:
    slices = ask.profile.slices if ask.profile else gpu.MIG_SLICES
    return (ask.all_devices, ask.count * slices, ask.count, ask.count * ask.memory_mib)


def _one(
    name: str, spec: object, classes: Mapping[str, DeviceClassInfo], gpu_classes: Sequence[str]
) -> DeviceAsk | None:
    if not isinstance(spec, dict):
        raise ClaimError(f"request {name!r} must be a mapping")
    class_name = spec.get("deviceClassName")
    if not isinstance(class_name, str) or not class_name:
        raise ClaimError(f"request {name!r} names no deviceClassName")
    info = classes.get(class_name) or default_class(class_name, gpu_classes)
    if not info.gpu:
        return None
    mode = spec.get("allocationMode") or EXACT_COUNT
    if mode not in (EXACT_COUNT, ALL):
        raise ClaimError(f"request {name!r}: allocationMode must be ExactCount or All, got {mode!r}")
    count = 0 if mode == ALL else _count(name, spec.get("count", 1))
    profile = _profile(_expressions(spec.get("selectors"))) or info.profile
    return DeviceAsk(
        name,
        class_name,
        count,
        all_devices=mode == ALL,
        admin_access=spec.get("adminAccess") is True,
        profile=profile,
        memory_mib=_memory(name, spec.get("capacity"), profile),
    )


def _count(name: str, value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ClaimError(f"request {name!r}: count must be a positive whole number, got {value!r}")
    return value


def _memory(name: str, capacity: object, profile: MigProfile | None) -> int:
    requests = capacity.get("requests") if isinstance(capacity, dict) else None
    if isinstance(requests, dict) and "memory" in requests:
        try:
            return quantity.parse_mib(requests["memory"], f"request {name!r}: capacity memory")
        except quantity.QuantityError as e:
            raise ClaimError(str(e)) from e
    return profile.memory_mib if profile else 0


def _expressions(selectors: object) -> list[str]:
    if not isinstance(selectors, list):
        return []
    found = []
    for selector in selectors:
        cel = selector.get("cel") if isinstance(selector, dict) else None
        expression = cel.get("expression") if isinstance(cel, dict) else None
        if isinstance(expression, str):
            found.append(expression)
    return found


def _profile(expressions: list[str]) -> MigProfile | None:
    for expression in expressions:
        match = _PROFILE.search(expression)
        if match:
            return gpu.parse_mig_resource(f"{gpu.MIG_PREFIX}{match[1]}g.{match[2]}gb")
    return None
