"""Where the scanned objects come from: an inventory file, or paged lists of a live cluster.

Namespaces come first and are kept (their labels select policies and feed
Gatekeeper's namespaceSelector); everything else streams, a page at a time, so a
live scan holds one page of objects however large the cluster is.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from webhook.dra.index import RESOLVING_KINDS, SLICES, DraIndex, build_index
from webhook.errors import ClusterError
from webhook.informer import Page
from webhook.inventory import Inventory, gatekeeper_inventory
from webhook.scan.kinds import NAMESPACE, SCAN_KINDS, ScanKind, scan_kind
from webhook.types import KubeObject

Lister = Callable[[str], Iterator[Page]]


@dataclass(frozen=True)
class Snapshot:
    origin: str
    namespaces: tuple[KubeObject, ...]
    # The other objects, read when called: a live cluster lists them then, page by page.
    objects: Callable[[], Iterator[tuple[KubeObject, ScanKind]]]
    # data.inventory for Gatekeeper templates, as the server builds it from the same origin.
    gatekeeper_inventory: Mapping[str, Any]
    # DRA claims, templates, device classes and slices, so that pods holding claims count their GPUs.
    dra: DraIndex | None = None

    def namespace_labels(self) -> dict[str, dict[str, str]]:
        found: dict[str, dict[str, str]] = {}
        for namespace in self.namespaces:
            metadata = namespace.get("metadata") or {}
            labels = metadata.get("labels")
            clean = {str(k): str(v) for k, v in labels.items()} if isinstance(labels, dict) else {}
            found[str(metadata.get("name", ""))] = clean
        return found


def from_inventory(inventory: Inventory, gpu_classes: Sequence[str] = ()) -> Snapshot:
    """The inventory's objects of the scanned kinds; Gatekeeper sees the whole inventory, as in serve.
    `gpu_classes`: DRA device classes counted as GPUs besides NVIDIA's, as serve --dra-gpu-classes."""
    namespaces = tuple(obj for obj in inventory.objects if scan_kind(obj) is NAMESPACE)

    def objects() -> Iterator[tuple[KubeObject, ScanKind]]:
        for obj in inventory.objects:
            kind = scan_kind(obj)
            if kind is not None and kind is not NAMESPACE:
                yield obj, kind

    dra = build_index(inventory.dra_lists(), gpu_classes, synced=True)
    return Snapshot(f"inventory {inventory.source}", namespaces, objects, inventory.gatekeeper(), dra)


def from_cluster(lister: Lister, origin: str, gpu_classes: Sequence[str] = ()) -> Snapshot:
    """Namespaces listed now; the other kinds when `objects()` is iterated."""
    namespaces = tuple(
        _typed(item, NAMESPACE) for page in lister(NAMESPACE.resource) for item in page.items if _named(item)
    )

    def objects() -> Iterator[tuple[KubeObject, ScanKind]]:
        for kind in SCAN_KINDS:
            if kind is NAMESPACE:
                continue
            for page in lister(kind.resource):
                for item in page.items:
                    yield _typed(item, kind), kind

    dra = _dra(lister, gpu_classes)
    return Snapshot(origin, namespaces, objects, gatekeeper_inventory(namespaces), dra)


def _dra(lister: Lister, gpu_classes: Sequence[str]) -> DraIndex | None:
    """The cluster's DRA objects (as v1, whatever version the API serves); None when it has none to
    list (no resource.k8s.io). Slices the API refuses (a ClusterRole that predates them) are left
    out: claims then count by the largest device their class could select."""
    try:
        lists = {kind: _all(lister, kind) for kind in RESOLVING_KINDS}
    except ClusterError:
        return None
    with contextlib.suppress(ClusterError):
        lists[SLICES] = _all(lister, SLICES)
    return build_index(lists, gpu_classes, synced=True)


def _all(lister: Lister, kind: str) -> list[KubeObject]:
    return [item for page in lister(kind) for item in page.items]


def empty(origin: str) -> Snapshot:
    return Snapshot(origin, (), lambda: iter(()), gatekeeper_inventory(()))


def _named(item: KubeObject) -> bool:
    metadata = item.get("metadata")
    return isinstance(metadata, dict) and isinstance(metadata.get("name"), str) and bool(metadata["name"])


def _typed(item: KubeObject, kind: ScanKind) -> KubeObject:
    """List items come without kind and apiVersion; policies need both."""
    return {"apiVersion": kind.api_version, "kind": kind.kind, **item}


def every(snapshot: Snapshot) -> Iterable[tuple[KubeObject, ScanKind]]:
    yield from ((namespace, NAMESPACE) for namespace in snapshot.namespaces)
    yield from snapshot.objects()
