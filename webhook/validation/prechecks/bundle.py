"""Prechecks for the templates of policies/security, one per template, under a comment naming its rule.

Each reads a constraint's parameters once, when the policies load, and returns the check of
a pod: True only when its template's `violation` set is certainly empty for the pod and the
parameters. They read the same parameters with the same defaults as the Rego, and return
None (no check: Rego decides) or False whenever a value has a type the Rego could treat
differently from Python. The pod is read through its facts (facts.py), gathered once per
request for every check. Being a GPU pod only ever adds a condition to a finding, so no
check needs to know it.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from webhook import vendors
from webhook.validation.prechecks.facts import normal_capability
from webhook.validation.prechecks.pod import PodCreate

Parameters = Mapping[str, Any]
# The check of a pod for one constraint's parameters; see the module's docstring.
Check = Callable[[PodCreate], bool]


def _strings(parameters: Parameters, name: str, default: list[str]) -> list[str] | None:
    """A parameter read as `object.get(input.parameters, name, default)`, if it is a list of strings."""
    value = parameters.get(name, default)
    if isinstance(value, list) and all(isinstance(item, str) for item in value):
        return value
    return None


def _optional(container: Mapping[str, Any], name: str) -> Any:
    """A field that is absent or null reads as an empty list: Rego iterates nothing in either."""
    value = container.get(name)
    return [] if value is None else value


def _clears_all(pod: PodCreate) -> bool:
    return True


# GpuAllowedRegistries: every image must come from one of `registries`; none listed allows all.


def allowed_registries(parameters: Parameters) -> Check | None:
    registries = _strings(parameters, "registries", [])
    if registries is None:
        return None
    if not registries:
        return _clears_all
    prefixes = tuple(_trim_suffix(registry, "/") + "/" for registry in registries)

    def check(pod: PodCreate) -> bool:
        images = pod.facts.images
        return images is not None and all(_full_name(image).startswith(prefixes) for image in images)

    return check


def _trim_suffix(text: str, suffix: str) -> str:
    return text[: -len(suffix)] if text.endswith(suffix) else text


def _full_name(image: str) -> str:
    """Docker's reading of a reference: the first part is a registry only if it looks like a host."""
    parts = image.split("/")
    if len(parts) == 1:
        return "docker.io/library/" + image
    first = parts[0]
    host_like = "." in first or ":" in first or first == "localhost"
    return image if host_like else "docker.io/" + image


# GpuAddedCapabilities: no container adds a capability in `capabilities`.

_NODE_CAPABILITIES = [
    "ALL",
    "SYS_ADMIN",
    "SYS_MODULE",
    "SYS_RAWIO",
    "SYS_PTRACE",
    "SYS_BOOT",
    "SYS_TIME",
    "SYS_RESOURCE",
    "SYS_PACCT",
    "SYS_TTY_CONFIG",
    "SYSLOG",
    "DAC_READ_SEARCH",
    "LINUX_IMMUTABLE",
    "MAC_ADMIN",
    "MAC_OVERRIDE",
    "AUDIT_CONTROL",
    "AUDIT_READ",
    "BPF",
    "PERFMON",
    "CHECKPOINT_RESTORE",
    "WAKE_ALARM",
    "BLOCK_SUSPEND",
]


def added_capabilities(parameters: Parameters) -> Check | None:
    listed = _strings(parameters, "capabilities", _NODE_CAPABILITIES)
    # Rego's upper() and Python's differ beyond ASCII ("ß"): leave such names to Rego.
    if listed is None or not all(name.isascii() for name in listed):
        return None
    disallowed = frozenset(normal_capability(name) for name in listed)

    def check(pod: PodCreate) -> bool:
        added = pod.facts.added_capabilities
        return added is not None and disallowed.isdisjoint(added)

    return check


# GpuDeviceEnvironment: no device variable but void, none or empty; driver capabilities from the
# allowed list; no envFrom prefix that could spell a device variable; no envFrom without a prefix
# in a container that gets GPUs. A GPU feature set to `enabled` (allowedGpuFeatures) is left to
# Rego: only Rego knows which DRA claims get GPUs (input.gpu.claims).

_DEVICE_VARIABLES = [v.name for v in vendors.DEVICE_VARIABLES if not v.prefix]
_DEVICE_PREFIXES = [v.name for v in vendors.DEVICE_VARIABLES if v.prefix]
_QUIET_VALUES = ["void", "none", ""]
_DRIVER_CAPABILITIES = ["compute", "compat32", "graphics", "utility", "video", "display", "ngx"]
_CAPABILITIES_VARIABLE = "NVIDIA_DRIVER_CAPABILITIES"
# A capability as the toolkit spells them; anything else (a tab, a non-ASCII space) is left to
# Rego, whose trim_space may read it otherwise than Python.
_CAPABILITY_WORD = re.compile(r" *([a-z0-9_]*) *")
_GPU_RESOURCES = {
    "nvidia.com/gpu",
    "nvidia.com/gpu.shared",
    "nvidia.com/gpumem",
    "nvidia.com/gpumem-percentage",
    "nvidia.com/gpucores",
}
_KAI_ANNOTATIONS = ("gpu-fraction", "gpu-memory")


@dataclass(frozen=True)
class _DeviceRules:
    """GpuDeviceEnvironment's parameters, read once."""

    variables: frozenset[str]
    prefixes: tuple[str, ...]
    quiet: frozenset[str]
    capabilities: frozenset[str]
    extra: frozenset[str]
    env_from_checked: bool

    def check(self, pod: PodCreate) -> bool:
        env, sources = pod.facts.env, pod.facts.env_from
        if env is None or sources is None:
            return False
        for name, entry in env:
            watched = (
                name in self.variables or name.startswith(self.prefixes) or name == _CAPABILITIES_VARIABLE
            )
            if watched and not self._quiet(name, entry):
                return False
        for index, prefix in sources:
            if prefix and self._spells(prefix):
                return False
            if (
                not prefix
                and self.env_from_checked
                and _may_get_gpus(pod, *pod.containers[index], self.extra)
            ):
                return False
        return True

    def _quiet(self, name: str, entry: Mapping[str, Any]) -> bool:
        named = name in self.variables or name.startswith(self.prefixes)
        if not named and name != _CAPABILITIES_VARIABLE:
            return True
        value = entry.get("value", "")
        if "valueFrom" in entry or type(value) is not str:
            return False
        if named and value not in self.quiet:
            return False
        return name != _CAPABILITIES_VARIABLE or _known_capabilities(value, self.capabilities)

    def _spells(self, prefix: str) -> bool:
        """An envFrom prefix that could spell a device variable (the template's spelled_by)."""
        if any(variable.startswith(prefix) for variable in self.variables):
            return True
        return any(family.startswith(prefix) or prefix.startswith(family) for family in self.prefixes)


def device_environment(parameters: Parameters) -> Check | None:
    variables = _strings(parameters, "variables", _DEVICE_VARIABLES)
    prefixes = _strings(parameters, "variablePrefixes", _DEVICE_PREFIXES)
    quiet = _strings(parameters, "allowedValues", _QUIET_VALUES)
    capabilities = _strings(parameters, "allowedDriverCapabilities", _DRIVER_CAPABILITIES)
    extra = _strings(parameters, "extraGpuResources", [])
    if variables is None or prefixes is None or quiet is None or capabilities is None or extra is None:
        return None
    rules = _DeviceRules(
        frozenset(variables),
        tuple(prefixes),
        frozenset(quiet),
        frozenset(capabilities),
        frozenset(extra),
        env_from_checked=parameters.get("allowEnvFrom") is not True,
    )
    return rules.check


def _known_capabilities(value: str, allowed: frozenset[str]) -> bool:
    for part in value.split(","):
        word = _CAPABILITY_WORD.fullmatch(part)
        if word is None or (word[1] and word[1] not in allowed):
            return False
    return True


def _may_get_gpus(pod: PodCreate, field: str, container: Mapping[str, Any], extra: frozenset[str]) -> bool:
    """True unless the container certainly gets no GPU (the bundle's gets_gpu is false)."""
    accelerators = pod.gpu.get("names", [])
    if not isinstance(accelerators, list):
        return True
    resources = _optional(container, "resources")
    if resources == []:
        resources = {}
    if not isinstance(resources, Mapping):
        return True
    for section in ("limits", "requests"):
        values = _optional(resources, section)
        if values == []:
            continue
        if not isinstance(values, Mapping):
            return True
        for name in values:
            if name in _GPU_RESOURCES or name in extra or str(name).startswith("nvidia.com/mig-"):
                return True
            if name in accelerators:
                return True
    if _optional(resources, "claims") != []:
        return True
    annotations = pod.metadata.get("annotations", {})
    if not isinstance(annotations, Mapping):
        return True
    return field == "containers" and any(key in annotations for key in _KAI_ANNOTATIONS)


# GpuHostPaths: no hostPath volume at all; any hostPath is left to Rego.


def host_paths(parameters: Parameters) -> Check | None:
    return _no_host_path


def _no_host_path(pod: PodCreate) -> bool:
    return pod.facts.no_host_path


# GpuDeviceListMounts: no mount path names nvidia-container-devices.


def device_list_mounts(parameters: Parameters) -> Check | None:
    return _no_device_list_mount


def _no_device_list_mount(pod: PodCreate) -> bool:
    return pod.facts.no_device_list_mount


# GpuCdiAnnotations: no annotation the container runtime reads as a CDI device request.


def cdi_annotations(parameters: Parameters) -> Check | None:
    prefixes = _strings(parameters, "annotationPrefixes", [])
    if prefixes is None:
        return None
    starts = tuple(prefixes)

    def check(pod: PodCreate) -> bool:
        keys = pod.facts.annotation_keys  # None also when a key is not a string: left to Rego
        if keys is None or not pod.facts.no_cdi_domain_key:
            return False
        return not starts or not any(key.startswith(starts) for key in keys)

    return check


# GpuHostNamespaces: neither hostIPC, hostPID nor (unless allowed) hostNetwork is true.


def host_namespaces(parameters: Parameters) -> Check | None:
    network_checked = parameters.get("allowHostNetwork", False) is not True

    def check(pod: PodCreate) -> bool:
        if network_checked and pod.spec.get("hostNetwork") is True:
            return False
        return pod.spec.get("hostIPC") is not True and pod.spec.get("hostPID") is not True

    return check


# GpuMaxPerPod: gpu-webhook's count (input.gpu) is at most `max`, and was read without error.


def max_per_pod(parameters: Parameters) -> Check | None:
    limit = parameters.get("max")
    if type(limit) is not int:
        return None

    def check(pod: PodCreate) -> bool:
        devices = pod.gpu.get("devices")
        return "error" not in pod.gpu and type(devices) is int and devices <= limit

    return check


# GpuPresetNodeName: spec.nodeName is unset or empty.


def preset_node_name(parameters: Parameters) -> Check | None:
    return _no_node_name


def _no_node_name(pod: PodCreate) -> bool:
    return bool(pod.spec.get("nodeName", "") == "")


# GpuPrivilegedContainer: no container is privileged.


def privileged_container(parameters: Parameters) -> Check | None:
    return _unprivileged


def _unprivileged(pod: PodCreate) -> bool:
    return pod.facts.unprivileged


# GpuSchedulerAnnotations: on create, no annotation or label that a GPU scheduler owns. A key the
# template might allow (KAI's ConfigMap name) is left to the Rego.


@dataclass(frozen=True)
class _Owned:
    """The keys of one kind (annotations or labels) that a scheduler owns."""

    keys: frozenset[str]
    prefixes: tuple[str, ...]
    patterns: tuple[tuple[str, str], ...]  # (prefix, suffix)
    pattern_prefixes: tuple[str, ...]  # a key that starts with none of these matches no pattern

    def none_in(self, keys: tuple[str, ...] | None) -> bool:
        if keys is None:
            return False
        for key in keys:
            if key in self.keys or key.startswith(self.prefixes):
                return False
            if key.startswith(self.pattern_prefixes) and any(
                key.startswith(prefix) and key.endswith(suffix) for prefix, suffix in self.patterns
            ):
                return False
        return True


def scheduler_annotations(parameters: Parameters) -> Check | None:
    annotations, labels = _owned(parameters, "annotations"), _owned(parameters, "labels")
    if annotations is None or labels is None:
        return None

    def check(pod: PodCreate) -> bool:
        return annotations.none_in(pod.facts.annotation_keys) and labels.none_in(pod.facts.label_keys)

    return check


def _owned(parameters: Parameters, kind: str) -> _Owned | None:
    singular = kind[:-1]
    listed = _strings(parameters, kind, [])
    prefixes = _strings(parameters, f"{singular}Prefixes", [])
    patterns = _patterns(parameters.get(f"{singular}Patterns", []))
    if listed is None or prefixes is None or patterns is None:
        return None
    return _Owned(frozenset(listed), tuple(prefixes), tuple(patterns), tuple(p for p, _ in patterns))


def _patterns(value: Any) -> list[tuple[str, str]] | None:
    """[{prefix, suffix}] as pairs; None if an entry lacks either string, which the Rego skips."""
    if not isinstance(value, list):
        return None
    pairs = []
    for item in value:
        if not isinstance(item, Mapping):
            return None
        prefix, suffix = item.get("prefix"), item.get("suffix")
        if type(prefix) is not str or type(suffix) is not str:
            return None
        pairs.append((prefix, suffix))
    return pairs
