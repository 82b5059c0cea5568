"""The cluster's DRA objects as one immutable snapshot: what claim resolution reads. Pure.

Built from lists of objects (a watch cache, or an inventory file) and swapped whole,
so a request reads one consistent state without locks. `synced` says whether the
source has listed every kind at least once: only then is a missing claim a fact.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import orjson

from webhook.dra.devices import (
    DEFAULT_GPU_CLASSES,
    ClaimError,
    DeviceAsk,
    DeviceClassInfo,
    claim_asks,
    class_info,
)
from webhook.dra.judge import DeviceJudge
from webhook.dra.published import Device
from webhook.dra.slices import SliceError, slice_devices
from webhook.dra.versions import as_v1
from webhook.types import KubeObject

CLAIMS = "resourceclaims"
TEMPLATES = "resourceclaimtemplates"
CLASSES = "deviceclasses"
SLICES = "resourceslices"
DRA_KINDS = (CLAIMS, TEMPLATES, CLASSES, SLICES)
# The kinds a pod's claims resolve against: once all are listed, a claim not found is a fact.
# Slices only refine what a claim counts as, so a cluster that does not let us list them still resolves.
RESOLVING_KINDS = (CLAIMS, TEMPLATES, CLASSES)
KIND_OF = {
    "ResourceClaim": CLAIMS,
    "ResourceClaimTemplate": TEMPLATES,
    "DeviceClass": CLASSES,
    "ResourceSlice": SLICES,
}
GROUP = "resource.k8s.io"

Key = tuple[str, str]  # (namespace, name)


@dataclass(frozen=True)
class DraIndex:
    """Claims' and templates' `devices` by (namespace, name), device classes by name, and the judge
    of what a request can get (their selectors against the published devices)."""

    claims: Mapping[Key, Any] = field(default_factory=dict)
    templates: Mapping[Key, Any] = field(default_factory=dict)
    classes: Mapping[str, DeviceClassInfo] = field(default_factory=dict)
    gpu_classes: tuple[str, ...] = DEFAULT_GPU_CLASSES
    synced: bool = False
    # Extended resource names that GPU device classes serve (DeviceClass extendedResourceName),
    # by the class that serves them.
    backed: Mapping[str, str] = field(default_factory=dict)
    # Template name -> `devices` of templates known to exist or to be about to exist whatever the
    # cache holds yet: the applicable mode dra policy's own. Looked up only when the cache has none.
    expected_templates: Mapping[str, Any] = field(default_factory=dict)
    judge: DeviceJudge = field(default_factory=lambda: _default_judge(DEFAULT_GPU_CLASSES), compare=False)

    def claim_devices(self, namespace: str, name: str) -> tuple[bool, Any]:
        key = (namespace, name)
        return key in self.claims, self.claims.get(key)

    def template_devices(self, namespace: str, name: str) -> tuple[bool, Any]:
        key = (namespace, name)
        if key in self.templates:
            return True, self.templates[key]
        if name in self.expected_templates:
            return True, self.expected_templates[name]
        return False, None

    def asks(self, devices: object) -> tuple[DeviceAsk, ...]:
        """The GPU asks of a claim's `devices` field, judged against this snapshot's classes and
        published devices; raises ClaimError naming what cannot be counted. Remembered by spec."""
        return _asks(self.judge, devices)

    @property
    def estimated(self) -> bool:
        """True when no device is published: readings come from NVIDIA's driver's catalog."""
        return not self.judge.publishes

    @property
    def may_serve_implicit(self) -> bool:
        """Whether a `deviceclass.resource.kubernetes.io/<class>` name can be served: only a
        DeviceClass that exists serves one, so not once the classes are listed and none exists."""
        return bool(self.classes) or not self.synced

    def backed_resources(self) -> Mapping[str, str]:
        return self.backed

    def served_class(self, resource: str) -> str | None:
        """The GPU DeviceClass that serves an extended resource: by its extendedResourceName, or
        by the name Kubernetes gives every class, `deviceclass.resource.kubernetes.io/<class>`."""
        found = self.backed.get(resource)
        if found is not None:
            return found
        if not resource.startswith(IMPLICIT_PREFIX):
            return None
        name = resource.removeprefix(IMPLICIT_PREFIX)
        known = name in self.classes or self.judge.knows_class(name) or name in self.gpu_classes
        return name if known and self.judge.judge(name) is not None else None

    def serves(self, resource: str) -> bool:
        """True when some device class (GPU or not) serves this extended resource name."""
        if resource.startswith(IMPLICIT_PREFIX):
            return resource.removeprefix(IMPLICIT_PREFIX) in self.classes
        return any(c.extended_resource == resource for c in self.classes.values())


# kubernetes pkg/apis/resource: the extended resource name every DeviceClass serves (1.34+,
# DRAExtendedResource), k8s.io/api resource/v1 types.go ResourceDeviceClassPrefix.
IMPLICIT_PREFIX = "deviceclass.resource.kubernetes.io/"


def _default_judge(gpu_classes: Sequence[str]) -> DeviceJudge:
    return DeviceJudge({}, (), gpu_classes)


_MEMO_SIZE = 4096
_JUDGES_REMEMBERED = 16


def _asks(judge: DeviceJudge, devices: object) -> tuple[DeviceAsk, ...]:
    """claim_asks, remembered per judge and spec: specs repeat (templates, generated claims)."""
    try:
        key = orjson.dumps(devices, option=orjson.OPT_SORT_KEYS)
    except TypeError:
        return claim_asks(devices, judge)
    if id(judge) not in _MEMOS and len(_MEMOS) >= _JUDGES_REMEMBERED:
        _MEMOS.clear()
    memo = _MEMOS.setdefault(id(judge), (judge, {}))[1]
    found = memo.get(key)
    if found is None:
        found = claim_asks(devices, judge)
        if len(memo) >= _MEMO_SIZE:
            memo.clear()
        memo[key] = found
    return found


# Judges are immutable once built: memos keyed by id, each entry keeping its judge alive so that
# an id is not reused while remembered. Old judges are dropped when a new one is made.
_MEMOS: dict[int, tuple[DeviceJudge, dict[bytes, tuple[DeviceAsk, ...]]]] = {}


EMPTY = DraIndex()


def build_index(
    objects: Mapping[str, Iterable[KubeObject]],
    gpu_classes: Sequence[str] = DEFAULT_GPU_CLASSES,
    *,
    synced: bool,
) -> DraIndex:
    """A snapshot of lists by kind (`resourceclaims`, `resourceclaimtemplates`, `deviceclasses`)."""
    store = DraStore(gpu_classes)
    for kind in DRA_KINDS:
        store.replace(kind, objects.get(kind, ()))
    return store.index(synced)


class DraStore:
    """What a watch keeps of the DRA objects, updated one event at a time, and the index over it.

    Keeps only what the index reads (a claim's `devices`, a class's GPU facts), plus templates
    whole for the template keeper. Most of a claim's events are status updates (allocation,
    reservations) that leave its devices as they were: those change nothing, and the index is
    rebuilt only when something it holds changed. Not thread-safe: the cache calls it under its lock.
    """

    def __init__(self, gpu_classes: Sequence[str] = DEFAULT_GPU_CLASSES) -> None:
        self.gpu_classes = tuple(dict.fromkeys((*DEFAULT_GPU_CLASSES, *gpu_classes)))
        self._devices: dict[str, dict[Key, Any]] = {CLAIMS: {}, TEMPLATES: {}}
        self._classes: dict[str, DeviceClassInfo] = {}
        self._templates: dict[Key, KubeObject] = {}
        self._slices: dict[str, tuple[Device, ...]] = {}
        self._judge: DeviceJudge | None = None
        self._index: DraIndex | None = None
        self.unreadable_slices = 0

    def replace(self, kind: str, objects: Iterable[KubeObject]) -> None:
        if kind == SLICES:
            self._slices = {name: self._read_slice(o) for o in objects if (name := _name(o))}
            self._judge = self._index = None
            return
        if kind == CLASSES:
            infos = (class_info(o) for o in objects)
            self._classes = {info.name: info for info in infos if info.name}
            self._judge = None
        else:
            named = [(key, o) for o in objects if (key := object_key(o))[1]]
            self._devices[kind] = {key: _devices(kind, o) for key, o in named}
            if kind == TEMPLATES:
                self._templates = dict(named)
        self._index = None

    def put(self, kind: str, obj: KubeObject) -> None:
        if kind == SLICES:
            name = _name(obj)
            devices = self._read_slice(obj)
            if name and self._slices.get(name) != devices:
                self._slices[name] = devices
                self._judge = self._index = None
            return
        if kind == CLASSES:
            info = class_info(obj)
            if info.name and self._classes.get(info.name) != info:
                self._classes[info.name] = info
                self._judge = self._index = None
            return
        key = object_key(obj)
        if not key[1]:
            return
        if kind == TEMPLATES:
            self._templates[key] = obj
        devices, held = _devices(kind, obj), self._devices[kind]
        if key not in held or held[key] != devices:
            held[key] = devices
            self._index = None

    def remove(self, kind: str, obj: KubeObject) -> None:
        if kind == SLICES:
            if self._slices.pop(_name(obj), None) is not None:
                self._judge = self._index = None
            return
        if kind == CLASSES:
            if self._classes.pop(_name(obj), None) is not None:
                self._judge = self._index = None
            return
        key = object_key(obj)
        if kind == TEMPLATES:
            self._templates.pop(key, None)
        if key in self._devices[kind]:
            del self._devices[kind][key]
            self._index = None

    def templates(self) -> list[KubeObject]:
        return list(self._templates.values())

    def index(self, synced: bool) -> DraIndex:
        """The snapshot, rebuilt (as copies, so it never changes under a reader) only when stale."""
        if self._index is None or self._index.synced != synced:
            judge = self._current_judge()
            classes = dict(self._classes)
            backed = {
                c.extended_resource: c.name
                for c in classes.values()
                if c.extended_resource and judge.judge(c.name) is not None
            }
            self._index = DraIndex(
                dict(self._devices[CLAIMS]),
                dict(self._devices[TEMPLATES]),
                classes,
                self.gpu_classes,
                synced,
                backed,
                judge=judge,
            )
            _warm(self._index)
        return self._index

    def _current_judge(self) -> DeviceJudge:
        if self._judge is None:
            selectors = {name: info.selectors for name, info in self._classes.items()}
            published = [d for devices in self._slices.values() for d in devices]
            self._judge = DeviceJudge(selectors, published, self.gpu_classes)
        return self._judge

    def _read_slice(self, obj: KubeObject) -> tuple[Device, ...]:
        try:
            return slice_devices(obj)
        except SliceError:
            self.unreadable_slices += 1
            return ()


def _warm(index: DraIndex) -> None:
    """Judge every claim and template the snapshot holds now, off the request path (the watch
    thread builds snapshots), so that admission finds them remembered."""
    for devices in (*index.claims.values(), *index.templates.values()):
        try:
            index.asks(devices)
        except ClaimError:
            continue


def _devices(kind: str, obj: KubeObject) -> Any:
    spec = _spec(as_v1(obj))
    return (_mapping(spec.get("spec")) if kind == TEMPLATES else spec).get("devices")


def _name(obj: KubeObject) -> str:
    return str(_mapping(obj.get("metadata")).get("name") or "")


def object_key(obj: KubeObject) -> Key:
    """(namespace, name); a namespaced object without a namespace is in `default`, as the API puts it."""
    meta = _mapping(obj.get("metadata"))
    return str(meta.get("namespace") or "default"), str(meta.get("name") or "")


def _spec(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    return _mapping(obj.get("spec"))


def _mapping(value: object) -> Mapping[str, Any]:
    return value if isinstance(value, dict) else {}
