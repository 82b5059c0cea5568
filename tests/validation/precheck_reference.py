"""The prechecks as first written, each walking the pod itself: the reference the fast ones must equal.

tests/validation/test_precheck_equivalence.py holds webhook.validation.prechecks (one view of
the pod per request, parameters read once per policy load) equal to these on generated pods.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from webhook import vendors
from webhook.validation.prechecks.pod import PodCreate

Parameters = Mapping[str, Any]


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


# GpuAllowedRegistries: every image must come from one of `registries`; none listed allows all.


def allowed_registries(pod: PodCreate, parameters: Parameters) -> bool:
    registries = _strings(parameters, "registries", [])
    if registries is None:
        return False
    if not registries:
        return True
    prefixes = tuple(_trim_suffix(registry, "/") + "/" for registry in registries)
    for _, container in pod.containers:
        image = container.get("image")
        if not isinstance(image, str) or not _full_name(image).startswith(prefixes):
            return False
    return True


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


def added_capabilities(pod: PodCreate, parameters: Parameters) -> bool:
    listed = _strings(parameters, "capabilities", _NODE_CAPABILITIES)
    # Rego's upper() and Python's differ beyond ASCII ("ß"): leave such names to Rego.
    if listed is None or not all(name.isascii() for name in listed):
        return False
    disallowed = {_normal(name) for name in listed}
    for _, container in pod.containers:
        context = _optional(container, "securityContext")
        if context == []:
            continue
        if not isinstance(context, Mapping):
            return False
        capabilities = _optional(context, "capabilities")
        if capabilities == []:
            continue
        if not isinstance(capabilities, Mapping):
            return False
        added = _optional(capabilities, "add")
        if not isinstance(added, list) or not all(isinstance(a, str) and a.isascii() for a in added):
            return False
        if any(_normal(name) in disallowed for name in added):
            return False
    return True


def _normal(capability: str) -> str:
    upper = capability.upper()
    return upper[4:] if upper.startswith("CAP_") else upper


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


def device_environment(pod: PodCreate, parameters: Parameters) -> bool:
    variables = _strings(parameters, "variables", _DEVICE_VARIABLES)
    prefixes = _strings(parameters, "variablePrefixes", _DEVICE_PREFIXES)
    quiet = _strings(parameters, "allowedValues", _QUIET_VALUES)
    capabilities = _strings(parameters, "allowedDriverCapabilities", _DRIVER_CAPABILITIES)
    extra = _strings(parameters, "extraGpuResources", [])
    if variables is None or prefixes is None or quiet is None or capabilities is None or extra is None:
        return False
    env_from_checked = parameters.get("allowEnvFrom") is not True
    for field, container in pod.containers:
        if not _quiet_env(_optional(container, "env"), (variables, prefixes), quiet, capabilities):
            return False
        sources = _optional(container, "envFrom")
        if not isinstance(sources, list) or not all(isinstance(s, Mapping) for s in sources):
            return False
        for source in sources:
            prefix = source.get("prefix", "")
            if type(prefix) is not str:
                return False
            if prefix and _spells(prefix, variables, prefixes):
                return False
            if not prefix and env_from_checked and _may_get_gpus(pod, field, container, extra):
                return False
    return True


def _spells(prefix: str, variables: list[str], prefixes: list[str]) -> bool:
    """An envFrom prefix that could spell a device variable (the template's spelled_by)."""
    if any(variable.startswith(prefix) for variable in variables):
        return True
    return any(family.startswith(prefix) or prefix.startswith(family) for family in prefixes)


def _quiet_env(
    env: Any, device: tuple[list[str], list[str]], quiet: list[str], capabilities: list[str]
) -> bool:
    if not isinstance(env, list) or not all(isinstance(e, Mapping) for e in env):
        return False
    variables, prefixes = device
    for entry in env:
        name = entry.get("name")
        if type(name) is not str:
            return False  # left to Rego, as every odd type is
        named = name in variables or name.startswith(tuple(prefixes))
        if not named and name != _CAPABILITIES_VARIABLE:
            continue
        value = entry.get("value", "")
        if "valueFrom" in entry or type(value) is not str:
            return False
        if named and value not in quiet:
            return False
        if name == _CAPABILITIES_VARIABLE and not _known_capabilities(value, capabilities):
            return False
    return True


def _known_capabilities(value: str, allowed: list[str]) -> bool:
    for part in value.split(","):
        word = _CAPABILITY_WORD.fullmatch(part)
        if word is None or (word[1] and word[1] not in allowed):
            return False
    return True


def _may_get_gpus(pod: PodCreate, field: str, container: Mapping[str, Any], extra: list[str]) -> bool:
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


def host_paths(pod: PodCreate, parameters: Parameters) -> bool:
    volumes = _optional(pod.spec, "volumes")
    if not isinstance(volumes, list):
        return False
    return all(isinstance(v, Mapping) and v.get("hostPath") is None for v in volumes)


# GpuDeviceListMounts: no mount path names nvidia-container-devices.


def device_list_mounts(pod: PodCreate, parameters: Parameters) -> bool:
    for _, container in pod.containers:
        mounts = _optional(container, "volumeMounts")
        if not isinstance(mounts, list):
            return False
        for mount in mounts:
            if not isinstance(mount, Mapping):
                return False
            path = mount.get("mountPath")
            if type(path) is not str or "nvidia-container-devices" in path:
                return False
    return True


# GpuCdiAnnotations: no annotation the container runtime reads as a CDI device request.


def cdi_annotations(pod: PodCreate, parameters: Parameters) -> bool:
    prefixes = _strings(parameters, "annotationPrefixes", [])
    annotations = pod.metadata.get("annotations", {})
    if prefixes is None or not isinstance(annotations, Mapping):
        return False
    return not any(_cdi_key(key, prefixes) for key in annotations)


def _cdi_key(key: Any, prefixes: list[str]) -> bool:
    if not isinstance(key, str):
        return True
    domain, slash, _ = key.partition("/")
    cdi_domain = domain == "cdi.k8s.io" or domain.endswith(".cdi.k8s.io")
    return (bool(slash) and cdi_domain) or key.startswith(tuple(prefixes))


# GpuHostNamespaces: neither hostIPC, hostPID nor (unless allowed) hostNetwork is true.


def host_namespaces(pod: PodCreate, parameters: Parameters) -> bool:
    network_checked = parameters.get("allowHostNetwork", False) is not True
    if network_checked and pod.spec.get("hostNetwork") is True:
        return False
    return pod.spec.get("hostIPC") is not True and pod.spec.get("hostPID") is not True


# GpuMaxPerPod: gpu-webhook's count (input.gpu) is at most `max`, and was read without error.


def max_per_pod(pod: PodCreate, parameters: Parameters) -> bool:
    limit, devices = parameters.get("max"), pod.gpu.get("devices")
    if "error" in pod.gpu or type(devices) is not int or type(limit) is not int:
        return False
    return devices <= limit


# GpuPresetNodeName: spec.nodeName is unset or empty.


def preset_node_name(pod: PodCreate, parameters: Parameters) -> bool:
    return bool(pod.spec.get("nodeName", "") == "")


# GpuPrivilegedContainer: no container is privileged.


def privileged_container(pod: PodCreate, parameters: Parameters) -> bool:
    for _, container in pod.containers:
        context = _optional(container, "securityContext")
        if context != [] and (not isinstance(context, Mapping) or context.get("privileged") is True):
            return False
    return True


# GpuSchedulerAnnotations: on create, no annotation or label that a GPU scheduler owns. A key the
# template might allow (KAI's ConfigMap name) is left to the Rego.


def scheduler_annotations(pod: PodCreate, parameters: Parameters) -> bool:
    return all(_owns_none(pod.metadata, parameters, kind) for kind in ("annotations", "labels"))


def _owns_none(metadata: Mapping[str, Any], parameters: Parameters, kind: str) -> bool:
    singular = kind[:-1]
    listed = _strings(parameters, kind, [])
    prefixes = _strings(parameters, f"{singular}Prefixes", [])
    patterns = _patterns(parameters.get(f"{singular}Patterns", []))
    keys = metadata.get(kind, {})
    if listed is None or prefixes is None or patterns is None or not isinstance(keys, Mapping):
        return False
    owned, starts = set(listed), tuple(prefixes)
    for key in keys:
        if key in owned or key.startswith(starts):
            return False
        if any(key.startswith(prefix) and key.endswith(suffix) for prefix, suffix in patterns):
            return False
    return True


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
