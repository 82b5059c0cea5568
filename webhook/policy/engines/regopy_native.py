"""rego-cpp's C calls that run per request, bound so that the small ones keep the GIL.

regopy binds every call through `ctypes.CDLL`, which releases and re-takes the GIL each
time. In a review thread, re-taking it waits for the event loop's thread, which may hold
it for a whole switch interval (5 ms). Only evaluation and the final copy of the input
(0.16 ms for a training pod) are long enough to be worth releasing it; the input's node
calls (about 300) and the output calls are bound through `ctypes.PyDLL` instead, and
check plain ints rather than regopy's IntEnum. Setting the input takes 0.34 against
0.67 ms with regopy.Input (measured).

regopy wraps integers outside int64 silently (2**63 reads as -2**63, 2**70 as 0); here
they go in as floats, which keeps their order and rough size.
"""

from __future__ import annotations

import ctypes
from collections.abc import Callable, Mapping, Sequence, Set
from typing import Any

from regopy import Interpreter, RegoError, rego_shared

_INT64 = range(-(2**63), 2**63)
_LIBRARY = ctypes.PyDLL(rego_shared.path)


def _function(name: str, *arguments: Any) -> Callable[..., int]:
    function = getattr(_LIBRARY, name)
    function.restype = ctypes.c_uint32
    function.argtypes = [ctypes.c_void_p, *arguments]
    return function  # type: ignore[no-any-return]


_new = _LIBRARY.regoNewInput
_new.restype = ctypes.c_void_p
_new.argtypes = []
_free = _LIBRARY.regoFreeInput
_free.restype = None
_free.argtypes = [ctypes.c_void_p]
_set = rego_shared.rego.regoSetInput  # regopy's CDLL binding: this one releases the GIL
_string = _function("regoInputString", ctypes.c_char_p)
_int = _function("regoInputInt", ctypes.c_int64)
_float = _function("regoInputFloat", ctypes.c_double)
_bool = _function("regoInputBoolean", ctypes.c_bool)
_null = _function("regoInputNull")
_item = _function("regoInputObjectItem")
_object = _function("regoInputObject", ctypes.c_uint32)
_array = _function("regoInputArray", ctypes.c_uint32)
_set_of = _function("regoInputSet", ctypes.c_uint32)
_output_ok = _LIBRARY.regoOutputOk
_output_ok.restype = ctypes.c_bool
_output_ok.argtypes = [ctypes.c_void_p]
_output_size = _function("regoOutputJSONSize")
_output_json = _function("regoOutputJSON", ctypes.c_char_p, ctypes.c_uint32)
free_output = _LIBRARY.regoFreeOutput
free_output.restype = None
free_output.argtypes = [ctypes.c_void_p]


def output_ok(output: int) -> bool:
    return bool(_output_ok(output))


def output_text(output: int) -> str:
    """The output as regopy's JSON-like text (not always valid JSON: a key `"` is not escaped)."""
    size = _output_size(output)
    buffer = ctypes.create_string_buffer(size)
    if _output_json(output, buffer, size):
        raise RegoError("regopy could not write its output")
    return buffer.value.decode()


def set_input(interpreter: Interpreter, value: Any) -> None:
    """Make `value` the interpreter's input; raise RegoError or ValueError if it cannot be."""
    handle = _new()
    try:
        if _add(handle, value):
            raise RegoError("regopy could not build the input")
        if _set(interpreter._impl, handle):
            raise RegoError(rego_shared.rego_get_error(interpreter._impl))
    finally:
        _free(handle)  # regoSetInput copies the value


def _add(handle: int, value: Any) -> int:
    """Push `value`'s node; a non-zero result is regopy's error code."""
    kind = type(value)
    if kind is str:
        return _string(handle, value.encode())
    if kind is dict:
        return _add_items(handle, value)
    if kind is list:
        return _add_sequence(handle, value) or _array(handle, len(value))
    if kind is bool:
        return _bool(handle, value)
    if kind is int:
        return _int(handle, value) if value in _INT64 else _float(handle, float(value))
    if kind is float:
        return _float(handle, value)
    if value is None:
        return _null(handle)
    return _add_other(handle, value)


def _add_items(handle: int, value: Mapping[Any, Any]) -> int:
    for key, item in value.items():
        failed = _add(handle, key) or _add(handle, item) or _item(handle)
        if failed:
            return failed
    return _object(handle, len(value))


def _add_sequence(handle: int, values: Any) -> int:
    for item in values:
        failed = _add(handle, item)
        if failed:
            return failed
    return 0


def _add_other(handle: int, value: Any) -> int:
    """Subclasses and other containers, as regopy.Input takes them."""
    if isinstance(value, str):
        return _add(handle, str(value))
    if isinstance(value, int):  # bool cannot be subclassed: an IntEnum, say
        return _add(handle, int(value))
    if isinstance(value, float):
        return _add(handle, float(value))
    if isinstance(value, Mapping):
        return _add_items(handle, value)
    if isinstance(value, Set):
        return _add_sequence(handle, value) or _set_of(handle, len(value))
    if isinstance(value, Sequence):
        return _add_sequence(handle, value) or _array(handle, len(value))
    raise ValueError(f"cannot give a {type(value).__name__} to Rego as input")
