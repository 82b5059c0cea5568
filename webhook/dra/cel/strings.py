"""cel-go's strings extension (version 2, without `format` and `strings.quote`) and the regex
library's `matches`, `find` and `findAll`, on RE2 as cel-go's are.

Offsets count code points; `trim` strips what Go's unicode.IsSpace calls space; a `replace`
that would grow past MAX_VALUE_LENGTH is stopped before it is built. `compile_regex` is shared
with the compile-time check, which refuses a literal pattern RE2 does not compile.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from typing import Any, Final, cast

import re2  # type: ignore[import-untyped]
from celpy import celtypes
from celpy.evaluation import CELEvalError, Result

from webhook.dra.cel.calls import as_count, as_text, bounded, failing, no_such_overload
from webhook.dra.cel.errors import runtime_error
from webhook.dra.cel.limits import MAX_VALUE_LENGTH, BeyondLimits


def _strings(function: Callable[..., Any]) -> Callable[..., Result]:
    """A string method: the receiver and every string argument must be strings."""

    @failing
    @functools.wraps(function)
    def method(text: Any, *arguments: Any) -> Result:
        if not isinstance(text, str):
            raise no_such_overload(text, *arguments)
        result = function(text, *arguments)
        return result if isinstance(result, CELEvalError) else cast(Result, bounded(result))

    return method


_REGEX_OPTIONS: Final = re2.Options()
_REGEX_OPTIONS.log_errors = False  # patterns come from users: no stderr line per bad one


@functools.lru_cache(maxsize=256)
def compile_regex(pattern: str) -> Any:
    try:
        return re2.compile(pattern, _REGEX_OPTIONS)
    except re2.error:
        return None


def _compiled_regex(pattern: Any) -> Any:
    compiled = compile_regex(as_text(pattern))
    if compiled is None:
        return runtime_error(f"invalid regular expression {str(pattern)[:40]!r}")
    return compiled


@_strings
def _matches(text: str, pattern: Any) -> Any:
    regex = _compiled_regex(pattern)
    return regex if isinstance(regex, CELEvalError) else celtypes.BoolType(regex.search(text) is not None)


@_strings
def _find(text: str, pattern: Any) -> Any:
    regex = _compiled_regex(pattern)
    if isinstance(regex, CELEvalError):
        return regex
    found = regex.search(text)
    return celtypes.StringType(found.group(0) if found else "")


@_strings
def _find_all(text: str, pattern: Any, limit: Any = None) -> Any:
    regex, limit = _compiled_regex(pattern), -1 if limit is None else as_count(limit)
    if isinstance(regex, CELEvalError):
        return regex
    found = [celtypes.StringType(match.group(0)) for match in regex.finditer(text)]
    return celtypes.ListType(found if limit < 0 else found[:limit])


@_strings
def _contains(text: str, part: Any) -> Any:
    return celtypes.BoolType(as_text(part) in text)


@_strings
def _starts_with(text: str, prefix: Any) -> Any:
    return celtypes.BoolType(text.startswith(as_text(prefix)))


@_strings
def _ends_with(text: str, suffix: Any) -> Any:
    return celtypes.BoolType(text.endswith(as_text(suffix)))


_ASCII_LOWER: Final = str.maketrans("ABCDEFGHIJKLMNOPQRSTUVWXYZ", "abcdefghijklmnopqrstuvwxyz")
_ASCII_UPPER: Final = str.maketrans("abcdefghijklmnopqrstuvwxyz", "ABCDEFGHIJKLMNOPQRSTUVWXYZ")
# Go's unicode.IsSpace, which the strings extension's trim() uses.
_GO_SPACE: Final = (
    "\t\n\v\f\r \x85\xa0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009"
    "\u200a\u2028\u2029\u202f\u205f\u3000"
)


@_strings
def _lower_ascii(text: str) -> Any:
    return text.translate(_ASCII_LOWER)


@_strings
def _upper_ascii(text: str) -> Any:
    return text.translate(_ASCII_UPPER)


@_strings
def _trim(text: str) -> Any:
    return text.strip(_GO_SPACE)


@_strings
def _char_at(text: str, index: Any) -> Any:
    position = as_count(index)
    if not 0 <= position <= len(text):
        return runtime_error(f"index out of range: {position}")
    return text[position : position + 1]


@_strings
def index_of(text: str, part: Any, start: Any = None) -> Any:
    """The strings extension's indexOf: code points; an offset must be inside the string."""
    part = as_text(part)
    if start is None or part == "":
        return celtypes.IntType(text.find(part) if start is None else as_count(start))
    position = as_count(start)
    if not 0 <= position < len(text):
        return runtime_error(f"index out of range: {position}")
    return celtypes.IntType(text.find(part, position))


@_strings
def last_index_of(text: str, part: Any, end: Any = None) -> Any:
    """lastIndexOf: the last match starting at or before the offset."""
    part = as_text(part)
    if end is None or part == "":
        return celtypes.IntType(text.rfind(part) if end is None else as_count(end))
    position = as_count(end)
    if not 0 <= position < len(text):
        return runtime_error(f"index out of range: {position}")
    return celtypes.IntType(text.rfind(part, 0, position + len(part)))


@_strings
def _replace(text: str, old: Any, new: Any, limit: Any = None) -> Any:
    count, old, new = -1 if limit is None else as_count(limit), as_text(old), as_text(new)
    if (
        count < 0
        and len(new) > len(old)
        and (len(text) + 1) * (len(new) - len(old) + 1) > MAX_VALUE_LENGTH * 2
    ):
        raise BeyondLimits(f"a value longer than {MAX_VALUE_LENGTH}")
    return text.replace(old, new, count)


@_strings
def _split(text: str, separator: Any, limit: Any = None) -> Any:
    count, separator = -1 if limit is None else as_count(limit), as_text(separator)
    if count == 0:
        return celtypes.ListType()
    if separator == "":
        parts = list(text) if count < 0 or count > len(text) else [*text[: count - 1], text[count - 1 :]]
    else:
        parts = text.split(separator, count - 1 if count > 0 else -1)
    return celtypes.ListType(celtypes.StringType(part) for part in parts)


@_strings
def _substring(text: str, start: Any, end: Any = None) -> Any:
    first, last = as_count(start), len(text) if end is None else as_count(end)
    if not 0 <= first <= last <= len(text):
        return runtime_error(f"substring out of range: [{first}:{last}] of {len(text)}")
    return text[first:last]


@failing
def _join(items: Any, separator: Any = "") -> Result:
    if not isinstance(items, list) or not all(isinstance(item, str) for item in items):
        raise no_such_overload(items, separator)
    return cast(Result, bounded(as_text(separator).join(items)))


FUNCTIONS: Final[Mapping[str, Callable[..., Result]]] = {
    "contains": _contains,
    "startsWith": _starts_with,
    "endsWith": _ends_with,
    "matches": _matches,
    "find": _find,
    "findAll": _find_all,
    "charAt": _char_at,
    "lowerAscii": _lower_ascii,
    "upperAscii": _upper_ascii,
    "trim": _trim,
    "replace": _replace,
    "split": _split,
    "substring": _substring,
    "join": _join,
}
