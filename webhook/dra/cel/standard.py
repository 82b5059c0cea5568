"""CEL's standard operators and conversions, with cel-go's semantics where cel-python's differ.

Heterogeneous equality and `in` (numbers by value across int, uint and double), ordering across
numeric types as Kubernetes enables it, list and map indexing, arithmetic only on the operand
types CEL declares, negation, `size`, and the `string()` and `bool()` conversions. A quantity
or semver compared with another type is no such overload, as Kubernetes' `Equal` answers.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Mapping
from typing import Any, Final, cast

from celpy import celtypes
from celpy.evaluation import Result

from webhook.dra.cel.calls import bounded, failing, no_such_overload
from webhook.dra.cel.errors import runtime_error
from webhook.dra.cel.kinds import (
    ARITHMETIC,
    BOOL,
    BYTES,
    DOUBLE,
    DURATION,
    INT,
    ORDERED,
    STRING,
    TIMESTAMP,
    UINT,
)
from webhook.dra.cel.values import Quantity, Semver, is_number, kind_of, plain, same


@failing
def _equal(a: Any, b: Any) -> Result:
    _check_equality(a, b)
    return celtypes.BoolType(same(a, b))


@failing
def _not_equal(a: Any, b: Any) -> Result:
    _check_equality(a, b)
    return celtypes.BoolType(not same(a, b))


def _check_equality(a: Any, b: Any) -> None:
    """cel-go asks the left side: its own types call a different type unequal, but Kubernetes'
    quantities and semvers (apiserver pkg/cel/quantity.go, semver.go `Equal`) answer no such
    overload. Null is compared before either is asked."""
    if isinstance(a, (Quantity, Semver)) and b is not None and type(a) is not type(b):
        raise no_such_overload(a, b)


def _ordering(compare: Callable[[Any, Any], bool]) -> Callable[..., Result]:
    @failing
    def ordered(a: Any, b: Any) -> Result:
        numbers = is_number(a) and is_number(b)
        if not numbers and (kind_of(a) != kind_of(b) or kind_of(a) not in ORDERED):
            raise no_such_overload(a, b)
        return celtypes.BoolType(compare(plain(a), plain(b)))

    return ordered


@failing
def _in(item: Any, container: Any) -> Result:
    if isinstance(container, (list, dict)):
        return celtypes.BoolType(any(same(item, element) for element in container))
    raise no_such_overload(item, container)


@failing
def _index(container: Any, key: Any) -> Result:
    if isinstance(container, list):
        if not is_number(key) or isinstance(key, float):
            raise no_such_overload(container, key)
        if not 0 <= key < len(container):
            return runtime_error(f"index out of range: {key}")
        return cast(Result, container[key])
    if isinstance(container, dict):
        return cast(Result, container[key])
    raise no_such_overload(container, key)


def _arithmetic(name: str, compute: Callable[[Any, Any], Any]) -> Callable[..., Result]:
    allowed = ARITHMETIC[name]

    @failing
    def arithmetic(a: Any, b: Any) -> Result:
        kinds = {kind_of(a), kind_of(b)}
        if not kinds <= allowed or (len(kinds) > 1 and not kinds <= {TIMESTAMP, DURATION}):
            raise no_such_overload(a, b)
        return cast(Result, bounded(compute(a, b)))

    return arithmetic


@failing
def _negate(value: Any) -> Result:
    if kind_of(value) not in (INT, DOUBLE, DURATION):
        raise no_such_overload(value)
    return cast(Result, -value)


@failing
def _size(value: Any) -> Result:
    if not isinstance(value, (str, bytes, list, dict)):
        raise no_such_overload(value)
    return celtypes.IntType(len(value))


@failing
def _string(value: Any) -> Result:
    if kind_of(value) not in (STRING, INT, UINT, DOUBLE, BOOL, BYTES, TIMESTAMP, DURATION):
        raise no_such_overload(value)
    if isinstance(value, celtypes.BoolType):
        return celtypes.StringType("true" if value else "false")
    return celtypes.StringType(value)


@failing
def _bool(value: Any) -> Result:
    if isinstance(value, celtypes.BoolType):
        return value
    if isinstance(value, str) and value in _BOOL_TEXT:
        return celtypes.BoolType(_BOOL_TEXT[value])
    if isinstance(value, str):
        return runtime_error(f"type conversion error from string {value[:20]!r} to bool")
    raise no_such_overload(value)


_BOOL_TEXT: Final = {
    **dict.fromkeys(("1", "t", "T", "true", "TRUE", "True"), True),
    **dict.fromkeys(("0", "f", "F", "false", "FALSE", "False"), False),
}

FUNCTIONS: Final[Mapping[str, Callable[..., Result]]] = {
    "!_": celtypes.logical_not,
    "_==_": _equal,
    "_!=_": _not_equal,
    "_<_": _ordering(operator.lt),
    "_<=_": _ordering(operator.le),
    "_>_": _ordering(operator.gt),
    "_>=_": _ordering(operator.ge),
    "_in_": _in,
    "_[_]": _index,
    "_+_": _arithmetic("addition_add", operator.add),
    "_-_": _arithmetic("addition_sub", operator.sub),
    "_*_": _arithmetic("multiplication_mul", operator.mul),
    "_/_": _arithmetic("multiplication_div", operator.truediv),
    "_%_": _arithmetic("multiplication_mod", operator.mod),
    "-_": _negate,
    "size": _size,
    "string": _string,
    "bool": _bool,
}
