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
    pod = target.pod
    metadata = _optional(pod, "metadata", dict, "metadata")
    if metadata:
        for key in ("name", "namespace", "generateName"):
            _optional(metadata, key, str, f"metadata.{key}")
        for key in ("labels", "annotations"):
            _string_map(metadata.get(key), f"metadata.{key}")
    spec = _optional(pod, "spec", dict, "spec")
    if not spec:
        return
    for key in _SPEC_STRINGS:
        _optional(spec, key, str, f"spec.{key}")
    _optional(spec, "terminationGracePeriodSeconds", int, "spec.terminationGracePeriodSeconds")
    for key in _SPEC_LISTS:
        _list_of_maps(spec.get(key), f"spec.{key}")
    for list_name in CONTAINER_LISTS:
        for index, container in enumerate(_list_of_maps(spec.get(list_name), f"spec.{list_name}")):
            _container(container, f"spec.{list_name}[{index}]")
    _affinity(spec.get("affinity"))


def _container(container: dict[str, Any], where: str) -> None:
    _optional(container, "name", str, f"{where}.name")
    resources = _optional(container, "resources", dict, f"{where}.resources") or {}
    for section in ("limits", "requests"):
        _optional(resources, section, dict, f"{where}.resources.{section}")
    for key in _CONTAINER_LISTS:
        _list_of_maps(container.get(key), f"{where}.{key}")


def _affinity(affinity: Any) -> None:
    if affinity is None:
        return
    _require(isinstance(affinity, dict), "spec.affinity must be an object")
    node = _optional(affinity, "nodeAffinity", dict, "spec.affinity.nodeAffinity") or {}
    required_key = "requiredDuringSchedulingIgnoredDuringExecution"
    required = _optional(node, required_key, dict, f"spec.affinity.nodeAffinity.{required_key}") or {}
    for index, term in enumerate(_list_of_maps(required.get("nodeSelectorTerms"), "nodeSelectorTerms")):
        _list_of_maps(term.get("matchExpressions"), f"nodeSelectorTerms[{index}].matchExpressions")
    preferred_key = "preferredDuringSchedulingIgnoredDuringExecution"
    for index, item in enumerate(_list_of_maps(node.get(preferred_key), preferred_key)):
        _optional(item, "preference", dict, f"{preferred_key}[{index}].preference")


def _optional(parent: dict[str, Any], key: str, kind: type, where: str) -> Any:
    value = parent.get(key)
    ok = value is None or (isinstance(value, kind) and not (kind is int and isinstance(value, bool)))
    _require(ok, f"{where} must be {_NAMES[kind]}")
    return value


def _list_of_maps(value: Any, where: str) -> list[dict[str, Any]]:
    if value is None:
        return []
    _require(
        isinstance(value, list) and all(isinstance(v, dict) for v in value),
        f"{where} must be a list of objects",
    )
    return list(value)


def _string_map(value: Any, where: str) -> None:
    if value is None:
        return
    ok = isinstance(value, dict) and all(isinstance(v, str) for v in value.values())
    _require(ok, f"{where} must map strings to strings")


def _require(condition: bool, message: str) -> None:
    if not condition:
        raise ShapeError(message)


_NAMES = {dict: "an object", str: "a string", int: "an integer", list: "a list"}
