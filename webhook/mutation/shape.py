"""A quick structural check of the parts of a pod that mutators and security rules read.

kube-apiserver has already decoded a real request into typed structs, so this only
ever fails for offline input or hostile bodies. It lets mutators trust the shape
instead of guarding every access, and it keeps a malformed object from reaching the
Rego rules, where a field of the wrong type is undefined and a rule that reads it
finds nothing: `privileged: "true"` must be an error, never a clean pod.
"""

from __future__ import annotations

from typing import Any

from webhook.mutation.target import CONTAINER_LISTS, PodTarget

_SPEC_LISTS = ("tolerations", "resourceClaims")
_SPEC_STRINGS = ("schedulerName", "priorityClassName", "runtimeClassName", "nodeName", "serviceAccountName")
_SPEC_BOOLS = ("hostPID", "hostIPC", "hostNetwork", "hostUsers", "shareProcessNamespace")
_CONTAINER_STRINGS = ("name", "image", "restartPolicy")
_SECURITY_BOOLS = ("privileged", "allowPrivilegeEscalation", "readOnlyRootFilesystem", "runAsNonRoot")
# Every list of containers a pod has, ephemeral ones included: they run on the node like the others.
_ALL_CONTAINER_LISTS = (*CONTAINER_LISTS, "ephemeralContainers")


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
    for key in _SPEC_BOOLS:
        _optional(spec, key, bool, "spec.")
    _optional(spec, "terminationGracePeriodSeconds", int, "spec.")
    for key in _SPEC_LISTS:
        _list_of_maps(spec, key, "spec.")
    for index, volume in enumerate(_list_of_maps(spec, "volumes", "spec.")):
        _volume(volume, index)
    for list_name in _ALL_CONTAINER_LISTS:
        for index, container in enumerate(_list_of_maps(spec, list_name, "spec.")):
            _container(container, list_name, index)
    _affinity(spec.get("affinity"))


def _volume(volume: dict[str, Any], index: int) -> None:
    host_path = volume.get("hostPath")
    if volume.get("name") is not None and type(volume["name"]) is not str:
        raise ShapeError(f"spec.volumes[{index}].name must be a string")
    if host_path is None:
        return
    prefix = f"spec.volumes[{index}].hostPath."
    _require(isinstance(host_path, dict), prefix[:-1] + " must be an object")
    _optional(host_path, "path", str, prefix)
    _optional(host_path, "type", str, prefix)


def _container(container: dict[str, Any], list_name: str, index: int) -> None:
    # Runs for every container of every review: the path prefix is formatted only for an error.
    for key in _CONTAINER_STRINGS:
        value = container.get(key)
        if value is not None and type(value) is not str:
            raise ShapeError(f"{_where(list_name, index)}{key} must be a string")
    resources = container.get("resources")
    if resources is not None:
        _resources(resources, list_name, index)
    context = container.get("securityContext")
    if context is not None:
        _security_context(context, list_name, index)
    for key in ("env", "envFrom", "volumeMounts"):
        items = container.get(key)
        if items is not None:
            _entries(items, key, list_name, index)


def _where(list_name: str, index: int) -> str:
    return f"spec.{list_name}[{index}]."


def _resources(resources: Any, list_name: str, index: int) -> None:
    prefix = _where(list_name, index)
    _require(isinstance(resources, dict), f"{prefix}resources must be an object")
    for section in ("limits", "requests"):
        _optional(resources, section, dict, f"{prefix}resources.")
    _list_of_maps(resources, "claims", f"{prefix}resources.")


def _security_context(context: Any, list_name: str, index: int) -> None:
    prefix = f"{_where(list_name, index)}securityContext."
    _require(isinstance(context, dict), prefix[:-1] + " must be an object")
    for key in _SECURITY_BOOLS:
        _optional(context, key, bool, prefix)
    _optional(context, "procMount", str, prefix)
    capabilities = _optional(context, "capabilities", dict, prefix)
    if capabilities:
        for key in ("add", "drop"):
            _string_list(capabilities, key, f"{prefix}capabilities.")


# The string fields of env, envFrom and volumeMounts entries that the security rules read.
_ENTRY_STRINGS = {"env": ("name", "value"), "envFrom": ("prefix",), "volumeMounts": ("name", "mountPath")}
_ENTRY_MAPS = {"env": ("valueFrom",), "envFrom": ("configMapRef", "secretRef"), "volumeMounts": ()}


def _entries(items: Any, key: str, list_name: str, index: int) -> None:
    if not (isinstance(items, list) and all(isinstance(item, dict) for item in items)):
        raise ShapeError(f"{_where(list_name, index)}{key} must be a list of objects")
    for position, item in enumerate(items):
        for field in _ENTRY_STRINGS[key]:
            value = item.get(field)
            if value is not None and type(value) is not str:
                raise ShapeError(f"{_where(list_name, index)}{key}[{position}].{field} must be a string")
        for field in _ENTRY_MAPS[key]:
            _optional(item, field, dict, f"{_where(list_name, index)}{key}[{position}].")
        if key == "volumeMounts":
            _optional(item, "readOnly", bool, f"{_where(list_name, index)}{key}[{position}].")


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


def _string_list(parent: dict[str, Any], key: str, prefix: str) -> None:
    value = parent.get(key)
    if value is None:
        return
    if not (isinstance(value, list) and all(type(v) is str for v in value)):
        raise ShapeError(f"{prefix}{key} must be a list of strings")


def _string_map(parent: dict[str, Any], key: str, prefix: str) -> None:
    value = parent.get(key)
    if value is None:
        return
    if not (isinstance(value, dict) and all(isinstance(v, str) for v in value.values())):
        raise ShapeError(f"{prefix}{key} must map strings to strings")


def _require(condition: bool, message: str) -> None:
    if not condition:
        raise ShapeError(message)


_NAMES = {dict: "an object", str: "a string", int: "an integer", list: "a list", bool: "a boolean"}
