"""Readings of a container's `resources`, remembered by that part's content. Pure.

Every GPU rule reads a container's resources: whether the pod gets accelerators, its count, the
quota's demand, the built-in checks, and on /mutate the void and the checkpoint. A workload's
containers, and most workloads of a cluster, repeat a handful of resource sets, and unlike the
rest of a pod (its name, the service-account volume the apiserver names per pod) a resource set
holds nothing per pod. So a reading is worked out once per distinct content and looked up after:
the key is the resources' JSON, which the same content always gives and other content never does.

What is not remembered is read directly, every time:
- a resources part that is not JSON (a YAML timestamp, an integer past 64 bits, a string
  subclass: orjson refuses them here rather than spell them as JSON text would), or a large one;
- a reading that finds a problem: errors name the container, and are rare.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from typing import Any, Generic, TypeVar

import orjson

T = TypeVar("T")
C = TypeVar("C", bound=Hashable)
# A real resources part is well under 200 bytes of JSON; a larger one is read directly, so
# that hostile pods cannot fill the memory with keys.
MAX_KEY_BYTES = 1024
MAX_KEPT = 4096
_REFUSE_NON_JSON = orjson.OPT_PASSTHROUGH_DATETIME | orjson.OPT_PASSTHROUGH_SUBCLASS


def content_key(container: dict[str, Any]) -> bytes | None:
    """The container's resources as JSON, or None when they cannot stand for their content."""
    resources = container.get("resources")
    if resources is None:
        return b""
    if type(resources) is not dict:
        return None
    try:
        key = orjson.dumps(resources, option=_REFUSE_NON_JSON)
    except orjson.JSONEncodeError:
        return None
    return key if len(key) <= MAX_KEY_BYTES else None


class Remembered(Generic[C, T]):
    """`read(container, context)`'s answers by (context, content); `keep` says which to keep
    (the readings that found nothing wrong). Emptied when full: a few sets are ever hot."""

    def __init__(self, read: Callable[[dict[str, Any], C], T], keep: Callable[[T], bool]) -> None:
        self._read = read
        self._keep = keep
        self._found: dict[tuple[C, bytes], T] = {}

    def __call__(self, container: dict[str, Any], context: C) -> T:
        key = content_key(container)
        if key is None:
            return self._read(container, context)
        found = self._found.get((context, key), _MISSING)
        if found is not _MISSING:
            return found  # type: ignore[return-value]
        answer = self._read(container, context)
        if self._keep(answer):
            if len(self._found) >= MAX_KEPT:
                self._found.clear()
            self._found[(context, key)] = answer
        return answer


_MISSING = object()


def always(_: object) -> bool:
    return True
