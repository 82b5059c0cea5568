"""A quick structural check of the parts of a pod that mutators touch.

kube-apiserver has already decoded a real request into typed structs, so this only
ever fails for offline input or hostile bodies; it lets mutators trust the shape
instead of guarding every access.
"""

from __future__ import annotations

from typing import Any

from webhook.mutation.target import CONTAINER_LISTS, PodTarget

_SPEC_LISTS = ("tolerations", "volumes")
_SPEC_STRINGS = ("schedulerName", "priorityClassName", "runtimeClassName", "nodeName")
_CONTAINER_LISTS = ("env", "volumeMounts", "envFrom")


class ShapeError(ValueError):
    """The object is not shaped like a Kubernetes pod; the message names the field."""


def check_pod_shape(target: PodTarget) -> None:
    # Runs on every GPU review: a field's full path is formatted only for an error.
    pod = target.pod
    metadata = _optional(pod, "metadata", dict)
    if metadata:
        for key in ("name", "namespace", "generateName"):
            _optional(metadata, key, str, "metadata.")
        for key in ("labels", "annotations"):
            _string_map(metadata, key, "metadata.")
    spec = _optional(pod, "spec", dict)
    if not spec:
        return
    for key in _SPEC_STRINGS:
        _optional(spec, key, str, "spec.")
    _optional(spec, "terminationGracePeriodSeconds", int, "spec.")
    for key in _SPEC_LISTS:
        _list_of_maps(spec, key, "spec.")
    for list_name in CONTAINER_LISTS:
        for index, container in enumerate(_list_of_maps(spec, list_name, "spec.")):
            _container(container, f"spec.{list_name}[{index}].")
    _affinity(spec.get("affinity"))


def _container(container: dict[str, Any], prefix: str) -> None:
    _optional(container, "name", str, prefix)
    resources = _optional(container, "resources", dict, prefix) or {}
    for section in ("limits", "requests"):
        _optional(resources, section, dict, f"{prefix}resources.")
    for key in _CONTAINER_LISTS:
        _list_of_maps(container, key, prefix)


def _affinity(affinity: Any) -> None:
    if affinity is None:
        return
    _require(isinstance(affinity, dict), "spec.affinity must be an object")
    node = _optional(affinity, "nodeAffinity", dict, "spec.affinity.") or {}
    required_key = "requiredDuringSchedulingIgnoredDuringExecution"
    required = _optional(node, required_key, dict, "spec.affinity.nodeAffinity.") or {}
    for index, term in enumerate(_list_of_maps(required, "nodeSelectorTerms")):
        _list_of_maps(term, "matchExpressions", f"nodeSelectorTerms[{index}].")
    preferred_key = "preferredDuringSchedulingIgnoredDuringExecution"
    for index, item in enumerate(_list_of_maps(node, preferred_key)):
        _optional(item, "preference", dict, f"{preferred_key}[{index}].")


def _optional(parent: dict[str, Any], key: str, kind: type, prefix: str = "") -> Any:
    value = parent.get(key)
    if value is None or type(value) is kind:
        return value
    if isinstance(value, kind) and not (kind is int and isinstance(value, bool)):
        return value
    raise ShapeError(f"{prefix}{key} must be {_NAMES[kind]}")


def _list_of_maps(parent: dict[str, Any], key: str, prefix: str = "") -> list[dict[str, Any]]:
    value = parent.get(key)
    if value is None:
        return []
    if not (isinstance(value, list) and all(isinstance(v, dict) for v in value)):
        raise ShapeError(f"{prefix}{key} must be a list of objects")
    return list(value)


def _string_map(parent: dict[str, Any], key: str, prefix: str) -> None:
    value = parent.get(key)
    if value is None:
        return
    if not (isinstance(value, dict) and all(isinstance(v, str) for v in value.values())):
        raise ShapeError(f"{prefix}{key} must map strings to strings")


def _require(condition: bool, message: str) -> None:
    if not condition:
        raise ShapeError(message)


_NAMES = {dict: "an object", str: "a string", int: "an integer", list: "a list"}
