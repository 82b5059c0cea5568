"""An RFC 6902 diff of two JSON documents, for the shapes mutation produces.

jsonpatch.make_patch searches for moves across the whole document, which cost about
1.2 ms of a 1.7 ms GPU review (measured). Mutators only edit values in place and
append to lists, so a structural walk gives the same minimal patch for them, and a
correct (if longer) one for anything else: list items are compared by position, extra
items appended, missing ones removed from the end.

Operations are appended to one list as the walk goes, and a path is joined only for an
operation: nested generators and a path string per visited node cost more than the walk.
"""

from __future__ import annotations

from typing import Any

from webhook.types import PatchOperation


def diff(before: Any, after: Any) -> list[PatchOperation]:
    found: list[PatchOperation] = []
    _diff(before, after, [], found)
    return found


def _diff(before: Any, after: Any, parts: list[str], found: list[PatchOperation]) -> None:
    if type(before) is type(after) and isinstance(before, dict):
        _diff_dicts(before, after, parts, found)
    elif type(before) is type(after) and isinstance(before, list):
        _diff_lists(before, after, parts, found)
    elif before != after or type(before) is not type(after):
        found.append({"op": "replace", "path": _path(parts), "value": after})


def _diff_dicts(
    before: dict[str, Any], after: dict[str, Any], parts: list[str], found: list[PatchOperation]
) -> None:
    for key in before:
        if key not in after:
            found.append({"op": "remove", "path": _path(parts, escape(key))})
    for key, value in after.items():
        if key not in before:
            found.append({"op": "add", "path": _path(parts, escape(key)), "value": value})
        else:
            _diff_child(before[key], value, key, parts, found)


def _diff_lists(before: list[Any], after: list[Any], parts: list[str], found: list[PatchOperation]) -> None:
    common = min(len(before), len(after))
    for index in range(common):
        _diff_child(before[index], after[index], index, parts, found)
    for index in range(common, len(after)):
        found.append({"op": "add", "path": _path(parts, str(index)), "value": after[index]})
    for index in range(len(before) - 1, common - 1, -1):
        found.append({"op": "remove", "path": _path(parts, str(index))})


def _diff_child(before: Any, after: Any, key: object, parts: list[str], found: list[PatchOperation]) -> None:
    """Equal scalars (the common case) are settled here, without a call or a path."""
    if before is after:
        return
    kind = type(after)
    if type(before) is kind and kind is not dict and kind is not list:
        if before != after:
            found.append({"op": "replace", "path": _path(parts, escape(key)), "value": after})
        return
    parts.append(escape(key))
    _diff(before, after, parts, found)
    parts.pop()


def _path(parts: list[str], last: str | None = None) -> str:
    joined = "".join("/" + part for part in parts)
    return joined if last is None else f"{joined}/{last}"


def escape(key: object) -> str:
    """JSON Pointer escaping: '~' first, then '/' (nvidia.com/gpu -> nvidia.com~1gpu)."""
    return str(key).replace("~", "~0").replace("/", "~1")
