"""A device as CEL values, and the values Kubernetes adds to CEL: quantities and semvers.

`device_value` makes the `device` variable of dynamic-resource-allocation cel/compile.go from a
published Device: its driver, allowMultipleAllocations, and its attributes and capacities by
domain, where a domain the device lacks reads as an empty map. Attribute values become CEL
ints, bools, strings and semvers; capacities become quantities. `kind_of` names a value's type
as Kubernetes' messages do, and `same` is cel-go's equality of two values.
"""

from __future__ import annotations

import functools
import math
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any, Final, TypeVar

from celpy import celtypes

from webhook import quantity
from webhook.dra.cel.kinds import (
    BOOL,
    BYTES,
    DOUBLE,
    DURATION,
    INT,
    LIST,
    MAP,
    NULL,
    QUANTITY,
    SEMVER,
    STRING,
    TIMESTAMP,
    UINT,
)
from webhook.dra.cel.limits import INT64
from webhook.dra.published import Attribute, Device, Version


@dataclass(frozen=True)
class Quantity:
    """A Kubernetes quantity (apiserver pkg/cel/quantity.go): its exact value."""

    value: Fraction


@dataclass(frozen=True)
class Semver:
    """A semantic version (apiserver pkg/cel/semver.go, github.com/blang/semver/v4)."""

    major: int
    minor: int
    patch: int
    pre: tuple[int | str, ...]

    def compare(self, other: Semver) -> int:
        core = sign((self.major, self.minor, self.patch), (other.major, other.minor, other.patch))
        if core or self.pre == other.pre:
            return core
        if not self.pre or not other.pre:
            return 1 if not self.pre else -1  # a release ranks above its pre-releases
        for mine, theirs in zip(self.pre, other.pre, strict=False):
            if mine != theirs:
                return _pre_order(mine, theirs)
        return sign(len(self.pre), len(other.pre))


def _pre_order(mine: int | str, theirs: int | str) -> int:
    if isinstance(mine, int) != isinstance(theirs, int):
        return -1 if isinstance(mine, int) else 1  # numeric identifiers rank below alphanumeric ones
    return sign(mine, theirs)


def sign(a: Any, b: Any) -> int:
    return int(a > b) - int(a < b)


class Domains(celtypes.MapType):
    """`device.attributes` and `device.capacity`: an unknown domain is an empty map
    (compile.go `newStringInterfaceMapWithDefault`); membership and iteration see only the
    domains the device has."""

    def __getitem__(self, key: Any) -> Any:
        if not isinstance(key, str):
            raise TypeError(f"no such overload: map(string, ...) indexed by {kind_of(key)}")
        return super().get(key) if key in self else _NO_NAMES


_NO_NAMES: Final = celtypes.MapType()


class DeviceError(ValueError):
    pass


def device_value(device: Device) -> celtypes.MapType:
    return _filled(
        celtypes.MapType(),
        {
            "driver": celtypes.StringType(device.driver),
            "allowMultipleAllocations": celtypes.BoolType(device.allow_multiple_allocations),
            "attributes": _domains(device.attributes, _attribute_value),
            "capacity": _domains(device.capacity, lambda _, value: Quantity(value)),
        },
    )


def _domains(by_domain: Mapping[str, Mapping[str, Any]], convert: Callable[[str, Any], Any]) -> Domains:
    entries = {
        domain: _filled(
            celtypes.MapType(), {name: convert(f"{domain}/{name}", value) for name, value in names.items()}
        )
        for domain, names in by_domain.items()
    }
    return _filled(Domains(), entries)


_Map = TypeVar("_Map", bound=celtypes.MapType)


def _filled(empty: _Map, entries: Mapping[str, Any]) -> _Map:
    """A cel-python map without its constructor's per-entry checks; keys stay plain strings."""
    dict.update(empty, entries)
    return empty


def _attribute_value(name: str, value: Attribute) -> Any:
    """compile.go `getAttributeValue`: a version that does not parse fails every selector on
    the device, before any expression runs."""
    if isinstance(value, bool):
        return celtypes.BoolType(value)
    if isinstance(value, int):
        if not -INT64 <= value < INT64:
            raise DeviceError(f"attribute {name}: {value} is out of the int64 range")
        return celtypes.IntType(value)
    if isinstance(value, Version):
        try:
            return parse_semver(value.text)
        except NotSemver as e:
            raise DeviceError(f"attribute {name}: parse semantic version: {e}") from e
    return celtypes.StringType(value)


_ALPHANUMERIC: Final = re.compile(r"[0-9A-Za-z-]+")


class NotSemver(ValueError):
    pass


@functools.lru_cache(maxsize=1024)
def parse_semver(text: str) -> Semver:
    """blang/semver `Parse`: strict semantic versions 2.0.0; raises NotSemver."""
    parts = text.split(".", 2)
    if len(parts) != 3:
        raise NotSemver(f"{text!r} has no major.minor.patch")
    rest, plus, build = parts[2].partition("+")
    patch, dash, pre = rest.partition("-")
    if plus and not all(_ALPHANUMERIC.fullmatch(part) for part in build.split(".")):
        raise NotSemver(f"invalid build metadata in {text!r}")
    major, minor, patch_number = (_version_number(part) for part in (parts[0], parts[1], patch))
    identifiers = tuple(_pre_identifier(part) for part in pre.split(".")) if dash else ()
    return Semver(major, minor, patch_number, identifiers)


def _version_number(part: str) -> int:
    if not part.isascii() or not part.isdigit():
        raise NotSemver(f"invalid number {part!r}")
    if len(part) > 1 and part.startswith("0"):
        raise NotSemver(f"number {part!r} has a leading zero")
    if int(part) >= 2 * INT64:
        raise NotSemver(f"number {part!r} is out of range")
    return int(part)


def _pre_identifier(part: str) -> int | str:
    if part.isascii() and part.isdigit():
        return _version_number(part)
    if not _ALPHANUMERIC.fullmatch(part):
        raise NotSemver(f"invalid pre-release {part!r}")
    return part


def normalized_semver(text: str) -> Semver:
    """Kubernetes' `semver(s, true)` (semverlib.go `normalizeAndParse`): no leading "v", no
    leading zeros, missing minor and patch numbers filled in with 0."""
    parts = [_without_leading_zeros(part) for part in text.removeprefix("v").split(".", 2)]
    if len(parts) < 3:
        if any(mark in parts[-1] for mark in "+-"):
            raise NotSemver("short version cannot contain PreRelease/Build meta data")
        parts += ["0"] * (3 - len(parts))
    return parse_semver(".".join(parts))


def _without_leading_zeros(part: str) -> str:
    if len(part) <= 1:
        return part
    stripped = part.lstrip("0")
    return stripped if stripped[:1].isdigit() else "0" + stripped


def parse_quantity(text: str) -> Fraction:
    """apimachinery `ParseQuantity`: exact, with a non-zero value's magnitude rounded up to a
    whole nano, and a binary-suffixed one capped at the int64 maximum."""
    if text != text.strip():
        raise quantity.QuantityError(f"{text!r} is not a valid quantity")
    value = quantity.parse(text)
    magnitude = abs(value)
    if (magnitude * 10**9).denominator != 1:
        magnitude = Fraction(math.ceil(magnitude * 10**9), 10**9)
    if text.endswith("i"):
        magnitude = min(magnitude, Fraction(INT64 - 1))
    return magnitude if value >= 0 else -magnitude


class Message(celtypes.MapType):
    """A constructed message, `Name{field: value, ...}`: its fields as a map, and its type name."""

    def __init__(self, type_name: str, fields: Mapping[Any, Any]) -> None:
        super().__init__()
        dict.update(self, fields)  # cel-python's constructor would check every entry again
        self.type_name = type_name


_KINDS: Final[Sequence[tuple[type, str]]] = (
    (celtypes.BoolType, BOOL),
    (celtypes.UintType, UINT),
    (celtypes.IntType, INT),
    (celtypes.DoubleType, DOUBLE),
    (str, STRING),
    (bytes, BYTES),
    (type(None), NULL),
    (list, LIST),
    (dict, MAP),
    (Quantity, QUANTITY),
    (Semver, SEMVER),
    (celtypes.TimestampType, TIMESTAMP),
    (celtypes.DurationType, DURATION),
)


def kind_of(value: object) -> str:
    if isinstance(value, Message):
        return value.type_name
    return next((name for cls, name in _KINDS if isinstance(value, cls)), type(value).__name__)


def is_number(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, (bool, celtypes.BoolType))


def plain(value: Any) -> Any:
    """celpy's numbers refuse to meet another numeric type; cel-go compares them by value."""
    if isinstance(value, float):
        return float(value)
    return int(value) if is_number(value) else value


def same(a: object, b: object) -> bool:
    """cel-go's heterogeneous equality: numbers by value across int, uint and double, values of
    different types unequal, lists and maps element by element."""
    if is_number(a) and is_number(b):
        return bool(plain(a) == plain(b))
    if kind_of(a) != kind_of(b):
        return False
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(same(a[key], b[key]) for key in a)
    if isinstance(a, Semver) and isinstance(b, Semver):
        return a.compare(b) == 0
    return a == b
