"""What Kubernetes' environment for device selectors declares, as far as compiling needs it.

dynamic-resource-allocation cel/compile.go declares the `device` variable with its fields, and
Kubernetes' base CEL environment the functions and their overloads: here, for each function,
its result type, its argument counts as a method and as a plain function, and the receiver
types it takes. What Kubernetes declares but this engine cannot evaluate is
listed apart, so that the checker refuses it as unsupported rather than unknown.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Final

from webhook.dra.cel.kinds import (
    ATTRIBUTES,
    BOOL,
    BYTES,
    CAPACITY,
    DOUBLE,
    DURATION,
    DYN,
    INT,
    LIST,
    MAPS,
    QUANTITY,
    SEMVER,
    STRING,
    TIMESTAMP,
    TYPE,
    UINT,
)

DEVICE_FIELDS: Final = {
    "driver": STRING,
    "allowMultipleAllocations": BOOL,
    "attributes": ATTRIBUTES,
    "capacity": CAPACITY,
}


@dataclass(frozen=True)
class Function:
    """A function's overloads, as far as compiling needs them."""

    result: str
    member: frozenset[int] = frozenset()  # argument counts after the receiver, if a method
    free: frozenset[int] = frozenset()  # argument counts, if a plain function
    receivers: frozenset[str] | None = None  # None: any receiver


def _method(result: str, receivers: Iterable[str] | None, *counts: int) -> Function:
    accepted = None if receivers is None else frozenset(receivers)
    return Function(result, member=frozenset(counts), receivers=accepted)


def _free(result: str, *counts: int) -> Function:
    return Function(result, free=frozenset(counts))


_TIME_GETTERS: Final = (
    "getDate",
    "getDayOfMonth",
    "getDayOfWeek",
    "getDayOfYear",
    "getFullYear",
    "getMonth",
    "getHours",
    "getMinutes",
    "getSeconds",
    "getMilliseconds",
)
_TEXT = (STRING,)
_SEQUENCE = (LIST,)
_SIZED = (STRING, BYTES, LIST, *MAPS)
_COMPARABLE = (QUANTITY, SEMVER)
_TIME = (TIMESTAMP, DURATION)
SIGNATURES: Final[Mapping[str, Function]] = {
    "size": Function(INT, member=frozenset({0}), free=frozenset({1}), receivers=frozenset(_SIZED)),
    "contains": _method(BOOL, _TEXT, 1),
    "startsWith": _method(BOOL, _TEXT, 1),
    "endsWith": _method(BOOL, _TEXT, 1),
    "matches": Function(BOOL, member=frozenset({1}), free=frozenset({2}), receivers=frozenset(_TEXT)),
    "find": _method(STRING, _TEXT, 1),
    "findAll": _method(LIST, _TEXT, 1, 2),
    "charAt": _method(STRING, _TEXT, 1),
    "indexOf": _method(INT, (STRING, LIST), 1, 2),
    "lastIndexOf": _method(INT, (STRING, LIST), 1, 2),
    "lowerAscii": _method(STRING, _TEXT, 0),
    "upperAscii": _method(STRING, _TEXT, 0),
    "trim": _method(STRING, _TEXT, 0),
    "replace": _method(STRING, _TEXT, 2, 3),
    "split": _method(LIST, _TEXT, 1, 2),
    "substring": _method(STRING, _TEXT, 1, 2),
    "join": _method(STRING, _SEQUENCE, 0, 1),
    "isSorted": _method(BOOL, _SEQUENCE, 0),
    "sum": _method(DYN, _SEQUENCE, 0),
    "min": _method(DYN, _SEQUENCE, 0),
    "max": _method(DYN, _SEQUENCE, 0),
    "includes": _method(BOOL, None, 1),
    "quantity": _free(QUANTITY, 1),
    "isQuantity": _free(BOOL, 1),
    "sign": _free(INT, 1),
    "semver": _free(SEMVER, 1, 2),
    "isSemver": _free(BOOL, 1, 2),
    "compareTo": _method(INT, _COMPARABLE, 1),
    "isGreaterThan": _method(BOOL, _COMPARABLE, 1),
    "isLessThan": _method(BOOL, _COMPARABLE, 1),
    "asInteger": _method(INT, (QUANTITY,), 0),
    "asApproximateFloat": _method(DOUBLE, (QUANTITY,), 0),
    "isInteger": _method(BOOL, (QUANTITY,), 0),
    "add": _method(QUANTITY, (QUANTITY,), 1),
    "sub": _method(QUANTITY, (QUANTITY,), 1),
    "major": _method(INT, (SEMVER,), 0),
    "minor": _method(INT, (SEMVER,), 0),
    "patch": _method(INT, (SEMVER,), 0),
    "int": _free(INT, 1),
    "uint": _free(UINT, 1),
    "double": _free(DOUBLE, 1),
    "string": _free(STRING, 1),
    "bool": _free(BOOL, 1),
    "bytes": _free(BYTES, 1),
    "type": _free(TYPE, 1),
    "duration": _free(DURATION, 1),
    "timestamp": _free(TIMESTAMP, 1),
    **{name: _method(INT, _TIME, 0, 1) for name in _TIME_GETTERS},
}
# Declared in Kubernetes' base environment but not evaluated here.
UNSUPPORTED_FUNCTIONS: Final = frozenset(
    (
        # the strings and lists extensions, optional values
        "format",
        "quote",
        "reverse",
        "slice",
        "flatten",
        "distinct",
        "sort",
        "sortBy",
        "first",
        "last",
        "range",
        "hasValue",
        "value",
        "orValue",
        "or",
        # the URL, IP and CIDR libraries
        "url",
        "isURL",
        "getScheme",
        "getHost",
        "getHostname",
        "getPort",
        "getEscapedPath",
        "getQuery",
        "ip",
        "isIP",
        "cidr",
        "isCIDR",
        "family",
        "isUnspecified",
        "isLoopback",
        "isLinkLocalMulticast",
        "isLinkLocalUnicast",
        "isGlobalUnicast",
        "masked",
        "prefixLength",
        "containsIP",
        "containsCIDR",
        "isCanonical",
        # two-variable comprehensions
        "existsOne",
        "transformList",
        "transformMap",
        "transformMapEntry",
    )
)
NAMESPACES: Final = frozenset({"optional", "sets", "lists", "strings", "math", "format", "cel"})
