"""An RFC 6902 diff of two JSON documents, for the shapes mutation produces.

jsonpatch.make_patch searches for moves across the whole document, which cost about
1.2 ms of a 1.7 ms GPU review (measured). Mutators only edit values in place and
append to lists, so a structural walk gives the same minimal patch for them, and a
correct (if longer) one for anything else: list items are compared by position, extra
items appended, missing ones removed from the end.

The walk is most of a review's cost after the mutators, and that cost is Python calls and
strings: each level's path is one string built on the way down, and a key is escaped only
when it holds '~' or '/' (31 µs against 25 µs per GPU pod, measured).
"""

from __future__ import annotations

from typing import Any

from webhook.types import PatchOperation

_ABSENT = object()


def diff(before: Any, after: Any) -> list[PatchOperation]:
    found: list[PatchOperation] = []
    _diff(before, after, "", found)
    return found


def _diff(before: Any, after: Any, path: str, found: list[PatchOperation]) -> None:
    kind = type(after)
    if type(before) is not kind:
        found.append({"op": "replace", "path": path, "value": after})
    elif kind is dict:
        _diff_dicts(before, after, path, found)
    elif kind is list:
        _diff_lists(before, after, path, found)
    elif before != after:
        found.append({"op": "replace", "path": path, "value": after})


def _diff_dicts(
    before: dict[str, Any], after: dict[str, Any], path: str, found: list[PatchOperation]
) -> None:
    for key in before:
        if key not in after:
            found.append({"op": "remove", "path": f"{path}/{escape(key)}"})
    for key, value in after.items():
        old = before.get(key, _ABSENT)
        if old is _ABSENT:
            found.append({"op": "add", "path": f"{path}/{escape(key)}", "value": value})
        elif old is not value:  # a part the draft shares is equal: no call, no escape
            _diff_child(old, value, path, escape(key), found)


def _diff_lists(before: list[Any], after: list[Any], path: str, found: list[PatchOperation]) -> None:
    common = min(len(before), len(after))
    for index in range(common):
        if before[index] is not after[index]:
            _diff_child(before[index], after[index], path, str(index), found)
    for index in range(common, len(after)):
        found.append({"op": "add", "path": f"{path}/{index}", "value": after[index]})
    for index in range(len(before) - 1, common - 1, -1):
        found.append({"op": "remove", "path": f"{path}/{index}"})


def _diff_child(before: Any, after: Any, parent: str, key: str, found: list[PatchOperation]) -> None:
    """Equal scalars, the common case, are settled here without a further call."""
    if before is after:
        return
    kind = type(after)
    if type(before) is not kind:
        found.append({"op": "replace", "path": f"{parent}/{key}", "value": after})
    elif kind is dict:
        _diff_dicts(before, after, f"{parent}/{key}", found)
    elif kind is list:
        _diff_lists(before, after, f"{parent}/{key}", found)
    elif before != after:
        found.append({"op": "replace", "path": f"{parent}/{key}", "value": after})


def escape(key: str) -> str:
    """JSON Pointer escaping: '~' first, then '/' (nvidia.com/gpu -> nvidia.com~1gpu)."""
    if "~" in key or "/" in key:
        return key.replace("~", "~0").replace("/", "~1")
    return key
