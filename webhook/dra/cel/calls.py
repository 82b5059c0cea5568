"""The convention every CEL function here follows, as cel-go's do.

A CEL error passed as an argument is the function's result (`failing`). An argument of a type
no overload takes raises TypeError (`no_such_overload`, `as_text`, `as_count`), which the
evaluator reports as `no such overload` naming the argument types. A string, bytes or list a
function builds stays within MAX_VALUE_LENGTH (`bounded`), else the evaluation is UNDECIDED.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from celpy import celtypes
from celpy.evaluation import CELEvalError, Result

from webhook.dra.cel.limits import MAX_VALUE_LENGTH, BeyondLimits
from webhook.dra.cel.values import kind_of


def failing(function: Callable[..., Result]) -> Callable[..., Result]:
    """Errors passed as arguments are the result, as in every CEL function."""

    @functools.wraps(function)
    def checked(*arguments: Any) -> Result:
        failed = next((value for value in arguments if isinstance(value, CELEvalError)), None)
        return failed if failed is not None else function(*arguments)

    return checked


def no_such_overload(*arguments: Any) -> TypeError:
    return TypeError(f"no such overload: {', '.join(kind_of(value) for value in arguments)}")


def bounded(value: Any) -> Any:
    """Strings, bytes and lists that expressions build stay within MAX_VALUE_LENGTH."""
    if isinstance(value, (str, bytes, list)) and len(value) > MAX_VALUE_LENGTH:
        raise BeyondLimits(f"a value longer than {MAX_VALUE_LENGTH}")
    if isinstance(value, str) and not isinstance(value, celtypes.StringType):
        return celtypes.StringType(value)
    if isinstance(value, bytes) and not isinstance(value, celtypes.BytesType):
        return celtypes.BytesType(value)
    if isinstance(value, list) and not isinstance(value, celtypes.ListType):
        return celtypes.ListType(value)
    return value


def as_text(value: Any) -> str:
    """An argument that only a string fits."""
    if not isinstance(value, str):
        raise no_such_overload(value)
    return value


def as_count(value: Any) -> int:
    """An argument that only an int fits: an offset, a count, a limit."""
    if not isinstance(value, celtypes.IntType):
        raise no_such_overload(value)
    return int(value)
