"""A quick structural check of the parts of a pod that mutators and security rules read.

kube-apiserver has already decoded a real request into typed structs, so this only
ever fails for offline input or hostile bodies. It lets mutators trust the shape
instead of guarding every access, and it keeps a malformed object from reaching the
Rego rules, where a field of the wrong type is undefined and a rule that reads it
finds nothing: `privileged: "true"` must be an error, never a clean pod.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from webhook.accounting.target import CONTAINER_LISTS, PodTarget

_SPEC_LISTS = ("tolerations", "resourceClaims")
_SPEC_STRINGS = ("schedulerName", "priorityClassName", "runtimeClassName", "nodeName", "serviceAccountName")
_SPEC_BOOLS = ("hostPID", "hostIPC", "hostNetwork", "hostUsers", "shareProcessNamespace")
_CONTAINER_STRINGS = ("name", "image", "restartPolicy")
_SECURITY_BOOLS = ("privileged", "allowPrivilegeEscalation", "readOnlyRootFilesystem", "runAsNonRoot")
# Every list of containers a pod has, ephemeral ones included: they run on the node like the others.
_ALL_CONTAINER_LISTS = (*CONTAINER_LISTS, "ephemeralContainers")


class ShapeError(ValueError):
    """The object is not shaped like a Kubernetes pod; the message names the field."""

    def __init__(self, reason: str, path: tuple[str, ...] = ()) -> None:
        super().__init__(reason)
        self.reason = reason
        self.path = path

    def within(self, *segments: str) -> ShapeError:
        """The same error, found inside the part that `segments` name."""
        return ShapeError(self.reason, (*segments, *self.path))

    def __str__(self) -> str:
        path = "".join(s if s.startswith("[") else f".{s}" for s in self.path).lstrip(".")
        return f"{path} {self.reason}" if path else self.reason


# Two paths, one verdict. Every review asks, and nearly every pod is well-shaped, so
# `_well_shaped` answers first: straight loops over the values a JSON decoder builds (exact
# types), a call per part rather than per field. Only a pod it does not accept is walked by the
# checks below, which accept the same JSON and also subclasses (offline callers pass those),
# and which name the field at fault. Paths are relative to the part being checked, and each
# caller prefixes its own part only when an error passes through it.


def check_pod_shape(target: PodTarget) -> None:
    pod = target.pod
    if _well_shaped(pod):
        return
    metadata = _optional(pod, "metadata", dict)
    if metadata:
        try:
            _metadata(metadata)
        except ShapeError as e:
            raise e.within("metadata") from None
    spec = _optional(pod, "spec", dict)
    if spec:
        try:
            _spec(spec)
        except ShapeError as e:
            raise e.within("spec") from None


def _metadata(metadata: dict[str, Any]) -> None:
    _optionals(metadata, ("name", "namespace", "generateName"), str)
    for key in ("labels", "annotations"):
        _string_map(metadata, key)


def _spec(spec: dict[str, Any]) -> None:
    _optionals(spec, _SPEC_STRINGS, str)
    _optionals(spec, _SPEC_BOOLS, bool)
    _optional(spec, "terminationGracePeriodSeconds", int)
    for key in _SPEC_LISTS:
        _list_of_maps(spec, key)
    _each(_list_of_maps(spec, "volumes"), "volumes", _volume)
    for list_name in _ALL_CONTAINER_LISTS:
        _each(_list_of_maps(spec, list_name), list_name, _container)
    affinity = spec.get("affinity")
    if affinity is not None:
        try:
            _affinity(affinity)
        except ShapeError as e:
            raise e.within("affinity") from None


def _each(items: list[dict[str, Any]], name: str, check: Callable[[dict[str, Any]], None]) -> None:
    for index, item in enumerate(items):
        try:
            check(item)
        except ShapeError as e:
            raise e.within(name, f"[{index}]") from None


def _part(parent: dict[str, Any], key: str, check: Callable[[Any], None]) -> None:
    value = parent.get(key)
    if value is None:
        return
    try:
        check(value)
    except ShapeError as e:
        raise e.within(key) from None


def _volume(volume: dict[str, Any]) -> None:
    _optional(volume, "name", str)
    _part(volume, "hostPath", _host_path)


def _host_path(host_path: Any) -> None:
    _object(host_path)
    _optional(host_path, "path", str)
    _optional(host_path, "type", str)


def _container(container: dict[str, Any]) -> None:
    _optionals(container, _CONTAINER_STRINGS, str)
    _part(container, "resources", _resources)
    _part(container, "securityContext", _security_context)
    for key in ("env", "envFrom", "volumeMounts"):
        items = container.get(key)
        if items is not None:
            _entries(items, key)


def _resources(resources: Any) -> None:
    _object(resources)
    for section in ("limits", "requests"):
        _optional(resources, section, dict)
    _list_of_maps(resources, "claims")


def _security_context(context: Any) -> None:
    _object(context)
    _optionals(context, _SECURITY_BOOLS, bool)
    _optional(context, "procMount", str)
    _part(context, "capabilities", _capabilities)


def _capabilities(capabilities: Any) -> None:
    _object(capabilities)
    for key in ("add", "drop"):
        _string_list(capabilities, key)


# The string fields of env, envFrom and volumeMounts entries that the security rules read.
_ENTRY_STRINGS = {"env": ("name", "value"), "envFrom": ("prefix",), "volumeMounts": ("name", "mountPath")}
_ENTRY_MAPS = {"env": ("valueFrom",), "envFrom": ("configMapRef", "secretRef"), "volumeMounts": ()}
_ENTRY_BOOLS = {"env": (), "envFrom": (), "volumeMounts": ("readOnly",)}


def _entries(items: Any, key: str) -> None:
    if not (isinstance(items, list) and all(isinstance(item, dict) for item in items)):
        raise ShapeError("must be a list of objects", (key,))
    _each(items, key, _ENTRY_CHECKS[key])


def _entry(strings: tuple[str, ...], maps: tuple[str, ...], bools: tuple[str, ...]) -> Callable[[Any], None]:
    def check(item: dict[str, Any]) -> None:
        _optionals(item, strings, str)
        _optionals(item, maps, dict)
        _optionals(item, bools, bool)

    return check


_ENTRY_CHECKS = {
    key: _entry(_ENTRY_STRINGS[key], _ENTRY_MAPS[key], _ENTRY_BOOLS[key]) for key in _ENTRY_STRINGS
}


def _affinity(affinity: Any) -> None:
    _object(affinity)
    _part(affinity, "nodeAffinity", _node_affinity)


def _node_affinity(node: Any) -> None:
    _object(node)
    _part(node, "requiredDuringSchedulingIgnoredDuringExecution", _node_selector)
    preferred = "preferredDuringSchedulingIgnoredDuringExecution"
    _each(_list_of_maps(node, preferred), preferred, _weighted_term)


def _node_selector(selector: Any) -> None:
    _object(selector)
    _each(_list_of_maps(selector, "nodeSelectorTerms"), "nodeSelectorTerms", _selector_term)


def _selector_term(term: dict[str, Any]) -> None:
    _list_of_maps(term, "matchExpressions")


def _weighted_term(item: dict[str, Any]) -> None:
    _optional(item, "preference", dict)


def _object(value: Any) -> None:
    if not isinstance(value, dict):
        raise ShapeError("must be an object")


def _optional(parent: dict[str, Any], key: str, kind: type) -> Any:
    value = parent.get(key)
    if value is None or type(value) is kind:
        return value
    if isinstance(value, kind) and not (kind is int and isinstance(value, bool)):
        return value
    raise ShapeError(f"must be {_NAMES[kind]}", (key,))


def _optionals(parent: dict[str, Any], keys: tuple[str, ...], kind: type) -> None:
    """_optional() for each key; values of the exact type, the common case, pass without a call."""
    get = parent.get
    for key in keys:
        value = get(key)
        if value is not None and type(value) is not kind:
            _optional(parent, key, kind)


def _list_of_maps(parent: dict[str, Any], key: str) -> list[dict[str, Any]]:
    value = parent.get(key)
    if value is None:
        return []
    if not (isinstance(value, list) and all(isinstance(v, dict) for v in value)):
        raise ShapeError("must be a list of objects", (key,))
    return list(value)


def _string_list(parent: dict[str, Any], key: str) -> None:
    value = parent.get(key)
    if value is None:
        return
    if not (isinstance(value, list) and all(type(v) is str for v in value)):
        raise ShapeError("must be a list of strings", (key,))


def _string_map(parent: dict[str, Any], key: str) -> None:
    value = parent.get(key)
    if value is None:
        return
    if not (isinstance(value, dict) and all(isinstance(v, str) for v in value.values())):
        raise ShapeError("must map strings to strings", (key,))


_NAMES = {dict: "an object", str: "a string", int: "an integer", list: "a list", bool: "a boolean"}


def _well_shaped(pod: dict[str, Any]) -> bool:
    """The checks below, on exact JSON types only; False means "walk it", not "malformed"."""
    metadata, spec = pod.get("metadata"), pod.get("spec")
    if metadata is not None and not (type(metadata) is dict and _plain_metadata(metadata)):
        return False
    return spec is None or (type(spec) is dict and _plain_spec(spec))


def _plain_metadata(metadata: dict[str, Any]) -> bool:
    if not _typed(metadata, ("name", "namespace", "generateName"), str):
        return False
    for key in ("labels", "annotations"):
        found = metadata.get(key)
        if found is not None and not (type(found) is dict and all(type(v) is str for v in found.values())):
            return False
    return True


def _plain_spec(spec: dict[str, Any]) -> bool:
    if not (_typed(spec, _SPEC_STRINGS, str) and _typed(spec, _SPEC_BOOLS, bool)):
        return False
    if not _typed(spec, ("terminationGracePeriodSeconds",), int):
        return False
    if not (_maps(spec.get("tolerations")) and _maps(spec.get("resourceClaims"))):
        return False
    volumes = spec.get("volumes")
    if not (_maps(volumes) and all(_plain_volume(v) for v in volumes or ())):
        return False
    for list_name in _ALL_CONTAINER_LISTS:
        containers = spec.get(list_name)
        if not (_maps(containers) and all(_plain_container(c) for c in containers or ())):
            return False
    affinity = spec.get("affinity")
    return affinity is None or (type(affinity) is dict and _plain_affinity(affinity))


def _plain_volume(volume: dict[str, Any]) -> bool:
    host_path = volume.get("hostPath")
    if host_path is not None and not (type(host_path) is dict and _typed(host_path, ("path", "type"), str)):
        return False
    return _typed(volume, ("name",), str)


def _plain_container(container: dict[str, Any]) -> bool:
    if not _typed(container, _CONTAINER_STRINGS, str):
        return False
    resources = container.get("resources")
    if resources is not None and not (
        type(resources) is dict
        and _typed(resources, ("limits", "requests"), dict)
        and _maps(resources.get("claims"))
    ):
        return False
    context = container.get("securityContext")
    if context is not None and not (type(context) is dict and _plain_security_context(context)):
        return False
    for key, strings, maps, bools in _ENTRY_TYPES:
        items = container.get(key)
        if items is not None and not (
            type(items) is list and all(_plain_entry(i, strings, maps, bools) for i in items)
        ):
            return False
    return True


def _plain_security_context(context: dict[str, Any]) -> bool:
    if not (_typed(context, _SECURITY_BOOLS, bool) and _typed(context, ("procMount",), str)):
        return False
    capabilities = context.get("capabilities")
    if capabilities is None:
        return True
    if type(capabilities) is not dict:
        return False
    for key in ("add", "drop"):
        names = capabilities.get(key)
        if names is not None and not (type(names) is list and all(type(n) is str for n in names)):
            return False
    return True


def _plain_entry(item: Any, strings: tuple[str, ...], maps: tuple[str, ...], bools: tuple[str, ...]) -> bool:
    return (
        type(item) is dict
        and _typed(item, strings, str)
        and _typed(item, maps, dict)
        and _typed(item, bools, bool)
    )


def _plain_affinity(affinity: dict[str, Any]) -> bool:
    node = affinity.get("nodeAffinity")
    if node is None:
        return True
    if type(node) is not dict:
        return False
    required = node.get("requiredDuringSchedulingIgnoredDuringExecution")
    if required is not None:
        if type(required) is not dict:
            return False
        terms = required.get("nodeSelectorTerms")
        if not (_maps(terms) and all(_maps(t.get("matchExpressions")) for t in terms or ())):
            return False
    preferred = node.get("preferredDuringSchedulingIgnoredDuringExecution")
    return _maps(preferred) and all(_typed(p, ("preference",), dict) for p in preferred or ())


def _typed(parent: dict[str, Any], keys: tuple[str, ...], kind: type) -> bool:
    get = parent.get
    for key in keys:
        value = get(key)
        if value is not None and type(value) is not kind:
            return False
    return True


def _maps(value: Any) -> bool:
    """Absent, or a list of objects."""
    return value is None or (type(value) is list and all(type(v) is dict for v in value))


_ENTRY_TYPES = tuple(
    (key, _ENTRY_STRINGS[key], _ENTRY_MAPS[key], _ENTRY_BOOLS[key]) for key in _ENTRY_STRINGS
)
