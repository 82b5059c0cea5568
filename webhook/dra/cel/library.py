"""Kubernetes' own CEL libraries that selectors use, and DRA's `includes`.

The list library (apiserver pkg/cel/library/lists.go: `isSorted`, `sum`, `min`, `max`,
`indexOf`, `lastIndexOf`), the quantity library (quantity.go) and the semver library
(semverlib.go, with the normalising `semver(s, true)`), and `includes` from
dynamic-resource-allocation cel/compile.go. Known difference: `isInteger()` and `asInteger()`
accept every integral value within int64, where Kubernetes refuses some integral values it
keeps in arbitrary precision.
"""

from __future__ import annotations

import functools
import itertools
import math
import operator
from collections.abc import Callable, Mapping
from fractions import Fraction
from typing import Any, Final, cast

from celpy import celtypes
from celpy.evaluation import CELEvalError, Result

from webhook import quantity
from webhook.dra.cel.calls import as_text, failing, no_such_overload
from webhook.dra.cel.errors import runtime_error
from webhook.dra.cel.kinds import DURATION, NUMBERS, ORDERED
from webhook.dra.cel.limits import INT64
from webhook.dra.cel.strings import index_of, last_index_of
from webhook.dra.cel.values import (
    NotSemver,
    Quantity,
    Semver,
    is_number,
    kind_of,
    normalized_semver,
    parse_quantity,
    parse_semver,
    plain,
    same,
    sign,
)


def _list_method(function: Callable[..., Any]) -> Callable[..., Result]:
    @failing
    @functools.wraps(function)
    def method(items: Any, *arguments: Any) -> Result:
        if not isinstance(items, list):
            raise no_such_overload(items, *arguments)
        return cast(Result, function(items, *arguments))

    return method


def _ordered_items(items: list[Any]) -> None:
    kinds = {kind_of(item) for item in items}
    numbers = all(is_number(item) for item in items)
    if not numbers and (len(kinds) > 1 or not kinds <= ORDERED):
        raise no_such_overload(*items[:2])


@_list_method
def _is_sorted(items: list[Any]) -> Any:
    _ordered_items(items)
    ordered = [plain(item) for item in items]
    return celtypes.BoolType(all(a <= b for a, b in itertools.pairwise(ordered)))


@_list_method
def _sum(items: list[Any]) -> Any:
    kinds = {kind_of(item) for item in items}
    if len(kinds) > 1 or not kinds <= NUMBERS | {DURATION}:
        raise no_such_overload(*items[:2])
    return functools.reduce(operator.add, items[1:], items[0]) if items else celtypes.IntType(0)


def _extreme(pick: Callable[..., Any], name: str) -> Callable[..., Result]:
    @_list_method
    def extreme(items: list[Any]) -> Any:
        if not items:
            return runtime_error(f"{name}(list) argument must not be empty")
        _ordered_items(items)
        return pick(items, key=plain)

    return extreme


@failing
def _sequence_index_of(container: Any, item: Any, start: Any = None) -> Result:
    if isinstance(container, str):
        return index_of(container, item, start)
    if not isinstance(container, list) or start is not None:
        raise no_such_overload(container, item)
    return celtypes.IntType(next((i for i, element in enumerate(container) if same(element, item)), -1))


@failing
def _sequence_last_index_of(container: Any, item: Any, end: Any = None) -> Result:
    if isinstance(container, str):
        return last_index_of(container, item, end)
    if not isinstance(container, list) or end is not None:
        raise no_such_overload(container, item)
    found = [i for i, element in enumerate(container) if same(element, item)]
    return celtypes.IntType(found[-1] if found else -1)


@failing
def _includes(target: Any, item: Any) -> Result:
    """DRA's `includes` (compile.go `includesFunc`): membership in a list attribute, equality
    with a scalar one."""
    if isinstance(target, list):
        return celtypes.BoolType(any(same(element, item) for element in target))
    return celtypes.BoolType(same(target, item))


# Kubernetes' quantity library (apiserver pkg/cel/library/quantity.go).


@failing
def _quantity(text: Any) -> Result:
    try:
        return cast(Result, Quantity(parse_quantity(as_text(text))))
    except quantity.QuantityError as e:
        return runtime_error(f"quantities: {e}")


@failing
def _is_quantity(text: Any) -> Result:
    return celtypes.BoolType(not isinstance(_quantity(text), CELEvalError))


def _amount(value: Any) -> Fraction:
    if not isinstance(value, Quantity):
        raise no_such_overload(value)
    return value.value


@failing
def _quantity_sign(value: Any) -> Result:
    return celtypes.IntType(sign(_amount(value), 0))


@failing
def _is_integer(value: Any) -> Result:
    amount = _amount(value)
    return celtypes.BoolType(amount.denominator == 1 and -INT64 <= amount < INT64)


@failing
def _as_integer(value: Any) -> Result:
    if not _is_integer(value):
        return runtime_error("cannot convert value to integer")
    return celtypes.IntType(int(_amount(value)))


@failing
def _as_float(value: Any) -> Result:
    amount = _amount(value)
    try:
        return celtypes.DoubleType(float(amount))
    except OverflowError:
        return celtypes.DoubleType(math.copysign(math.inf, amount))


def _quantity_arithmetic(compute: Callable[[Fraction, Fraction], Fraction]) -> Callable[..., Result]:
    @failing
    def arithmetic(value: Any, other: Any) -> Result:
        if isinstance(other, celtypes.IntType) and not isinstance(other, celtypes.BoolType):
            return cast(Result, Quantity(compute(_amount(value), Fraction(int(other)))))
        return cast(Result, Quantity(compute(_amount(value), _amount(other))))

    return arithmetic


# Kubernetes' semver library (apiserver pkg/cel/library/semverlib.go).


@failing
def _semver(text: Any, normalize: Any = None) -> Result:
    if normalize is not None and not isinstance(normalize, celtypes.BoolType):
        raise no_such_overload(text, normalize)
    try:
        return cast(Result, (normalized_semver if normalize else parse_semver)(as_text(text)))
    except NotSemver as e:
        return runtime_error(f"semver: {e}")


@failing
def _is_semver(text: Any, normalize: Any = None) -> Result:
    return celtypes.BoolType(not isinstance(_semver(text, normalize), CELEvalError))


def _version_part(part: str) -> Callable[..., Result]:
    @failing
    def number(value: Any) -> Result:
        if not isinstance(value, Semver):
            raise no_such_overload(value)
        # Go converts the uint64 to an int64.
        return celtypes.IntType((getattr(value, part) + INT64) % (2 * INT64) - INT64)

    return number


def _comparison(outcome: Callable[[int], Result]) -> Callable[..., Result]:
    """compareTo, isGreaterThan, isLessThan: quantities with quantities, versions with versions."""

    @failing
    def compare(value: Any, other: Any) -> Result:
        if isinstance(value, Quantity) and isinstance(other, Quantity):
            return outcome(sign(value.value, other.value))
        if isinstance(value, Semver) and isinstance(other, Semver):
            return outcome(value.compare(other))
        raise no_such_overload(value, other)

    return compare


FUNCTIONS: Final[Mapping[str, Callable[..., Result]]] = {
    "indexOf": _sequence_index_of,
    "lastIndexOf": _sequence_last_index_of,
    "isSorted": _is_sorted,
    "sum": _sum,
    "min": _extreme(min, "min"),
    "max": _extreme(max, "max"),
    "includes": _includes,
    "quantity": _quantity,
    "isQuantity": _is_quantity,
    "sign": _quantity_sign,
    "isInteger": _is_integer,
    "asInteger": _as_integer,
    "asApproximateFloat": _as_float,
    "add": _quantity_arithmetic(operator.add),
    "sub": _quantity_arithmetic(operator.sub),
    "semver": _semver,
    "isSemver": _is_semver,
    "major": _version_part("major"),
    "minor": _version_part("minor"),
    "patch": _version_part("patch"),
    "compareTo": _comparison(celtypes.IntType),
    "isGreaterThan": _comparison(lambda order: celtypes.BoolType(order > 0)),
    "isLessThan": _comparison(lambda order: celtypes.BoolType(order < 0)),
}
