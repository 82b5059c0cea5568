"""The GPU devices one ResourceClaim spec asks for. Pure.

A claim (`spec.devices`, or a template's `spec.spec.devices`) lists requests. Each is either
`exactly` one device request or `firstAvailable`, alternatives of which the allocator takes
the first that fits. What a request can get is judged by webhook/dra/judge.py: its class's and
its own CEL selectors against the devices the cluster publishes. Here:
- `exactly`: `count` devices (default 1) with `allocationMode: ExactCount` (the default); `All`
  takes every matching device of a node, a number admission cannot know (with `adminAccess` it
  takes none from their holders, and the class is charged the 32 devices a claim may hold);
- `firstAvailable`: the alternative that takes the most counts for GPUs and memory, since any
  may be chosen; each alternative's class is charged its largest count (the rule of Kubernetes'
  ResourceQuota for claims);
- consumable capacity (`capacity.requests`, under `memory` or its qualified name): a share of a
  device only where the device may be allocated to several claims (`allowMultipleAllocations`);
  NVIDIA's driver sets it on none, so such a request holds the whole device;
- a claim whose requests need more than the API's 32 devices can never be allocated: refused
  with the allocator's own reason.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from fractions import Fraction
from typing import Any

from webhook import gpu, quantity
from webhook.dra import catalog
from webhook.dra.judge import DeviceJudge, Reading, share_of
from webhook.gpu import MigProfile

GPU_CLASS = "gpu.nvidia.com"
MIG_CLASS = "mig.nvidia.com"
DEFAULT_GPU_CLASSES = (GPU_CLASS, MIG_CLASS)
DRIVER = catalog.DRIVER
EXACT_COUNT, ALL = "ExactCount", "All"
# k8s.io/api resource/v1 types.go AllocationResultsMaxSize; the allocator refuses a claim whose
# requests need more (structured/internal/stable/allocator_stable.go).
MAX_DEVICES_PER_CLAIM = 32
MAX_REQUESTS = 32  # DeviceRequestsMaxSize
MAX_SUBREQUESTS = 8  # FirstAvailableDeviceRequestMaxSize
MAX_SELECTORS = 32  # DeviceSelectorsMaxSize


class ClaimError(ValueError):
    """A claim spec that cannot be counted; the message names the request."""


@dataclass(frozen=True)
class DeviceClassInfo:
    """What judging needs of a DeviceClass: its selectors and the extended resource it serves."""

    name: str
    selectors: tuple[str, ...] = ()
    extended_resource: str | None = None


@dataclass(frozen=True)
class DeviceAsk:
    """The GPU devices of one request (for `firstAvailable`, of its largest GPU alternative).

    `share` is the GPU-equivalents of one device (1 but for consumable capacity on a device that
    may be shared). `estimated`: judged without published devices. A `charge_only` ask only
    charges its class's per-class count (another alternative of a firstAvailable request);
    `class_count` is what the class is charged (the largest count among its alternatives)."""

    request: str
    device_class: str
    count: int
    all_devices: bool = False
    admin_access: bool = False
    profile: MigProfile | None = None
    memory_mib: int = 0  # per device; 0 when nothing published says
    share: Fraction = Fraction(1)
    estimated: bool = False
    charge_only: bool = False
    class_count: int = 0

    @property
    def charged(self) -> int:
        return self.class_count or self.count

    @property
    def takes_node(self) -> bool:
        """`allocationMode: All` without adminAccess: every matching device of a node, taken from
        everyone else. With adminAccess the devices stay with their holders (monitoring)."""
        return self.all_devices and not self.admin_access


def class_info(obj: Mapping[str, Any]) -> DeviceClassInfo:
    """A DeviceClass object: its name, CEL selectors and extendedResourceName."""
    meta, spec = obj.get("metadata"), obj.get("spec")
    name = str(meta.get("name") or "") if isinstance(meta, dict) else ""
    spec = spec if isinstance(spec, dict) else {}
    extended = spec.get("extendedResourceName")
    return DeviceClassInfo(
        name,
        tuple(_expressions(spec.get("selectors"))),
        extended if isinstance(extended, str) and extended else None,
    )


def claim_asks(devices: object, judge: DeviceJudge) -> tuple[DeviceAsk, ...]:
    """The GPU asks of a claim's `devices` field; raises ClaimError on values it cannot count."""
    if devices is None:
        return ()
    if not isinstance(devices, dict):
        raise ClaimError("spec.devices must be a mapping")
    requests = devices.get("requests") or []
    if not isinstance(requests, list):
        raise ClaimError("spec.devices.requests must be a list")
    if len(requests) > MAX_REQUESTS:
        raise ClaimError(f"spec.devices.requests holds {len(requests)} requests, more than {MAX_REQUESTS}")
    asks: list[DeviceAsk] = []
    least_devices = 0
    for request in requests:
        if not isinstance(request, dict):
            raise ClaimError("spec.devices.requests must hold mappings")
        found, fewest = _request_asks(request, judge)
        asks.extend(found)
        least_devices += fewest
    if least_devices > MAX_DEVICES_PER_CLAIM:
        raise ClaimError(
            f"number of requested devices {least_devices} exceeds the claim limit of {MAX_DEVICES_PER_CLAIM}"
        )
    return tuple(asks)


def _request_asks(request: Mapping[str, Any], judge: DeviceJudge) -> tuple[list[DeviceAsk], int]:
    """The request's asks, and the fewest devices it can be given (the allocator's lower bound)."""
    name = str(request.get("name") or "?")
    exactly = request.get("exactly")
    if exactly is not None:
        ask, fewest = _one(name, exactly, judge)
        return ([ask] if ask is not None else []), fewest
    alternatives = request.get("firstAvailable") or []
    if not isinstance(alternatives, list):
        raise ClaimError(f"request {name!r}: firstAvailable must be a list")
    if len(alternatives) > MAX_SUBREQUESTS:
        raise ClaimError(f"request {name!r}: firstAvailable holds more than {MAX_SUBREQUESTS} subrequests")
    judged = [_one(f"{name}/{_sub_name(a)}", a, judge) for a in alternatives]
    fewest = min((f for _, f in judged), default=0)
    found = [a for a, _ in judged if a is not None]
    return _first_available(found), fewest


def _first_available(found: list[DeviceAsk]) -> list[DeviceAsk]:
    """The largest alternative counts; every alternative's class is charged its largest count."""
    if not found:
        return []
    largest = max(found, key=_weight)
    by_class: dict[str, int] = {}
    for ask in found:
        by_class[ask.device_class] = max(by_class.get(ask.device_class, 0), ask.charged)
    asks = [replace(largest, class_count=by_class.pop(largest.device_class))]
    asks.extend(
        DeviceAsk(largest.request, cls, 0, charge_only=True, class_count=count)
        for cls, count in sorted(by_class.items())
    )
    return asks


def _sub_name(alternative: object) -> str:
    return str(alternative.get("name") or "?") if isinstance(alternative, dict) else "?"


def _weight(ask: DeviceAsk) -> tuple[bool, Fraction, int, int]:
    slices = ask.profile.slices if ask.profile else gpu.MIG_SLICES
    return (ask.all_devices, ask.count * slices * ask.share, ask.count, ask.count * ask.memory_mib)


def _one(name: str, spec: object, judge: DeviceJudge) -> tuple[DeviceAsk | None, int]:
    if not isinstance(spec, dict):
        raise ClaimError(f"request {name!r} must be a mapping")
    class_name = spec.get("deviceClassName")
    if not isinstance(class_name, str) or not class_name:
        raise ClaimError(f"request {name!r} names no deviceClassName")
    mode = spec.get("allocationMode") or EXACT_COUNT
    if mode not in (EXACT_COUNT, ALL):
        raise ClaimError(f"request {name!r}: allocationMode must be ExactCount or All, got {mode!r}")
    count = 0 if mode == ALL else _count(name, spec.get("count", 1))
    selectors = _expressions(spec.get("selectors"))
    if len(selectors) > MAX_SELECTORS:
        raise ClaimError(f"request {name!r} holds more than {MAX_SELECTORS} selectors")
    reading = judge.judge(class_name, tuple(selectors))
    fewest = 1 if mode == ALL else count
    if reading is None:
        return None, fewest
    requested = _requested_memory(name, spec.get("capacity"))
    return _ask(name, class_name, count, mode, spec, reading, requested), fewest


def _ask(
    name: str,
    class_name: str,
    count: int,
    mode: str,
    spec: Mapping[str, Any],
    reading: Reading,
    requested_mib: int,
) -> DeviceAsk:
    share = share_of(reading, requested_mib)
    # A device that cannot be shared is held whole, and holds at least what was asked of it.
    memory = requested_mib if share < 1 else max(reading.memory_mib, requested_mib)
    # Kubernetes' ResourceQuota charges `All` its worst case, the most devices a claim may hold
    # (pkg/quota/v1/evaluator/core/resource_claims.go).
    class_count = MAX_DEVICES_PER_CLAIM if mode == ALL else 0
    return DeviceAsk(
        name,
        class_name,
        count,
        all_devices=mode == ALL,
        admin_access=spec.get("adminAccess") is True,
        profile=reading.profile,
        memory_mib=memory,
        share=share,
        estimated=not reading.published,
        class_count=class_count,
    )


def _count(name: str, value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ClaimError(f"request {name!r}: count must be a positive whole number, got {value!r}")
    return value


_MEMORY_KEYS = ("memory", f"{DRIVER}/memory")


def _requested_memory(name: str, capacity: object) -> int:
    """MiB of `capacity.requests` memory, under its bare or its driver-qualified name; 0 if none."""
    requests = capacity.get("requests") if isinstance(capacity, dict) else None
    if not isinstance(requests, dict):
        return 0
    for key in _MEMORY_KEYS:
        if key in requests:
            try:
                return quantity.parse_mib(requests[key], f"request {name!r}: capacity {key}")
            except quantity.QuantityError as e:
                raise ClaimError(str(e)) from e
    return 0


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
