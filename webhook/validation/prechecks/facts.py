"""The facts about a pod that the prechecks test, read from the pod in one pass per request. Pure.

Eleven prechecks used to walk the same containers eleven times. `pod_facts` walks them once,
when the first precheck of a request runs, and every precheck reads its answer.

A fact that cannot be stated because the pod holds an unexpected type reads None (or False):
every precheck that needs it then leaves the constraint to Rego, as it did when it met that
type itself. Nothing here raises, whatever the JSON holds.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, NamedTuple

# isinstance against an ABC is several times slower than against dict, which is what JSON gives:
# dict first, Mapping for whatever else a caller passes.
OBJECT = (dict, Mapping)
Containers = tuple[tuple[str, Mapping[str, Any]], ...]
Env = tuple[tuple[str, Mapping[str, Any]], ...]


class PodFacts(NamedTuple):  # a tuple: built on every review, and a frozen dataclass costs more
    # Every container's image, in order; None if one is not a string.
    images: tuple[str, ...] | None
    # No container is privileged, and every securityContext is an object, absent or null.
    unprivileged: bool
    # Every capability a container adds, upper case without CAP_; None if one is not an ASCII
    # string (Rego's upper() is ASCII only) or a field on the way is not an object.
    added_capabilities: frozenset[str] | None
    # Every env entry of every container as (name, entry); None if an env is not a list of
    # objects or a name is not a string.
    env: Env | None
    # Every envFrom source as (index into the containers, its prefix or ""); None if an envFrom
    # is not a list of objects or a prefix is not a string.
    env_from: tuple[tuple[int, str], ...] | None
    # Every mount path is a string without nvidia-container-devices in it.
    no_device_list_mount: bool
    # The volumes are a list (or absent, or null) of objects without a hostPath.
    no_host_path: bool
    # The keys of metadata.annotations and .labels (none when absent); None if not an object
    # whose keys are all strings.
    annotation_keys: tuple[str, ...] | None
    label_keys: tuple[str, ...] | None
    # No annotation key is `<domain>/<name>` with a domain of cdi.k8s.io or under it; False when
    # annotation_keys is None.
    no_cdi_domain_key: bool


def pod_facts(spec: Mapping[str, Any], metadata: Mapping[str, Any], containers: Containers) -> PodFacts:
    images: list[str] | None = []
    added: set[str] | None = set()
    env: list[tuple[str, Mapping[str, Any]]] | None = []
    env_from: list[tuple[int, str]] | None = []
    unprivileged = mounts_clean = True
    # Each fact stops being gathered (None, False) at the first value it cannot state.
    for index, (_, container) in enumerate(containers):
        images = images if images is not None and _add_image(container.get("image"), images) else None
        context = container.get("securityContext")
        unprivileged = unprivileged and _unprivileged(context)
        added = added if added is not None and _add_capabilities(context, added) else None
        env = env if env is not None and _add_env(container.get("env"), env) else None
        sources = container.get("envFrom")
        env_from = env_from if env_from is not None and _add_sources(sources, index, env_from) else None
        mounts_clean = mounts_clean and _mounts_clean(container.get("volumeMounts"))
    annotations = _keys(metadata.get("annotations", {}))
    return PodFacts(
        images=None if images is None else tuple(images),
        unprivileged=unprivileged,
        added_capabilities=None if added is None else frozenset(added),
        env=None if env is None else tuple(env),
        env_from=None if env_from is None else tuple(env_from),
        no_device_list_mount=mounts_clean,
        no_host_path=_no_host_path(spec.get("volumes")),
        annotation_keys=annotations,
        label_keys=_keys(metadata.get("labels", {})),
        no_cdi_domain_key=annotations is not None and not any(_cdi_domain(key) for key in annotations),
    )


def normal_capability(capability: str) -> str:
    upper = capability.upper()
    return upper[4:] if upper.startswith("CAP_") else upper


# The helpers below take a field as found. A field absent or null reads as an empty list, as
# Rego iterates nothing in either, so None and [] are alike everywhere.


def _add_image(image: Any, images: list[str]) -> bool:
    if not isinstance(image, str):
        return False
    images.append(image)
    return True


def _unprivileged(context: Any) -> bool:
    if context is None or context == []:
        return True
    return isinstance(context, OBJECT) and context.get("privileged") is not True


def _add_capabilities(context: Any, added: set[str]) -> bool:
    """Add the capabilities a securityContext adds; False if one cannot be read as Rego would."""
    if context is None or context == []:
        return True
    if not isinstance(context, OBJECT):
        return False
    capabilities = context.get("capabilities")
    if capabilities is None or capabilities == []:
        return True
    if not isinstance(capabilities, OBJECT):
        return False
    names = capabilities.get("add")
    if names is None:
        return True
    if not isinstance(names, list) or not all(isinstance(n, str) and n.isascii() for n in names):
        return False
    added.update(normal_capability(name) for name in names)
    return True


def _add_env(value: Any, env: list[tuple[str, Mapping[str, Any]]]) -> bool:
    if value is None:
        return True
    if not isinstance(value, list):
        return False
    for entry in value:
        if not isinstance(entry, OBJECT):
            return False
        name = entry.get("name")
        if type(name) is not str:
            return False
        env.append((name, entry))
    return True


def _add_sources(value: Any, index: int, env_from: list[tuple[int, str]]) -> bool:
    if value is None:
        return True
    if not isinstance(value, list):
        return False
    for source in value:
        if not isinstance(source, OBJECT):
            return False
        prefix = source.get("prefix", "")
        if type(prefix) is not str:
            return False
        env_from.append((index, prefix))
    return True


def _mounts_clean(mounts: Any) -> bool:
    if mounts is None:
        return True
    if not isinstance(mounts, list):
        return False
    for mount in mounts:
        if not isinstance(mount, OBJECT):
            return False
        path = mount.get("mountPath")
        if type(path) is not str or "nvidia-container-devices" in path:
            return False
    return True


def _no_host_path(volumes: Any) -> bool:
    if volumes is None:
        return True
    if not isinstance(volumes, list):
        return False
    return all(isinstance(v, OBJECT) and v.get("hostPath") is None for v in volumes)


def _keys(value: Any) -> tuple[str, ...] | None:
    if not isinstance(value, OBJECT):
        return None
    keys = tuple(value)
    return keys if all(isinstance(key, str) for key in keys) else None


def _cdi_domain(key: str) -> bool:
    domain, slash, _ = key.partition("/")
    return bool(slash) and (domain == "cdi.k8s.io" or domain.endswith(".cdi.k8s.io"))
