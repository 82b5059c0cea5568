"""Strict quota consistency across replicas: a shared ledger of admissions in flight.

Per namespace, one ConfigMap in our own namespace lists the pods admitted in the
last TTL seconds. Admission reads it, checks the quota against the watched pods
plus the entries this replica's watch has not shown yet, adds its own entry, and
writes the ConfigMap back with the resourceVersion it read. If another replica
wrote in between, the apiserver answers 409 Conflict and we read and decide again.
This is the optimistic concurrency the native ResourceQuota admission controller
uses on a quota's status.

The trade-off, against per-replica mode:
- exact across any number of replicas and worker processes;
- each admission that needs a quota check costs one read and one write to the API
  (a few milliseconds), and admissions in one namespace are serialised cluster-wide,
  so heavy bursts in one namespace pay in retries;
- if the API is unreachable the check cannot complete and the request fails as the
  webhook's failurePolicy says (the request is refused with failurePolicy Fail).

Entries are never pruned early: a replica whose watch lags must still count them.
They expire after the TTL, which must exceed the watch lag of every replica.
"""

from __future__ import annotations

import logging
import random
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any, Protocol

import orjson

from webhook import gpu
from webhook.accounting.count import GpuCount
from webhook.accounting.demand import DEFAULT_SETTINGS, KaiRequest, PodShape, QuotaSettings, shape_demand
from webhook.accounting.tally import Tally
from webhook.accounting.usage import Usage
from webhook.cache import ClusterCache
from webhook.dra.devices import DeviceAsk
from webhook.dra.index import DraIndex
from webhook.dra.resolve import ClaimShape
from webhook.errors import ClusterError, Conflict
from webhook.quota.check import QuotaOutcome, check_quota, request_pod_key
from webhook.quota.gate import peek
from webhook.quota.policy import GPUQuota
from webhook.types import AdmissionRequest

log = logging.getLogger(__name__)

DATA_KEY = "reservations"
NAME_PREFIX = "gpu-quota-ledger-"
MAX_ENTRIES = 2000
MAX_ATTEMPTS = 30


@dataclass(frozen=True)
class StoredLedger:
    data: Mapping[str, str]
    resource_version: str


class LedgerStore(Protocol):
    """Where ledgers live: implemented with ConfigMaps by webhook.cluster."""

    def read(self, name: str) -> StoredLedger | None: ...

    def create(self, name: str, data: Mapping[str, str]) -> None:
        """Raise Conflict if it exists already."""
        ...

    def replace(self, name: str, data: Mapping[str, str], resource_version: str) -> None:
        """Raise Conflict if the stored resourceVersion is no longer `resource_version`."""
        ...


@dataclass(frozen=True)
class Entry:
    pod: str
    uid: str
    shape: PodShape
    expires: float
    replica: str


def ledger_name(namespace: str) -> str:
    return NAME_PREFIX + namespace


class LedgerView:
    """Watched pods plus ledger entries this replica's watch has not shown yet."""

    def __init__(self, cache: ClusterCache, entries: Sequence[Entry]) -> None:
        self.cache = cache
        self.unseen = [e for e in entries if not cache.knows(e.pod, e.uid)]

    def namespace_labels(self, namespace: str) -> Mapping[str, str]:
        return self.cache.namespace_labels(namespace)

    def dra(self) -> DraIndex | None:
        return self.cache.dra()

    def claims_in_use(self, namespace: str) -> frozenset[str]:
        """Shared claims of watched pods and of admissions in flight on any replica."""
        # The entries are this namespace's: one ledger per namespace.
        unseen = {c.key for e in self.unseen for c in e.shape.shared_claims()}
        return self.cache.claims_in_use(namespace) | unseen

    def tally(self, namespace: str, settings: QuotaSettings) -> Tally:
        return Tally.of(self.usage(namespace, settings))

    def usage(self, namespace: str, settings: QuotaSettings) -> Usage:
        result = self.cache.pod_usage(namespace, settings)
        counted = set(self.cache.claims_in_use(namespace))
        for entry in self.unseen:
            # A shared claim already held (by a watched pod or an earlier entry) counts once.
            result = result + shape_demand(entry.shape.without_claims(frozenset(counted)), settings)
            counted.update(claim.key for claim in entry.shape.shared_claims())
        return result


class LedgerGate:
    mode = "strict"

    def __init__(
        self,
        cache: ClusterCache,
        store: LedgerStore,
        *,
        replica: str,
        settings: QuotaSettings = DEFAULT_SETTINGS,
        ttl: float = 30.0,
        wall: Callable[[], float] = time.time,
        rand: Callable[[], float] = random.random,
    ) -> None:
        self.cache = cache
        self.store = store
        self.replica = replica
        self.settings = settings
        self.ttl = ttl
        self._wall = wall
        self._rand = rand
        self._locks: dict[str, threading.Lock] = {}
        self._locks_guard = threading.Lock()
        self.conflicts = 0

    def admit(
        self, request: AdmissionRequest, quotas: Sequence[GPUQuota], reading: GpuCount | None = None
    ) -> QuotaOutcome:
        probe = check_quota(request, quotas, self.cache, self.settings, reading)
        reading = reading or _reading(probe)
        if not probe.checks:
            return probe  # no quota applies, no GPU asked, or unreadable: nothing to share
        with self._lock(probe.namespace):
            for _ in range(MAX_ATTEMPTS):
                outcome = self._attempt(request, quotas, probe.namespace, reading)
                if outcome is not None:
                    return outcome
                self.conflicts += 1
                time.sleep(self._rand() * 0.005)  # spread out replicas that collided
        raise ClusterError(f"quota ledger of namespace {probe.namespace} stayed contended; try again")

    def peek(
        self, request: AdmissionRequest, quotas: Sequence[GPUQuota], reading: GpuCount | None = None
    ) -> QuotaOutcome:
        """Judged on this replica's cache alone; advisory reviews never admit, so no ledger round trip."""
        return peek(self.cache, request, quotas, self.settings, reading)

    def release(self, outcome: QuotaOutcome) -> None:
        """Drop an entry whose pod another check refused after all."""
        if outcome.reserve_key is None:
            return
        with self._lock(outcome.namespace):
            for _ in range(MAX_ATTEMPTS):
                stored = self.store.read(ledger_name(outcome.namespace))
                if stored is None:
                    return
                entries = [e for e in decode(stored.data) if e.pod != outcome.reserve_key]
                try:
                    self.store.replace(
                        ledger_name(outcome.namespace), encode(entries), stored.resource_version
                    )
                    return
                except Conflict:
                    continue

    def _attempt(
        self, request: AdmissionRequest, quotas: Sequence[GPUQuota], namespace: str, reading: GpuCount | None
    ) -> QuotaOutcome | None:
        """One read-decide-write round; None when another replica wrote first."""
        name = ledger_name(namespace)
        stored = self.store.read(name)
        now = self._wall()
        entries = [e for e in decode(stored.data if stored else {}) if e.expires > now]
        own = request_pod_key(request)
        others = [e for e in entries if e.pod != own]  # a retried create must not count against itself
        outcome = check_quota(request, quotas, LedgerView(self.cache, others), self.settings, reading)
        key = outcome.reserve_key
        if key is None or outcome.shape is None:
            return outcome
        kept = [e for e in others if e.pod != key]
        if len(kept) >= MAX_ENTRIES:
            raise ClusterError(
                f"quota ledger of namespace {namespace} is full ({MAX_ENTRIES} pods in flight)"
            )
        kept.append(Entry(key, outcome.uid, outcome.shape, now + self.ttl, self.replica))
        try:
            if stored is None:
                self.store.create(name, encode(kept))
            else:
                self.store.replace(name, encode(kept), stored.resource_version)
        except Conflict:
            return None
        return outcome

    def _lock(self, namespace: str) -> threading.Lock:
        """Replicas contend through the API; requests inside one replica queue here instead."""
        with self._locks_guard:
            return self._locks.setdefault(namespace, threading.Lock())


def encode(entries: Sequence[Entry]) -> dict[str, str]:
    rows = [
        {
            "pod": e.pod,
            "uid": e.uid,
            "shape": _shape_json(e.shape),
            "expires": e.expires,
            "replica": e.replica,
        }
        for e in entries
    ]
    return {DATA_KEY: orjson.dumps(rows).decode()}


def decode(data: Mapping[str, str]) -> list[Entry]:
    """Entries of a stored ledger; unreadable ones are skipped (and logged), never fatal."""
    try:
        rows = orjson.loads(data.get(DATA_KEY) or "[]")
    except orjson.JSONDecodeError:
        log.warning("quota ledger unreadable; treating it as empty")
        return []
    entries: list[Entry] = []
    for row in rows if isinstance(rows, list) else []:
        try:
            entries.append(_entry(row))
        except (KeyError, TypeError, ValueError, ZeroDivisionError):
            log.warning("quota ledger entry unreadable; skipped")
    return entries


def _entry(row: Any) -> Entry:
    return Entry(
        pod=str(row["pod"]),
        uid=str(row.get("uid", "")),
        shape=_shape(row["shape"]),
        expires=float(row["expires"]),
        replica=str(row.get("replica", "")),
    )


def _shape_json(shape: PodShape) -> dict[str, Any]:
    kai = shape.kai
    extra: dict[str, Any] = {}
    if shape.claims:
        extra["claims"] = [_claim_json(claim) for claim in shape.claims]
    if shape.backed:
        extra["backed"] = [list(row) for row in shape.backed]
    return extra | {
        "app": [list(map(list, amounts)) for amounts in shape.app],
        "init": [[list(map(list, amounts)), sidecar] for amounts, sidecar in shape.init],
        "kai": None
        if kai is None
        else {
            "fraction": str(kai.fraction) if kai.fraction is not None else None,
            "memoryMiB": kai.memory_mib,
            "devices": kai.devices,
        },
    }


def _claim_json(claim: ClaimShape) -> dict[str, Any]:
    return {
        "key": claim.key,
        "source": claim.source,
        "asks": [
            {
                "request": a.request,
                "class": a.device_class,
                "count": a.count,
                "profile": a.profile.name if a.profile else None,
                "memoryMiB": a.memory_mib,
                "adminAccess": a.admin_access,
                "share": str(a.share),
                "chargeOnly": a.charge_only,
                "classCount": a.class_count,
            }
            for a in claim.asks
        ],
    }


def _claim(raw: Any) -> ClaimShape:
    asks = tuple(
        DeviceAsk(
            str(a["request"]),
            str(a["class"]),
            int(a["count"]),
            profile=_profile(a.get("profile")),
            memory_mib=int(a.get("memoryMiB") or 0),
            admin_access=bool(a.get("adminAccess")),
            share=Fraction(str(a.get("share") or 1)),
            charge_only=bool(a.get("chargeOnly")),
            class_count=int(a.get("classCount") or 0),
        )
        for a in raw["asks"]
    )
    return ClaimShape(str(raw["key"]), str(raw["source"]), asks)


def _profile(name: object) -> gpu.MigProfile | None:
    """A MIG profile by its name ("1g.10gb", "1g.10gb+me"), as its resource name spells it."""
    return gpu.parse_mig_resource(gpu.MIG_PREFIX + str(name).replace("+", ".")) if name else None


def _backed_row(row: Any) -> tuple[str, int, int, str]:
    """(name, slices, MiB, class); entries written before the class was kept charge no class."""
    name, slices, mib, *rest = row
    return str(name), int(slices), int(mib), str(rest[0]) if rest else ""


def _shape(raw: Any) -> PodShape:
    def amounts(rows: Any) -> tuple[tuple[str, int], ...]:
        return tuple((str(name), int(count)) for name, count in rows)

    kai = raw.get("kai")
    return PodShape(
        app=tuple(amounts(a) for a in raw["app"]),
        init=tuple((amounts(a), bool(sidecar)) for a, sidecar in raw["init"]),
        kai=None
        if kai is None
        else KaiRequest(
            Fraction(kai["fraction"]) if kai.get("fraction") is not None else None,
            int(kai["memoryMiB"]) if kai.get("memoryMiB") is not None else None,
            int(kai["devices"]),
        ),
        claims=tuple(_claim(c) for c in raw.get("claims") or ()),
        backed=tuple(_backed_row(row) for row in raw.get("backed") or ()),
    )


def _reading(probe: QuotaOutcome) -> GpuCount | None:
    """The probe's reading of the pod, for every attempt after it (a probe with checks has one)."""
    return GpuCount(shape=probe.shape) if probe.shape is not None else None
