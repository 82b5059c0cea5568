"""JSON-ish Python values as cel-python's values, and back.

Admission objects arrive as decoded JSON: dicts, lists, strings, numbers, booleans and null.
`to_cel` makes them CEL values once, so that an object shared by many expressions is converted
once; values that are CEL values already pass through unchanged. `to_python` turns a result back
into plain JSON-ish values.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from celpy import celtypes

from webhook.admission_cel.errors import CelEvaluationError
from webhook.dra.cel.limits import INT64
from webhook.dra.cel.values import Quantity, Semver

MAX_NESTING: Final = 100  # levels of nested JSON: admission objects are far shallower

_CEL_VALUES: Final = (
    celtypes.BoolType,
    celtypes.IntType,
    celtypes.UintType,
    celtypes.DoubleType,
    celtypes.StringType,
    celtypes.BytesType,
    celtypes.ListType,
    celtypes.MapType,
    celtypes.TimestampType,
    celtypes.DurationType,
    Quantity,
    Semver,
)


def to_cel(value: Any, depth: int = 0) -> Any:
    """The CEL value of a JSON-ish value; raises CelEvaluationError for what JSON cannot hold."""
    if value is None or isinstance(value, _CEL_VALUES):
        return value
    if depth > MAX_NESTING:
        raise CelEvaluationError(f"a value nested more than {MAX_NESTING} levels deep")
    if isinstance(value, bool):
        return celtypes.BoolType(value)
    if isinstance(value, int):
        return celtypes.IntType(value) if -INT64 <= value < INT64 else celtypes.DoubleType(value)
    if isinstance(value, float):
        return celtypes.DoubleType(value)
    if isinstance(value, str):
        return celtypes.StringType(value)
    if isinstance(value, Mapping):
        converted = celtypes.MapType()
        # dict.update: cel-python's constructor checks every entry again.
        dict.update(
            converted, {celtypes.StringType(key): to_cel(item, depth + 1) for key, item in value.items()}
        )
        return converted
    if isinstance(value, (list, tuple)):
        return celtypes.ListType([to_cel(item, depth + 1) for item in value])
    raise CelEvaluationError(f"a {type(value).__name__} is not a JSON value")


def to_python(value: Any) -> Any:
    """A CEL result as plain Python: bool, int, float, str, None, list and dict; other CEL values
    (timestamps, durations, quantities, types) as their text."""
    if value is None or isinstance(value, bool):
        return value
    if isinstance(value, celtypes.BoolType):
        return bool(value)
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        return float(value)
    if isinstance(value, str):
        return str(value)
    if isinstance(value, bytes):
        return bytes(value)
    if isinstance(value, Mapping):
        return {to_python(key): to_python(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [to_python(item) for item in value]
    if isinstance(value, Quantity):
        return str(value.value)
    return str(value)
