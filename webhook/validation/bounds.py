"""What one review may cost: counts no real pod reaches, refused before any work that grows with
the object. Pure.

Why bounds and not only faster rules: the in-process Rego engine (regopy 1.5) builds a set of N
distinct elements in time proportional to N squared, and every rule's `violation` is such a set.
Measured on a 2-core machine through review() with the security bundle: 256 containers' worth
of refused env entries took 1.3 s, 512 took 5 s, 1,024 took 26 s; 1,000 distinct hostPath
volumes took 27 s. Setting the input itself costs about 5 microseconds a JSON value. So every
list that a rule walks, and so every set a rule can build, is bounded here, summed over the
pod's containers (a rule's set gathers every container's entries), and so is the whole object.
Kubernetes itself bounds few of these lists (its API validation sets no count on containers,
env, volumes, ports or capabilities); where it does, its bound is quoted. docs/security.md lists
each bound with its reason.

The check runs first in review() on /validate, and on /mutate before a GPU pod's rewrite (a pod
without GPUs gets only the void patch, linear in its containers), so `gpu-webhook review` and
`scan` refuse the same objects as the server.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, NamedTuple

import orjson

from webhook import vendors
from webhook.accounting.target import PodTarget, pod_target
from webhook.types import KubeObject

SIZE = "gpu-builtin/size"

# JSON values in one object (the object and the old object are counted apart). The largest real
# pods seen (ten containers, hundreds of env entries, managedFields, last-applied-configuration)
# hold a few thousand; Rego's input then costs about 0.2 s at this bound on a 2-core machine.
MAX_VALUES = 32_768

# Lists summed over every container of the pod (containers, init and ephemeral ones).
CONTAINER_BOUNDS: tuple[tuple[tuple[str, ...], str, int], ...] = (
    # Plain env entries only grow the input (the JSON values bound covers that); the entries a
    # rule refuses by name are bounded apart, below. CI runners hand builds hundreds of variables.
    (("env",), "env entries", 2_048),
    (("envFrom",), "envFrom sources", 32),
    (("ports",), "container ports", 128),
    (("volumeMounts",), "volume mounts", 256),
    (("volumeDevices",), "volume devices", 64),
    (("resources", "claims"), "container resource claims", 128),
)
# Linux defines 41 capabilities (include/uapi/linux/capability.h, CAP_LAST_CAP is
# CAP_CHECKPOINT_RESTORE, number 40); with ALL, and each spelled with and without CAP_, a list
# never needs more than 84 entries.
# Entries naming a variable a container runtime reads to add devices (webhook/vendors.py), or the
# NVIDIA toolkit's NVIDIA_ family, over every container: what gpu-no-device-environment refuses
# one by one. A real pod sets a few per container.
DEVICE_VARIABLE_PREFIXES: tuple[str, ...] = (
    "NVIDIA_",
    *(v.name for v in vendors.DEVICE_VARIABLES),
)
MAX_DEVICE_VARIABLES = 128
MAX_CAPABILITIES_PER_LIST = 84
MAX_CAPABILITIES = 128  # add and drop, over every container
MAX_RESOURCE_NAMES = 256  # limits and requests, over every container
MAX_CONTAINERS = 64  # containers, initContainers and ephemeralContainers together

POD_BOUNDS: tuple[tuple[str, str, int], ...] = (
    ("volumes", "volumes", 128),
    ("tolerations", "tolerations", 256),
    ("resourceClaims", "pod resource claims", 128),
    ("hostAliases", "host aliases", 256),
    ("imagePullSecrets", "image pull secrets", 256),
    ("topologySpreadConstraints", "topology spread constraints", 64),
    ("readinessGates", "readiness gates", 64),
    ("schedulingGates", "scheduling gates", 64),
)
# Node affinity's terms, and pod affinity's and anti-affinity's, required and preferred.
AFFINITY_TERMS: tuple[tuple[str, ...], ...] = (
    ("nodeAffinity", "requiredDuringSchedulingIgnoredDuringExecution", "nodeSelectorTerms"),
    ("nodeAffinity", "preferredDuringSchedulingIgnoredDuringExecution"),
    ("podAffinity", "requiredDuringSchedulingIgnoredDuringExecution"),
    ("podAffinity", "preferredDuringSchedulingIgnoredDuringExecution"),
    ("podAntiAffinity", "requiredDuringSchedulingIgnoredDuringExecution"),
    ("podAntiAffinity", "preferredDuringSchedulingIgnoredDuringExecution"),
)
MAX_AFFINITY_TERMS = 128
METADATA_BOUNDS: tuple[tuple[str, str, int], ...] = (
    ("labels", "labels", 128),
    ("annotations", "annotations", 128),
    ("ownerReferences", "owner references", 64),
    ("finalizers", "finalizers", 64),
)
_ALL_CONTAINERS = ("containers", "initContainers", "ephemeralContainers")
_PATHS = [path for path, _, _ in CONTAINER_BOUNDS]
_ENV, _CLAIMS = _PATHS.index(("env",)), _PATHS.index(("resources", "claims"))
# The container's own lists, looked up directly: this runs for every review.
_CONTAINER_KEYS = tuple((i, path[0]) for i, path in enumerate(_PATHS) if len(path) == 1)
_CONTAINERS = (dict, list)  # exact types: what a JSON decoder builds
HINT = "the webhook reviews no more, so that every review finishes in time"


@dataclass(frozen=True)
class Oversize:
    """Why an object is too large to review: one line, naming the part and the bound."""

    message: str


def oversize(obj: KubeObject | None, old: KubeObject | None = None) -> Oversize | None:
    """The first bound the object exceeds, if any.

    An UPDATE of an object already past a bound (made before these bounds were in force) is
    reviewed: refusing it would leave the object impossible to shrink, and its finalizers
    impossible to remove. Only a stored object can be that large, so no one can send it at will;
    its review runs on the heavy lane like any other large one.
    """
    return _oversize(measure(obj, entries=False), old)


def _oversize(measured: Measure, old: KubeObject | None) -> Oversize | None:
    if measured.problem is None or (old is not None and measure(old, entries=False).problem is not None):
        return None
    return Oversize(f"{measured.problem}; {HINT}")


class Measure(NamedTuple):
    """One pass over an object: the first bound it exceeds, and the entries rules would walk."""

    problem: str | None
    entries: int  # 0 unless asked for


def measure(obj: KubeObject | None, *, entries: bool = True, body_bytes: int | None = None) -> Measure:
    """Both figures in one pass; `entries` False: the bound alone (what review() asks).
    `body_bytes`: the size of the body `obj` was decoded from. Every JSON value takes at least a
    byte of it, so a body within MAX_VALUES bytes holds no object past that bound."""
    if not isinstance(obj, dict):
        return Measure(None, 0)
    target = pod_target(obj)
    metadata = obj.get("metadata")
    found = _metadata_problem(metadata) if isinstance(metadata, dict) else None
    if found is None and target is not None and target.pod is not obj:
        found = _metadata_problem(target.metadata)
    walked = 0
    if target is not None:
        containers = list(_containers(target.spec))
        tally = _tally(containers)
        walked = _entries(target, containers, tally) if entries else 0
        found = found or _pod_problem(target, containers, tally)
    if found is not None:
        return Measure(f"{_describe(obj)}: {found}", walked)
    values_known = body_bytes is not None and body_bytes <= MAX_VALUES
    if not values_known and count_values(obj, MAX_VALUES) > MAX_VALUES:
        return Measure(f"{_describe(obj)} holds more than {MAX_VALUES} JSON values", walked)
    return Measure(None, walked)


def count_values(obj: Any, limit: int) -> int:
    """JSON values in `obj`, exactly up to `limit`; past it, some count above it.

    Each value takes at least one byte of JSON, so an object whose serialization is no longer
    than `limit` is under it without a walk: the walk is paid only by large objects.
    """
    try:
        size = len(orjson.dumps(obj))
    except orjson.JSONEncodeError:  # an integer beyond 64 bits, from YAML: count by walking
        size = limit + 1
    if size <= limit:
        return size  # an upper bound, enough to say "within"
    seen, stack = 1, [obj]  # containers still to open; every value is counted when first seen
    while stack and seen <= limit:
        node = stack.pop()
        children = node.values() if isinstance(node, dict) else node
        seen += len(children)
        stack.extend([child for child in children if type(child) in _CONTAINERS])
    return seen


def _metadata_problem(metadata: dict[str, Any]) -> str | None:
    for key, what, limit in METADATA_BOUNDS:
        value = metadata.get(key)
        if value and _length(value) > limit:
            return f"{_length(value)} {what}, more than {limit}"
    return None


def _pod_problem(target: PodTarget, containers: list[dict[str, Any]], tally: _Tally) -> str | None:
    spec = target.spec
    if len(containers) > MAX_CONTAINERS:
        return f"{len(containers)} containers, more than {MAX_CONTAINERS}"
    for key, what, limit in POD_BOUNDS:
        value = spec.get(key)
        if value and _length(value) > limit:
            return f"{_length(value)} {what}, more than {limit}"
    for (_, what, limit), count in zip(CONTAINER_BOUNDS, tally.lists, strict=True):
        if count > limit:
            return f"{count} {what} over its containers, more than {limit}"
    affinity = spec.get("affinity")
    if affinity:
        terms = sum(_length(_at(affinity, path)) for path in AFFINITY_TERMS)
        if terms > MAX_AFFINITY_TERMS:
            return f"{terms} affinity terms, more than {MAX_AFFINITY_TERMS}"
    return tally.problem()


@dataclass
class _Tally:
    """What one pass over a pod's containers counts: this runs on every review."""

    lists: list[int]  # CONTAINER_BOUNDS' lists, summed
    device_variables: int = 0
    capabilities: int = 0
    longest_capabilities: tuple[int, str, str] = (0, "", "")  # count, container, add or drop
    resource_names: int = 0

    def problem(self) -> str | None:
        if self.device_variables > MAX_DEVICE_VARIABLES:
            what = "env entries naming device variables over its containers"
            return f"{self.device_variables} {what}, more than {MAX_DEVICE_VARIABLES}"
        count, name, key = self.longest_capabilities
        if count > MAX_CAPABILITIES_PER_LIST:
            return (
                f"container {name!r} lists {count} capabilities to {key}, more than the "
                f"{MAX_CAPABILITIES_PER_LIST} spellings of Linux's 41"
            )
        if self.capabilities > MAX_CAPABILITIES:
            return f"{self.capabilities} capability entries over its containers, more than {MAX_CAPABILITIES}"
        if self.resource_names > MAX_RESOURCE_NAMES:
            what = "resource limits and requests over its containers"
            return f"{self.resource_names} {what}, more than {MAX_RESOURCE_NAMES}"
        return None


def _tally(containers: list[dict[str, Any]]) -> _Tally:
    tally = _Tally([0] * len(CONTAINER_BOUNDS))
    lists = tally.lists
    for container in containers:
        get = container.get
        for i, key in _CONTAINER_KEYS:
            value = get(key)
            if value and isinstance(value, _SIZED):
                lists[i] += len(value)
        tally.device_variables += device_variables(container)
        resources = get("resources")
        if isinstance(resources, dict):
            lists[_CLAIMS] += _length(resources.get("claims"))
            tally.resource_names += _length(resources.get("limits")) + _length(resources.get("requests"))
        context = get("securityContext")
        capabilities = context.get("capabilities") if isinstance(context, dict) else None
        if isinstance(capabilities, dict):
            for key in ("add", "drop"):
                count = _length(capabilities.get(key))
                tally.capabilities += count
                if count > tally.longest_capabilities[0]:
                    tally.longest_capabilities = (count, str(container.get("name", "?")), key)
    return tally


def device_variables(container: dict[str, Any]) -> int:
    """Env entries of the container whose names a device rule refuses one by one."""
    env = container.get("env")
    if not isinstance(env, list):
        return 0
    count = 0
    for entry in env:
        name = entry.get("name") if isinstance(entry, dict) else None
        if isinstance(name, str) and name.startswith(DEVICE_VARIABLE_PREFIXES):
            count += 1
    return count


def _containers(spec: dict[str, Any]) -> Iterator[dict[str, Any]]:
    for key in _ALL_CONTAINERS:
        listed = spec.get(key)
        if isinstance(listed, list):
            yield from (c for c in listed if isinstance(c, dict))


def _at(node: Any, path: tuple[str, ...]) -> Any:
    for key in path:
        node = node.get(key) if isinstance(node, dict) else None
    return node


def _length(value: Any) -> int:
    return len(value) if isinstance(value, _SIZED) else 0


_SIZED = (list, dict)  # a tuple: isinstance() with `list | dict` builds the union on every call


def _describe(obj: dict[str, Any]) -> str:
    metadata = obj.get("metadata")
    name = metadata.get("name") or metadata.get("generateName") if isinstance(metadata, dict) else None
    kind = obj.get("kind")
    kind = kind if isinstance(kind, str) else "object"
    return f"{kind} {name}" if isinstance(name, str) and name else kind


# An ordinary review: a pod whose lists that rules walk hold fewer entries than this, in a body
# smaller than HEAVY_BYTES. Each rule's sets then stay small enough that regopy's squared cost
# does not show (96 entries: about 0.15 s at worst; the training pod of bench/ has 25). The server
# runs other reviews in a lane of their own, so that a few of them cannot take every thread from
# ordinary ones.
HEAVY_ENTRIES = 96
HEAVY_BYTES = 128 * 1024


def is_heavy(obj: KubeObject | None, old: KubeObject | None, body_bytes: int) -> bool:
    """Whether a review may cost far more than an ordinary one (a cost estimate, not a bound)."""
    return body_bytes > HEAVY_BYTES or walked_entries(obj) + walked_entries(old) > HEAVY_ENTRIES


@dataclass(frozen=True)
class Checked:
    """Objects found within every bound, by identity: review() need not measure them again."""

    obj: KubeObject | None
    old: KubeObject | None

    def covers(self, obj: KubeObject | None, old: KubeObject | None) -> bool:
        return obj is self.obj and old is self.old


def estimate(obj: KubeObject | None, old: KubeObject | None, body_bytes: int) -> tuple[bool, Checked | None]:
    """is_heavy(), and the objects as Checked when they are within every bound (None: past one,
    refused at once wherever it runs). One pass over each object for both."""
    measured = measure(obj, body_bytes=body_bytes)
    entries = measured.entries + walked_entries(old)
    heavy = body_bytes > HEAVY_BYTES or entries > HEAVY_ENTRIES
    return heavy, (Checked(obj, old) if _oversize(measured, old) is None else None)


def walked_entries(obj: KubeObject | None) -> int:
    """Entries of the lists this module bounds: what rules walk one by one and may refuse (of env,
    only the device variables: other entries are cleared without building a set)."""
    return measure(obj).entries


def _entries(target: PodTarget, containers: list[dict[str, Any]], tally: _Tally) -> int:
    spec, metadata = target.spec, target.metadata
    entries = len(containers)
    for key in _POD_KEYS:
        entries += _length(spec.get(key))
    for key in _METADATA_KEYS:
        entries += _length(metadata.get(key))
    plain_env = tally.lists[_ENV]
    return entries + sum(tally.lists) - plain_env + tally.device_variables + tally.capabilities


_POD_KEYS = tuple(key for key, _, _ in POD_BOUNDS)
_METADATA_KEYS = tuple(key for key, _, _ in METADATA_BOUNDS)
