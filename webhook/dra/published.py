"""A device as a DRA driver publishes it in a ResourceSlice, in the form CEL selectors read. Pure.

Kubernetes' allocator evaluates a DeviceClass's and a request's selectors against each device:
`device.driver`, `device.attributes[domain][name]` and `device.capacity[domain][name]`. A
ResourceSlice names attributes and capacities either fully qualified (`domain/name`) or
unqualified, and an unqualified name belongs to the slice's driver
(staging/src/k8s.io/dynamic-resource-allocation/cel/compile.go, `newDeviceAttributes`). So a
device here keeps both maps by domain, each name already resolved.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from fractions import Fraction


@dataclass(frozen=True, order=True)
class Version:
    """A semantic version attribute (DeviceAttribute.version), kept as the driver wrote it."""

    text: str


# One attribute value: DeviceAttribute holds exactly one of int, bool, string or version.
Attribute = int | bool | str | Version


@dataclass(frozen=True)
class RequestPolicy:
    """How one capacity of a shareable device is consumed per allocation (DeviceCapacity.requestPolicy,
    Kubernetes' consumable capacity): `default` when a request names no amount, and the amounts a
    request may take (a list, or a range from `minimum` in `step`s up to `maximum`). Exact values."""

    default: Fraction | None = None
    valid_values: tuple[Fraction, ...] = ()
    minimum: Fraction | None = None
    maximum: Fraction | None = None
    step: Fraction | None = None


@dataclass(frozen=True)
class Device:
    """One published device: what selectors can see of it, and what counting needs.

    `attributes` and `capacity` are keyed by domain, then by name. Capacities are exact values
    (a Quantity's value: bytes for `memory`). `node` is the slice's nodeName ("" for slices that
    serve all nodes or a node selector). `request_policies` holds the capacities that say how a
    share of them is requested, keyed like `capacity`; only a device that allows multiple
    allocations has any."""

    driver: str
    pool: str
    name: str
    attributes: Mapping[str, Mapping[str, Attribute]] = field(default_factory=dict)
    capacity: Mapping[str, Mapping[str, Fraction]] = field(default_factory=dict)
    allow_multiple_allocations: bool = False
    node: str = ""
    request_policies: Mapping[str, Mapping[str, RequestPolicy]] = field(default_factory=dict)

    def attribute(self, qualified: str) -> Attribute | None:
        """An attribute by `domain/name`, or by a bare name in the driver's own domain."""
        domain, name = split_name(qualified, self.driver)
        return self.attributes.get(domain, {}).get(name)

    def capacity_of(self, qualified: str) -> Fraction | None:
        domain, name = split_name(qualified, self.driver)
        return self.capacity.get(domain, {}).get(name)

    def request_policy(self, qualified: str) -> RequestPolicy | None:
        domain, name = split_name(qualified, self.driver)
        return self.request_policies.get(domain, {}).get(name)


def split_name(qualified: str, driver: str) -> tuple[str, str]:
    """(domain, name) of a QualifiedName; a name without a domain is in the driver's."""
    domain, slash, name = qualified.rpartition("/")
    return (domain, name) if slash else (driver, qualified)
