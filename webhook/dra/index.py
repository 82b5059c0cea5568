"""The cluster's DRA objects as one immutable snapshot: what claim resolution reads. Pure.

Built from lists of objects (a watch cache, or an inventory file) and swapped whole,
so a request reads one consistent state without locks. `synced` says whether the
source has listed every kind at least once: only then is a missing claim a fact.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from webhook.dra.devices import DEFAULT_GPU_CLASSES, DeviceClassInfo, class_info
from webhook.types import KubeObject

CLAIMS = "resourceclaims"
TEMPLATES = "resourceclaimtemplates"
CLASSES = "deviceclasses"
DRA_KINDS = (CLAIMS, TEMPLATES, CLASSES)
KIND_OF = {"ResourceClaim": CLAIMS, "ResourceClaimTemplate": TEMPLATES, "DeviceClass": CLASSES}
GROUP = "resource.k8s.io"

Key = tuple[str, str]  # (namespace, name)


@dataclass(frozen=True)
class DraIndex:
    """Claims' and templates' `devices` by (namespace, name), and device classes by name."""

    claims: Mapping[Key, Any] = field(default_factory=dict)
    templates: Mapping[Key, Any] = field(default_factory=dict)
    classes: Mapping[str, DeviceClassInfo] = field(default_factory=dict)
    gpu_classes: tuple[str, ...] = DEFAULT_GPU_CLASSES
    synced: bool = False
    # Extended resource names that GPU device classes serve (DeviceClass extendedResourceName).
    backed: Mapping[str, DeviceClassInfo] = field(default_factory=dict)

    def claim_devices(self, namespace: str, name: str) -> tuple[bool, Any]:
        key = (namespace, name)
        return key in self.claims, self.claims.get(key)

    def template_devices(self, namespace: str, name: str) -> tuple[bool, Any]:
        key = (namespace, name)
        return key in self.templates, self.templates.get(key)

    def backed_resources(self) -> Mapping[str, DeviceClassInfo]:
        return self.backed

    def serves(self, resource: str) -> bool:
        """True when some device class (GPU or not) serves this extended resource name."""
        return any(c.extended_resource == resource for c in self.classes.values())


EMPTY = DraIndex()


def build_index(
    objects: Mapping[str, Iterable[KubeObject]],
    gpu_classes: Sequence[str] = DEFAULT_GPU_CLASSES,
    *,
    synced: bool,
) -> DraIndex:
    """A snapshot of lists by kind (`resourceclaims`, `resourceclaimtemplates`, `deviceclasses`)."""
    configured = tuple(dict.fromkeys((*DEFAULT_GPU_CLASSES, *gpu_classes)))
    claims = {_key(o): _spec(o).get("devices") for o in objects.get(CLAIMS, ()) if _key(o)[1]}
    templates = {
        _key(o): _mapping(_spec(o).get("spec")).get("devices")
        for o in objects.get(TEMPLATES, ())
        if _key(o)[1]
    }
    classes = {
        info.name: info for info in (class_info(o, configured) for o in objects.get(CLASSES, ())) if info.name
    }
    backed = {c.extended_resource: c for c in classes.values() if c.gpu and c.extended_resource}
    return DraIndex(claims, templates, classes, configured, synced, backed)


def _key(obj: KubeObject) -> Key:
    meta = _mapping(obj.get("metadata"))
    return str(meta.get("namespace") or "default"), str(meta.get("name") or "")


def _spec(obj: KubeObject) -> Mapping[str, Any]:
    return _mapping(obj.get("spec"))


def _mapping(value: object) -> Mapping[str, Any]:
    return value if isinstance(value, dict) else {}
