"""Prechecks for the templates of policies/security, one per template, under a comment naming its rule.

Each returns True only when its template's `violation` set is certainly empty for the pod
and the parameters. They read the same parameters with the same defaults as the Rego, and
return False whenever a value has a type the Rego could treat differently from Python.
Being a GPU pod only ever adds a condition to a finding, so no check needs to know it.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

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


def added_capabilities(pod: PodCreate, parameters: Parameters) -> bool:
    listed = _strings(parameters, "capabilities", ["SYS_ADMIN", "ALL"])
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


# GpuDeviceEnvironment: no container sets a device variable, nor takes envFrom (unless allowed).

_DEVICE_VARIABLES = ["NVIDIA_VISIBLE_DEVICES", "NVIDIA_DRIVER_CAPABILITIES", "NVIDIA_MIG_CONFIG_DEVICES"]


def device_environment(pod: PodCreate, parameters: Parameters) -> bool:
    variables = _strings(parameters, "variables", _DEVICE_VARIABLES)
    if variables is None:
        return False
    env_from_checked = parameters.get("allowEnvFrom") is not True
    for _, container in pod.containers:
        env = _optional(container, "env")
        if not isinstance(env, list) or not all(isinstance(e, Mapping) for e in env):
            return False
        if any(e.get("name") in variables for e in env):
            return False
        if env_from_checked and _optional(container, "envFrom") != []:
            return False
    return True


# GpuHostDevicePath: no hostPath volume at all; any hostPath is left to Rego.


def host_device_path(pod: PodCreate, parameters: Parameters) -> bool:
    volumes = _optional(pod.spec, "volumes")
    if not isinstance(volumes, list):
        return False
    return all(isinstance(v, Mapping) and v.get("hostPath") is None for v in volumes)


# GpuHostNamespaces: neither hostIPC nor hostPID is true.


def host_namespaces(pod: PodCreate, parameters: Parameters) -> bool:
    return pod.spec.get("hostIPC") is not True and pod.spec.get("hostPID") is not True


# GpuMaxPerPod: the pod's effective count of `resources` is at most `max`.

# Counts that to_number reads alike in every Rego: no sign, exponent, point or leading zero.
_PLAIN_COUNT = re.compile(r"0|[1-9][0-9]{0,14}")


def max_per_pod(pod: PodCreate, parameters: Parameters) -> bool:
    resources = _strings(parameters, "resources", ["nvidia.com/gpu"])
    limit = parameters.get("max")
    if resources is None or type(limit) is not int or abs(limit) >= 2**53:
        return False
    app, init = 0, 0
    for field, container in pod.containers:
        if field == "ephemeralContainers":
            continue
        count = _gpus(container, resources)
        if count is None:
            return False
        app, init = (app + count, init) if field == "containers" else (app, max(init, count))
    return max(app, init) <= limit


def _gpus(container: Mapping[str, Any], resources: list[str]) -> int | None:
    """Sum over `resources` (repeats count again) of the limit, else the request, else 0."""
    sections = container.get("resources", {})
    if not isinstance(sections, Mapping):
        return None
    limits, requests = sections.get("limits", {}), sections.get("requests", {})
    if not isinstance(limits, Mapping) or not isinstance(requests, Mapping):
        return None
    total = 0
    for resource in resources:
        value = limits[resource] if resource in limits else requests.get(resource, 0)
        if type(value) is str and _PLAIN_COUNT.fullmatch(value):
            value = int(value)
        if type(value) is not int or abs(value) >= 2**53:
            return None
        total += value
    return total


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


# GpuSchedulerAnnotations: on create, no annotation the GPU schedulers own.

_SCHEDULER_ANNOTATIONS = [
    "hami.io/vgpu-devices-allocated",
    "hami.io/vgpu-devices-to-allocate",
    "hami.io/vgpu-node",
    "hami.io/bind-phase",
    "scheduling.koordinator.sh/device-allocated",
]


def scheduler_annotations(pod: PodCreate, parameters: Parameters) -> bool:
    listed = _strings(parameters, "annotations", _SCHEDULER_ANNOTATIONS)
    prefixes = _strings(parameters, "annotationPrefixes", ["run.ai/"])
    annotations = pod.metadata.get("annotations", {})
    if listed is None or prefixes is None or not isinstance(annotations, Mapping):
        return False
    owned = set(listed)
    starts = tuple(prefixes)
    return not any(key in owned or key.startswith(starts) for key in annotations)
