"""An apply configuration merged into an object: server-side apply's merge, without field
ownership (kubernetes/kubernetes staging/src/k8s.io/apiserver/pkg/admission/plugin/policy/
mutating/patch/smd.go; the list types are those of k8s.io/api core/v1 types.go).

Maps merge field by field; a list is replaced whole unless the schema makes it a map keyed by
some of its items' fields (containers by name) or a set (finalizers). The schema is known here
only for the lists below; any other list is replaced, as an atomic list is.
"""

from __future__ import annotations

import copy
from typing import Any

# Field name -> the keys of its items, for the list-maps of Pods and pod templates.
LIST_MAP_KEYS: dict[str, tuple[str, ...]] = {
    "containers": ("name",),
    "initContainers": ("name",),
    "ephemeralContainers": ("name",),
    "env": ("name",),
    "volumes": ("name",),
    "volumeMounts": ("mountPath",),
    "volumeDevices": ("devicePath",),
    "ports": ("containerPort", "protocol"),
    "imagePullSecrets": ("name",),
    "resourceClaims": ("name",),
    "hostAliases": ("ip",),
    "topologySpreadConstraints": ("topologyKey", "whenUnsatisfiable"),
    "ownerReferences": ("uid",),
}
LIST_SETS = frozenset({"finalizers"})
_DEFAULT_KEY_VALUES = {"protocol": "TCP"}  # a port without a protocol is TCP's


class ApplyError(ValueError):
    """The apply configuration cannot be merged (a list-map item without its key)."""


def merge(obj: Any, applied: Any) -> Any:
    """`obj` with `applied` merged in; neither is changed."""
    return _merge(copy.deepcopy(obj), applied, "")


def _merge(current: Any, applied: Any, name: str) -> Any:
    if isinstance(applied, dict) and isinstance(current, dict):
        for key, value in applied.items():
            current[key] = _merge(current.get(key), value, key) if key in current else copy.deepcopy(value)
        return current
    if isinstance(applied, list) and isinstance(current, list):
        if name in LIST_MAP_KEYS:
            return _merge_list_map(current, applied, LIST_MAP_KEYS[name], name)
        if name in LIST_SETS:
            return current + [v for v in applied if v not in current]
    return copy.deepcopy(applied)


def _merge_list_map(current: list[Any], applied: list[Any], keys: tuple[str, ...], name: str) -> list[Any]:
    merged = list(current)
    for item in applied:
        key = _key(item, keys, name)
        at = next((i for i, old in enumerate(merged) if _key(old, keys, name, strict=False) == key), None)
        if at is None:
            merged.append(copy.deepcopy(item))
        else:
            merged[at] = _merge(merged[at], item, "")
    return merged


def _key(item: Any, keys: tuple[str, ...], name: str, *, strict: bool = True) -> tuple[Any, ...] | None:
    if not isinstance(item, dict) or (strict and keys[0] not in item):
        if strict:
            raise ApplyError(f"an item of {name} needs its key field {keys[0]!r}")
        return None
    return tuple(item.get(k, _DEFAULT_KEY_VALUES.get(k)) for k in keys)
