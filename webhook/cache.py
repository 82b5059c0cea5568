"""The cluster state the request path reads: namespace labels, GPU shapes of pods, reservations.

Writers are the watch threads (or an inventory file); readers are requests. Every
operation holds one lock for a few dictionary updates, never for I/O.

Memory stays small because a pod is kept only while it asks for extended resources
and has not finished, and then only as its key, its uid and an interned PodShape:
pods made from one template share one shape object. Usage per namespace is kept
running (UsageCounter): every pod counted or dropped, every reservation made, released
or expired, adjusts its namespace's total by that one pod's demand, in integer units
(webhook/accounting/tally.py). A request reads the total; it sums nothing. A relist
starts every total again from the new list.

Pods are identified by namespace/name plus uid: a pod deleted and created again
under the same name (StatefulSets do this) is a different pod.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, replace
from typing import Any, NamedTuple

from webhook.accounting.demand import (
    PodShape,
    QuotaInputError,
    QuotaSettings,
    claim_demand,
    is_finished,
    pod_shape,
    shape_demand,
)
from webhook.accounting.tally import NONE, Tally, canonical, own_tally
from webhook.accounting.usage import NOTHING, Usage
from webhook.dra.devices import DEFAULT_GPU_CLASSES
from webhook.dra.index import DRA_KINDS, RESOLVING_KINDS, SLICES, DraIndex, DraStore
from webhook.dra.resolve import ClaimShape
from webhook.dra.served import NodeNames, extended_names
from webhook.types import KubeObject

log = logging.getLogger(__name__)

PODS = "pods"
NAMESPACES = "namespaces"
KINDS = (PODS, NAMESPACES)
# Informational: only which extended resource names nodes advertise. Nodes are neither needed for
# readiness nor part of staleness, so a node watch that fails (RBAC) blocks nothing.
NODES = "nodes"
DELETED = "DELETED"
DEFAULT_RESERVATION_TTL = 30.0
# Running usage totals are kept for this many accounting settings (one per distinct
# spec.accounting of the quotas in force, plus the default).
MAX_SETTINGS = 16
MAX_TOTALS = 100_000  # namespaces with a running total, per accounting


class Reservation(NamedTuple):
    """One admission in flight (a NamedTuple: one is built per admitted request)."""

    shape: PodShape
    expires: float
    uid: str = ""


@dataclass(frozen=True)
class CacheStats:
    pods: int
    namespaces: int
    reservations: int
    shapes: int
    unreadable_pods: int
    nodes: int = 0


@dataclass(frozen=True, slots=True)
class _PodRecord:
    key: str
    uid: str
    shape: PodShape | None
    running: bool


class ClusterCache:
    """Thread-safe; implements quota's QuotaView (usage includes reservations)."""

    def __init__(
        self,
        *,
        reservation_ttl: float = DEFAULT_RESERVATION_TTL,
        clock: Callable[[], float] = time.monotonic,
        gpu_classes: tuple[str, ...] = DEFAULT_GPU_CLASSES,
    ) -> None:
        self.reservation_ttl = reservation_ttl
        self.gpu_classes = tuple(dict.fromkeys((*DEFAULT_GPU_CLASSES, *gpu_classes)))
        # What the index needs of the DRA objects; the index is rebuilt and swapped whole on a change.
        self._dra_store = DraStore(gpu_classes)
        self._dra = self._dra_store.index(synced=False)
        self._dra_lenient = self._dra
        # Names of the ResourceSlices held: whether any device is published (see slices_known).
        self._slice_names: set[str] = set()
        # Extended resource names per node; their union is swapped whole, so readers take no lock.
        self._nodes = NodeNames()
        self._allocatable: frozenset[str] | None = None
        self._clock = clock
        self._lock = threading.RLock()
        self._changed = threading.Condition(self._lock)
        self._counter = UsageCounter()
        self._index = PodIndex(self._counter.adjust)
        self._gone: dict[str, tuple[float, str]] = {}
        self._reserved = Reservations(self._counter.adjust)
        self._namespaces: dict[str, dict[str, str]] = {}
        self._synced: set[str] = set()
        self._fresh_at: dict[str, float] = {}
        self._live: set[str] = set()
        self._unreadable = 0

    # Writers ------------------------------------------------------------------------------

    def replace(self, kind: str, objects: Iterable[KubeObject]) -> None:
        """A full list: the new truth for `kind`, swapped in whole; marks the kind synced."""
        if kind == NODES:
            names = {_name(obj): extended_names(obj) for obj in objects if _name(obj)}
            self._update_nodes(lambda nodes: nodes.replace(names))
            return
        if kind in DRA_KINDS:
            if kind == SLICES:
                objects = list(objects)
            with self._changed:
                if kind == SLICES:
                    self._slice_names = {name for obj in objects if (name := _name(obj))}
                self._dra_store.replace(kind, objects)
                self._confirm(kind)
                self._reindex_dra()
            return
        if kind == NAMESPACES:
            fresh = dict(_namespace_entry(obj) for obj in objects if _name(obj))
            with self._changed:
                self._namespaces = fresh
                self._confirm(kind)
            return
        index = PodIndex()
        finished: list[tuple[str, str]] = []
        for obj in objects:
            record = self._pod_record(obj)
            if record is not None:
                index.add(record.key, record.shape if record.running else None, record.uid)
                if record.shape is not None and not record.running:
                    finished.append((record.key, record.uid))
        with self._changed:
            gone = [(key, uid) for key, (_, uid) in self._index.pods.items() if key not in index.pods]
            self._index = index
            # A relist is the new truth: every running total starts again from it.
            self._counter.clear()
            index.on_change = self._counter.adjust
            self._bury([*gone, *finished])
            self._drop_seen_reservations()
            self._confirm(kind)

    def apply(self, kind: str, event_type: str, obj: KubeObject) -> None:
        """One watch event (ADDED, MODIFIED or DELETED)."""
        if kind == NODES:
            name = _name(obj)
            if event_type == DELETED:
                self._update_nodes(lambda nodes: nodes.remove(name))
            elif name:
                self._update_nodes(lambda nodes: nodes.put(name, extended_names(obj)))
            return
        if kind in DRA_KINDS:
            with self._changed:
                if event_type == DELETED:
                    self._dra_store.remove(kind, obj)
                else:
                    self._dra_store.put(kind, obj)
                if kind == SLICES:
                    self._count_slice(event_type, _name(obj))
                self._confirm(kind)
                self._reindex_dra()
            return
        if kind == NAMESPACES:
            with self._changed:
                name, labels = _namespace_entry(obj)
                if event_type == DELETED:
                    self._namespaces.pop(name, None)
                elif name:
                    self._namespaces[name] = labels
                self._confirm(kind)
            return
        record = self._pod_record(obj)
        if record is None:
            return
        with self._changed:
            was_counted = self._index.remove(record.key)
            if event_type != DELETED and record.running:
                self._index.add(record.key, record.shape, record.uid)
            if (was_counted or record.shape is not None) and record.key not in self._index.pods:
                self._bury([(record.key, record.uid)])
            self._drop_reservation(record.key, record.uid)
            self._confirm(kind)

    def confirm(self, kind: str) -> None:
        """The API confirmed this kind is current (a bookmark, a watch that ended quietly)."""
        with self._changed:
            self._confirm(kind)

    def set_live(self, kind: str, live: bool) -> None:
        """A watch of `kind` is open (the cache follows the API) or has just broken off."""
        with self._changed:
            if live:
                self._live.add(kind)
            else:
                self._live.discard(kind)
            self._confirm(kind)

    def mark_static(self, *, dra: bool = True) -> None:
        """No cluster: what was loaded (possibly nothing) is the whole truth, and never stale;
        `dra` False: nothing is known of DRA objects, so a claim not found is no fact."""
        with self._changed:
            self._synced.update(KINDS)
            if dra:
                self._synced.update(DRA_KINDS)
            self._reindex_dra()
            self._fresh_at.clear()
            self._changed.notify_all()

    # Reservations -------------------------------------------------------------------------

    def reserve(self, namespace: str, key: str, shape: PodShape, uid: str = "") -> None:
        """Count an admitted pod now, until the watch shows it or the TTL passes."""
        with self._changed:
            entry = Reservation(self._index.intern(shape), self._clock() + self.reservation_ttl, uid)
            self._reserved.put(namespace, key, entry)
            self._changed.notify_all()

    def release(self, namespace: str, key: str) -> None:
        with self._changed:
            self._reserved.pop(namespace, key)
            self._changed.notify_all()

    # Readers ------------------------------------------------------------------------------

    def namespace_view(self) -> dict[str, Mapping[str, str]]:
        """Every listed Namespace with its labels (not the namespaces only pods name)."""
        with self._lock:
            return dict(self._namespaces)

    def namespace_labels(self, namespace: str) -> Mapping[str, str]:
        with self._lock:
            return self._namespaces.get(namespace, {})

    def usage(self, namespace: str, settings: QuotaSettings, *, excluding: str | None = None) -> Usage:
        """Watched pods plus live reservations (for `quota status` and /metrics), optionally without
        the reservation of one pod key (a pod admitted again must not count against itself)."""
        return self.tally(namespace, settings, excluding=excluding).usage()

    def tally(self, namespace: str, settings: QuotaSettings, *, excluding: str | None = None) -> Tally:
        """usage() in units (quota's QuotaView): the running total the watch and the reservations
        keep, plus the namespace's shared ResourceClaims, each counted once."""
        with self._lock:
            self._reserved.expire(namespace, self._clock())
            own = self._reserved.get(namespace, excluding) if excluding else None
            total = self._counter.total(namespace, settings, lambda: self._shapes(namespace).items())
            if own is not None:
                total = total - own_tally(own.shape, settings)
            if not self._shares_claims(namespace):
                return total
            shapes = self._shapes(namespace)
            if own is not None:
                shapes[own.shape] -= 1
        return total + _shared_claims_tally((shape for shape, n in shapes.items() if n > 0), settings)

    def counted(self, namespace: str, *, excluding: str | None = None) -> list[tuple[PodShape, int]]:
        """Every shape the namespace's usage counts, with its pods: watched and live reservations
        (but the reservation of `excluding`). Summed from scratch, they give what tally() keeps
        running."""
        with self._lock:
            self._reserved.expire(namespace, self._clock())
            shapes = self._shapes(namespace)
            own = self._reserved.get(namespace, excluding) if excluding else None
            if own is not None:
                shapes[own.shape] -= 1
            return [(shape, n) for shape, n in shapes.items() if n > 0]

    def claims_in_use(self, namespace: str) -> frozenset[str]:
        """Shared ResourceClaims that watched pods or reservations of the namespace already hold."""
        with self._lock:
            self._reserved.expire(namespace, self._clock())
            if not self._shares_claims(namespace):
                return frozenset()
            shapes = set(self._shapes(namespace))
        return frozenset(claim.key for shape in shapes for claim in shape.shared_claims())

    @property
    def allocatable(self) -> frozenset[str] | None:
        """Extended resource names some node advertises; None: nodes not listed (or none exist)."""
        return self._allocatable

    @property
    def nodes_listed(self) -> bool:
        with self._lock:
            return self._nodes.listed

    def dra(self) -> DraIndex:
        """The current DRA snapshot (immutable; swapped whole on every change)."""
        return self._dra

    def dra_templates(self) -> list[KubeObject]:
        """The watched ResourceClaimTemplates, whole (the template keeper compares specs)."""
        with self._lock:
            return self._dra_store.templates()

    @property
    def slices_listed(self) -> bool:
        """ResourceSlices have been listed (or an inventory said which exist): none found is a fact."""
        with self._lock:
            return SLICES in self._synced

    @property
    def slices_known(self) -> bool:
        """ResourceSlices are listed and at least one is published. Until then a DRA claim cannot be
        judged by the devices its selectors pick, and is counted by the largest device its class
        could select."""
        with self._lock:
            return SLICES in self._synced and bool(self._slice_names)

    @property
    def dra_synced(self) -> bool:
        with self._lock:
            return self._synced.issuperset(RESOLVING_KINDS)

    def pod_usage(self, namespace: str, settings: QuotaSettings) -> Usage:
        """Watched pods only: strict mode takes admissions in flight from the shared ledger."""
        with self._lock:
            shapes = self._index.shapes(namespace)
        return _demand(shapes, settings)

    def knows(self, key: str, uid: str = "") -> bool:
        """True when the watch has shown this pod: counted here, or recently gone. An empty uid
        matches any pod of that name."""
        with self._lock:
            self._prune_gone()
            return self._shown(key, uid)

    def namespaces(self) -> list[str]:
        with self._lock:
            return sorted(set(self._namespaces) | set(self._index.counts) | self._reserved.namespaces())

    @property
    def synced(self) -> bool:
        with self._lock:
            return self._synced.issuperset(KINDS)

    def staleness(self) -> float | None:
        """Seconds the cache may lag the API: 0 while every watch is open, else the time since the
        API last confirmed a kind that is not watched. None without a cluster, or before sync."""
        with self._lock:
            if not self._fresh_at or not self.synced:
                return None
            lagging = [at for kind, at in self._fresh_at.items() if kind not in self._live]
            return max(0.0, self._clock() - min(lagging)) if lagging else 0.0

    def stats(self) -> CacheStats:
        with self._lock:
            reservations = len(self._reserved)
            index = self._index
            return CacheStats(
                len(index.pods),
                len(self._namespaces),
                reservations,
                len(index.interned),
                self._unreadable,
                len(self._nodes),
            )

    def wait_until(self, predicate: Callable[[ClusterCache], bool], timeout: float) -> bool:
        """Block until `predicate(self)` holds after some change; False on timeout."""
        with self._changed:
            return self._changed.wait_for(lambda: predicate(self), timeout)

    # Internals ----------------------------------------------------------------------------

    def _shares_claims(self, namespace: str) -> bool:
        return bool(self._index.sharing.get(namespace) or self._reserved.sharing.get(namespace))

    def _shapes(self, namespace: str) -> Counter[PodShape]:
        """Pods per shape, watched and reserved (without dropping expired reservations)."""
        shapes = Counter(self._index.counts.get(namespace) or _NO_SHAPES)
        shapes.update(self._reserved.shapes(namespace))
        return shapes

    def _pod_record(self, pod: KubeObject) -> _PodRecord | None:
        meta = pod.get("metadata")
        if not isinstance(meta, dict) or not meta.get("name") or not meta.get("namespace"):
            return None
        key = f"{meta['namespace']}/{meta['name']}"
        uid = meta.get("uid") if isinstance(meta.get("uid"), str) else ""
        try:
            # A claim not seen yet is left out rather than making the pod unreadable: the watch
            # may show a pod before its claim.
            shape = pod_shape(pod, self._dra_lenient, meta["namespace"])
        except QuotaInputError as e:
            self._unreadable += 1
            log.warning("pod not counted", extra={"pod": key, "reason": str(e)})
            shape = None
        return _PodRecord(key, uid or "", shape, not is_finished(pod))

    def _bury(self, pods: Iterable[tuple[str, str]]) -> None:
        now = self._clock()
        for key, uid in pods:
            self._gone.pop(key, None)
            self._gone[key] = (now, uid)
        self._prune_gone()

    def _prune_gone(self) -> None:
        horizon = self._clock() - self.reservation_ttl
        while self._gone:
            key, (when, _) = next(iter(self._gone.items()))
            if when > horizon:
                break
            del self._gone[key]

    def _drop_reservation(self, key: str, uid: str) -> None:
        namespace = _namespace_of(key)
        found = self._reserved.get(namespace, key)
        if found is not None and found.uid in ("", uid):
            self._reserved.pop(namespace, key)

    def _drop_seen_reservations(self) -> None:
        """After a list: reservations of pods the list showed (running or finished) have done their job."""
        for namespace, key, reservation in self._reserved.entries():
            if self._shown(key, reservation.uid):
                self._reserved.pop(namespace, key)

    def _shown(self, key: str, uid: str) -> bool:
        """Counted now, or recently gone; an empty uid matches any pod of that name."""
        return any(
            found is not None and uid in ("", found[1])
            for found in (self._index.pods.get(key), self._gone.get(key))
        )

    def _reindex_dra(self) -> None:
        index = self._dra_store.index(self._synced.issuperset(RESOLVING_KINDS))
        if index is not self._dra:
            self._dra = index
            self._dra_lenient = replace(index, synced=False)

    def _count_slice(self, event_type: str, name: str) -> None:
        if event_type == DELETED:
            self._slice_names.discard(name)
        elif name:
            self._slice_names.add(name)

    def _update_nodes(self, change: Callable[[NodeNames], bool]) -> None:
        with self._changed:
            if change(self._nodes):
                before, self._allocatable = self._allocatable, self._nodes.union()
                if before != self._allocatable:
                    _log_names(before, self._allocatable)
            self._changed.notify_all()

    def _confirm(self, kind: str) -> None:
        if kind == NODES:  # informational: never synced-or-stale, see NODES
            self._changed.notify_all()
            return
        self._synced.add(kind)
        self._fresh_at[kind] = self._clock()
        self._changed.notify_all()


_NO_SHAPES: Counter[PodShape] = Counter()  # never written: the shapes of a namespace without any
Adjust = Callable[[str, PodShape, int], None]
"""Told of every pod (or reservation) counted or no longer counted: namespace, shape, +1 or -1."""


def _ignore(namespace: str, shape: PodShape, sign: int) -> None:
    """A PodIndex being built from a list: the running totals start again once it is swapped in."""


class Reservations:
    """Admissions in flight per namespace, kept in expiry order, with a running count per shape."""

    def __init__(self, on_change: Adjust = _ignore) -> None:
        self._entries: dict[str, dict[str, Reservation]] = {}
        self._shapes: dict[str, Counter[PodShape]] = {}
        # Reservations per namespace whose shape holds a shared ResourceClaim.
        self.sharing: Counter[str] = Counter()
        self._on_change = on_change

    def __len__(self) -> int:
        return sum(len(entries) for entries in self._entries.values())

    def namespaces(self) -> set[str]:
        return {namespace for namespace, entries in self._entries.items() if entries}

    def entries(self) -> list[tuple[str, str, Reservation]]:
        return [(ns, key, r) for ns, entries in self._entries.items() for key, r in entries.items()]

    def get(self, namespace: str, key: str) -> Reservation | None:
        return self._entries.get(namespace, {}).get(key)

    def put(self, namespace: str, key: str, reservation: Reservation) -> None:
        """The TTL is the same for all, so appending keeps expiry order."""
        earlier = self.get(namespace, key)
        if earlier is not None and earlier.shape == reservation.shape:
            # The same pod again (a retried create): only its expiry moves, to the end.
            entries = self._entries[namespace]
            del entries[key]
            entries[key] = reservation
            return
        self.pop(namespace, key)
        self._entries.setdefault(namespace, {})[key] = reservation
        shape = reservation.shape
        self._shapes.setdefault(namespace, Counter())[shape] += 1
        if shape.claims and shape.shared_claims():
            self.sharing[namespace] += 1
        self._on_change(namespace, shape, 1)

    def pop(self, namespace: str, key: str) -> Reservation | None:
        found = self._entries.get(namespace, {}).pop(key, None)
        if found is not None:
            shape = found.shape
            shapes = self._shapes[namespace]
            shapes[shape] -= 1
            if shapes[shape] <= 0:
                del shapes[shape]
            if shape.claims and shape.shared_claims():
                _decrement(self.sharing, namespace)
            self._on_change(namespace, shape, -1)
        return found

    def expire(self, namespace: str, now: float) -> None:
        """Drop the namespace's reservations whose TTL has passed (the oldest come first)."""
        entries = self._entries.get(namespace)
        while entries:
            key, first = next(iter(entries.items()))
            if first.expires > now:
                break
            self.pop(namespace, key)

    def shapes(self, namespace: str) -> Counter[PodShape]:
        """Reservations by shape (expired ones too, until `expire`); read only."""
        return self._shapes.get(namespace) or _NO_SHAPES


class PodIndex:
    """Counted pods by key (with uid), and how many pods of each shape every namespace holds."""

    def __init__(self, on_change: Adjust = _ignore) -> None:
        self.pods: dict[str, tuple[PodShape, str]] = {}
        self.counts: dict[str, Counter[PodShape]] = {}
        self.interned: dict[PodShape, PodShape] = {}
        # Pods per namespace whose shape holds a shared ResourceClaim.
        self.sharing: Counter[str] = Counter()
        self.on_change = on_change
        self._refs: Counter[PodShape] = Counter()

    def intern(self, shape: PodShape) -> PodShape:
        return self.interned.get(shape, shape)

    def shapes(self, namespace: str) -> list[tuple[PodShape, int]]:
        return list(self.counts.get(namespace, Counter()).items())

    def add(self, key: str, shape: PodShape | None, uid: str) -> None:
        if shape is None:
            return
        shape = self.interned.setdefault(canonical(shape), shape)
        self._refs[shape] += 1
        self.pods[key] = (shape, uid)
        namespace = _namespace_of(key)
        self.counts.setdefault(namespace, Counter())[shape] += 1
        if shape.claims and shape.shared_claims():
            self.sharing[namespace] += 1
        self.on_change(namespace, shape, 1)

    def remove(self, key: str) -> bool:
        found = self.pods.pop(key, None)
        if found is None:
            return False
        shape = found[0]
        namespace = _namespace_of(key)
        counts = self.counts[namespace]
        counts[shape] -= 1
        if counts[shape] <= 0:
            del counts[shape]
            if not counts:
                del self.counts[namespace]
        if shape.claims and shape.shared_claims():
            _decrement(self.sharing, namespace)
        self._refs[shape] -= 1
        if self._refs[shape] <= 0:
            del self._refs[shape]
            del self.interned[shape]
        self.on_change(namespace, shape, -1)
        return True


class UsageCounter:
    """The own demand (without shared claims) of every counted pod and reservation, per namespace
    and accounting settings, kept as a running Tally: a watch event or a reservation adjusts it by
    that one pod's demand, so a request reads it instead of summing the namespace.

    A total starts from scratch the first time a request asks for it (settings are the quotas',
    known only then), and again after a relist (`clear`)."""

    def __init__(self) -> None:
        # By the settings object itself (held, so its id stays its own): hashing a QuotaSettings
        # costs more than the lookup. Equal settings of a reloaded policy only start a new total.
        self._totals: dict[int, tuple[QuotaSettings, dict[str, Tally]]] = {}

    def clear(self) -> None:
        self._totals.clear()

    def adjust(self, namespace: str, shape: PodShape, sign: int) -> None:
        for settings, totals in self._totals.values():
            found = totals.get(namespace)
            if found is not None:
                delta = own_tally(shape, settings)
                totals[namespace] = found + delta if sign > 0 else found - delta

    def total(
        self, namespace: str, settings: QuotaSettings, shapes: Callable[[], Iterable[tuple[PodShape, int]]]
    ) -> Tally:
        """The running total; `shapes`, every counted shape with its pods, when it must start."""
        entry = self._totals.get(id(settings))
        if entry is None or entry[0] is not settings:
            if len(self._totals) >= MAX_SETTINGS:  # settings of policies long replaced
                del self._totals[next(iter(self._totals))]
            entry = self._totals[id(settings)] = (settings, {})
        totals = entry[1]
        found = totals.get(namespace)
        if found is None:
            if len(totals) >= MAX_TOTALS:  # bounds memory; a total dropped starts again when asked
                totals.clear()
            found = totals[namespace] = _own_total(shapes(), settings)
        return found


def _own_total(shapes: Iterable[tuple[PodShape, int]], settings: QuotaSettings) -> Tally:
    result = NONE
    for shape, count in shapes:
        if count > 0:
            result = result + own_tally(shape, settings).times(count)
    return result


def _shared_claims_tally(shapes: Iterable[PodShape], settings: QuotaSettings) -> Tally:
    """Each shared ResourceClaim the shapes hold, once, however many pods hold it."""
    shared: dict[str, ClaimShape] = {}
    for shape in shapes:
        shared.update((claim.key, claim) for claim in shape.shared_claims())
    result = NONE
    for claim in shared.values():
        result = result + Tally.of(claim_demand(claim, settings))
    return result


def _decrement(counter: Counter[str], key: str) -> None:
    counter[key] -= 1
    if counter[key] <= 0:
        del counter[key]


def _log_names(before: frozenset[str] | None, after: frozenset[str] | None) -> None:
    """Rare (a node pool comes or goes, a device plugin changes its names): worth a line."""
    old, new = before or frozenset(), after or frozenset()
    log.info(
        "node resource names changed",
        extra={"added": sorted(new - old), "removed": sorted(old - new), "known": after is not None},
    )


def _namespace_of(key: str) -> str:
    return key.split("/", 1)[0]


def _demand(shapes: Iterable[tuple[PodShape, int]], settings: QuotaSettings) -> Usage:
    """Every shape times its pods, with each shared ResourceClaim counted once, however many
    pods hold it."""
    result = NOTHING
    shared: dict[str, ClaimShape] = {}
    for shape, count in shapes:
        result = result + shape_demand(shape.own(), settings).times(count)
        shared.update((claim.key, claim) for claim in shape.shared_claims())
    for claim in shared.values():
        result = result + claim_demand(claim, settings)
    return result


def _name(obj: KubeObject) -> str:
    meta = obj.get("metadata")
    name = meta.get("name") if isinstance(meta, dict) else None
    return name if isinstance(name, str) else ""


def _namespace_entry(obj: KubeObject) -> tuple[str, dict[str, str]]:
    meta: Any = obj.get("metadata")
    labels = meta.get("labels") if isinstance(meta, dict) else None
    if not isinstance(labels, dict):
        labels = {}
    clean = {str(k): str(v) for k, v in labels.items() if isinstance(k, str) and isinstance(v, str)}
    return _name(obj), clean
