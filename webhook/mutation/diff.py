"""An RFC 6902 diff of two JSON documents, for the shapes mutation produces.

jsonpatch.make_patch searches for moves across the whole document, which cost about
1.2 ms of a 1.7 ms GPU review (measured). Mutators only edit values in place and
append to lists, so a structural walk gives the same minimal patch for them, and a
correct (if longer) one for anything else: list items are compared by position, extra
items appended, missing ones removed from the end.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from webhook.types import PatchOperation


def diff(before: Any, after: Any) -> list[PatchOperation]:
    return list(_diff(before, after, ""))


def _diff(before: Any, after: Any, path: str) -> Iterator[PatchOperation]:
    if type(before) is type(after) and isinstance(before, dict):
        yield from _diff_dicts(before, after, path)
    elif type(before) is type(after) and isinstance(before, list):
        yield from _diff_lists(before, after, path)
    elif before != after or type(before) is not type(after):
        yield {"op": "replace", "path": path, "value": after}


def _diff_dicts(before: dict[str, Any], after: dict[str, Any], path: str) -> Iterator[PatchOperation]:
    for key in before:
        if key not in after:
            yield {"op": "remove", "path": f"{path}/{escape(key)}"}
    for key, value in after.items():
        if key not in before:
            yield {"op": "add", "path": f"{path}/{escape(key)}", "value": value}
        elif not _same_leaf(before[key], value):
            yield from _diff(before[key], value, f"{path}/{escape(key)}")


def _same_leaf(before: Any, after: Any) -> bool:
    """Equal scalars, or one object twice: the common case, settled without building a path."""
    if before is after:
        return True
    kind = type(after)
    return type(before) is kind and kind is not dict and kind is not list and before == after


def _diff_lists(before: list[Any], after: list[Any], path: str) -> Iterator[PatchOperation]:
    common = min(len(before), len(after))
    for index in range(common):
        yield from _diff(before[index], after[index], f"{path}/{index}")
    for index in range(common, len(after)):
        yield {"op": "add", "path": f"{path}/{index}", "value": after[index]}
    for index in range(len(before) - 1, common - 1, -1):
        yield {"op": "remove", "path": f"{path}/{index}"}


def escape(key: object) -> str:
    """JSON Pointer escaping: '~' first, then '/' (nvidia.com/gpu -> nvidia.com~1gpu)."""
    return str(key).replace("~", "~0").replace("/", "~1")
