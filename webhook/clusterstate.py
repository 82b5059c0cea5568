"""Where the request path's cluster state comes from, how quota reservations are shared, and readiness.

Three origins, chosen once at start:
- a live cluster (in-cluster service account, or a kubeconfig): watch caches, ready
  after the first list of pods and namespaces;
- `--inventory FILE`: the file's objects, no API access at all;
- neither: an empty state. The webhook still serves (as under `make run` on a
  laptop), counts its own admissions, and says so in the log and in /readyz.
"""

from __future__ import annotations

import logging
import os
import socket
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from webhook.accounting.demand import DEFAULT_SETTINGS, QuotaSettings
from webhook.cache import KINDS, NODES, ClusterCache
from webhook.config import DEFAULT_NAMESPACE, Settings
from webhook.dra.index import DRA_KINDS, SLICES
from webhook.errors import ClusterError, ConfigError
from webhook.informer import Informer
from webhook.inventory import cache_from, load_inventory
from webhook.quota.gate import LocalGate, QuotaGate
from webhook.quota.ledger import LedgerGate

log = logging.getLogger(__name__)

SERVICE_ACCOUNT_NAMESPACE = Path("/var/run/secrets/kubernetes.io/serviceaccount/namespace")
NO_CLUSTER = "no cluster access: running on an empty state"
CONSERVATIVE = "DRA claims are counted by the largest device their class could select"


@dataclass
class ClusterState:
    cache: ClusterCache
    gate: QuotaGate
    origin: str
    informers: Sequence[Informer] = ()
    max_staleness: float | None = None
    notes: list[str] = field(default_factory=list)
    kubernetes_version: str | None = None  # the API server's gitVersion, read once at start-up

    @property
    def live(self) -> bool:
        return bool(self.informers)

    def start(self) -> None:
        for informer in self.informers:
            informer.start()

    def stop(self) -> None:
        for informer in self.informers:
            informer.stop()

    def stale_reason(self) -> str | None:
        """Why quota should not trust the cache now: it has lagged the API past --max-staleness."""
        staleness = self.cache.staleness()
        if staleness is None or self.max_staleness is None or staleness <= self.max_staleness:
            return None
        limit = f"--max-staleness {self.max_staleness:g}s"
        return f"the cluster cache is {staleness:.0f}s behind the API (over {limit})"

    def readiness(self) -> tuple[bool, str]:
        """(ready, one line for /readyz): not ready until the caches have listed everything once."""
        if not self.cache.synced:
            return False, f"waiting for the first list of pods and namespaces from {self.origin}"
        stats = self.cache.stats()
        text = f"{self.origin}; {stats.pods} GPU pods, {stats.namespaces} namespaces; quota {self.gate.mode}"
        if self.live and not self.cache.dra_synced:
            text += "; DRA claims not listed yet (pods' claims are counted once they are)"
        if self.live and not self.cache.nodes_listed:
            text += f"; {self._nodes_unknown()}"
        if self.live and not self.cache.slices_known:
            text += f"; {self._slices_unknown()}"
        staleness = self.cache.staleness()
        if staleness is not None:
            text += f"; staleness {staleness:.1f}s"
            if self.max_staleness is not None and staleness > self.max_staleness:
                text += f" (over --max-staleness {self.max_staleness:g}s)"
        return True, text

    def _nodes_unknown(self) -> str:
        """Why no resource name is called unserved: nodes not listed yet, or refused (RBAC)."""
        return f"nodes not listed{self._why(NODES)}: resource names are not checked against them"

    def _slices_unknown(self) -> str:
        """Why claims are counted conservatively: slices not listed yet, refused (RBAC), or none
        published. Informational: claims resolve without slices."""
        if self.cache.slices_listed:
            return f"no ResourceSlices published: {CONSERVATIVE}"
        return f"ResourceSlices not listed{self._why(SLICES)}: {CONSERVATIVE}"

    def _why(self, kind: str) -> str:
        errors = [i.last_error for i in self.informers if i.kind == kind and i.last_error]
        return f" ({errors[0]})" if errors else ""


def build_cluster_state(settings: Settings, quota_settings: QuotaSettings = DEFAULT_SETTINGS) -> ClusterState:
    ttl, classes = settings.reservation_ttl_seconds, settings.dra_gpu_classes
    if settings.inventory is not None:
        cache = cache_from(load_inventory(settings.inventory), reservation_ttl=ttl, gpu_classes=classes)
        state = _offline(cache, f"inventory {settings.inventory}", settings, quota_settings)
    else:
        state = _from_cluster(settings, quota_settings) or _offline(
            cache_from(None, reservation_ttl=ttl), NO_CLUSTER, settings, quota_settings
        )
    state.max_staleness = settings.max_staleness_seconds
    facts = {"origin": state.origin, "quota_consistency": state.gate.mode, "notes": state.notes}
    if state.origin == NO_CLUSTER:
        log.warning(f"{NO_CLUSTER}; {state.notes[0]}", extra=facts)
    else:
        log.info("cluster state", extra=facts)
    return state


def own_namespace(settings: Settings) -> str:
    """--namespace, else the namespace of our service account, else gpu-system."""
    if settings.namespace:
        return settings.namespace
    try:
        return SERVICE_ACCOUNT_NAMESPACE.read_text().strip() or DEFAULT_NAMESPACE
    except OSError:
        return DEFAULT_NAMESPACE


def replica_id() -> str:
    return f"{socket.gethostname()}/{os.getpid()}"


def _offline(
    cache: ClusterCache, origin: str, settings: Settings, quota_settings: QuotaSettings
) -> ClusterState:
    if settings.quota_consistency == "strict":
        raise ConfigError("--quota-consistency strict needs cluster access (in-cluster or --kubeconfig)")
    note = "quota counts this replica's own admissions only"
    return ClusterState(cache, LocalGate(cache, quota_settings), origin, notes=[note])


def _from_cluster(settings: Settings, quota_settings: QuotaSettings) -> ClusterState | None:
    from webhook import cluster  # the kubernetes client loads only when a cluster may be there

    connection = cluster.connect(settings.kubeconfig)
    if connection is None:
        return None
    cache = ClusterCache(
        reservation_ttl=settings.reservation_ttl_seconds, gpu_classes=settings.dra_gpu_classes
    )
    # DRA kinds and nodes are watched too, but readiness waits only for pods and namespaces: a
    # cluster without resource.k8s.io (before 1.32) must still serve; its pods hold no claims.
    # DRA objects are read through the newest version served (v1, v1beta2 or v1beta1).
    # Nodes only tell which resource names are served, slices only refine what a claim counts
    # as: an install whose ClusterRole predates them (list forbidden) serves as before.
    kinds = (*KINDS, *DRA_KINDS, NODES)
    informers = [Informer(cluster.KubeSource(connection, kind), cache) for kind in kinds]
    gate: QuotaGate
    if settings.quota_consistency == "strict":
        store = cluster.ConfigMapStore(connection, own_namespace(settings))
        gate = LedgerGate(
            cache, store, replica=replica_id(), settings=quota_settings, ttl=settings.reservation_ttl_seconds
        )
        notes = [f"quota ledger in namespace {store.namespace}"]
    else:
        gate = LocalGate(cache, quota_settings)
        notes = ["quota is exact per replica; replicas do not share admissions in flight"]
    return ClusterState(
        cache,
        gate,
        f"cluster ({connection.description})",
        informers,
        notes=notes,
        kubernetes_version=cluster.server_version(connection),
    )


def snapshot(settings: Settings) -> ClusterState:
    """A one-off state for commands: the inventory, or one list of the cluster, or nothing."""
    if settings.inventory is not None:
        return _offline(
            cache_from(load_inventory(settings.inventory)),
            f"inventory {settings.inventory}",
            settings,
            DEFAULT_SETTINGS,
        )
    from webhook import cluster

    connection = cluster.connect(settings.kubeconfig)
    if connection is None:
        return _offline(cache_from(None), NO_CLUSTER, settings, DEFAULT_SETTINGS)
    cache = ClusterCache()
    for kind in (*DRA_KINDS, *KINDS):  # claims first: pods resolve theirs against them
        source = cluster.KubeSource(connection, kind)
        try:
            cache.replace(kind, [item for page in source.list_pages() for item in page.items])
        except ClusterError:
            # A cluster without DRA: its pods hold no claims; slices refused: claims still resolve.
            if kind not in DRA_KINDS:
                raise
    return ClusterState(cache, LocalGate(cache), f"cluster ({connection.description})")
