"""Wire the ResourceClaimTemplate keeper from Settings: the composition root calls this, nothing else does."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from prometheus_client import Counter

from webhook.clusterstate import ClusterState, own_namespace, replica_id
from webhook.config import Settings
from webhook.dra import sync
from webhook.errors import ConfigError
from webhook.keeper.loop import LEASE_NAME, KeeperLoop, TemplateKeeper, World
from webhook.keeper.versions import VersionedWriter
from webhook.leader import LeaseElector
from webhook.match import glob_matches
from webhook.metrics import Metrics
from webhook.policy.model import PolicySet


def build_template_keeper(
    settings: Settings, metrics: Metrics, policies: Callable[[], PolicySet], cluster: ClusterState
) -> KeeperLoop | None:
    """None without a live cluster, or with --dra-templates-interval 0."""
    if settings.dra_templates_interval_seconds <= 0 or not cluster.live or settings.inventory is not None:
        return None
    from webhook import cluster as kube  # the kubernetes client loads only when there is a cluster

    connection = kube.connect(settings.kubeconfig)
    if connection is None:
        raise ConfigError("the cluster that answered at start-up is no longer configured")
    exempt = settings.excluded_namespaces
    writes = Counter(
        "gpu_webhook_dra_template_writes",
        "ResourceClaimTemplate writes by the keeper, by action and result (ok, conflict, error).",
        ("action", "result"),
        registry=metrics.registry,
    )
    keeper = TemplateKeeper(
        lambda: world_of(cluster, policies(), exempt),
        VersionedWriter(kube.TemplateStore(connection)),
        on_write=lambda action, result: writes.labels(action, result).inc(),
    )
    leases = kube.LeaseStore(connection, own_namespace(settings))
    elector = LeaseElector(leases, replica_id(), name=LEASE_NAME)
    loop = KeeperLoop(
        keeper,
        lambda: fingerprint_of(cluster, policies()),
        settings.dra_templates_interval_seconds,
        elector=elector,
        # Without dra policies there is nothing to create, but templates of ours may remain to be
        # retired: campaign while either holds, and leave the API alone otherwise.
        needed=lambda: _has_work(policies(), cluster),
    )
    metrics.add_gauges(
        "gpu_webhook_dra_template_conflicts",
        "Names of ResourceClaimTemplates mode dra needs that objects not ours hold with another spec.",
        (),
        lambda: [((), float(len(keeper.conflicts)))] if loop.leading else [],
    )
    return loop


def _has_work(policies: PolicySet, cluster: ClusterState) -> bool:
    return any(p.sharing.mode == "dra" for p in policies.sharing) or any(
        sync.ours(t) for t in cluster.cache.dra_templates()
    )


def world_of(cluster: ClusterState, policies: PolicySet, exempt: Sequence[str]) -> World:
    cache = cluster.cache
    namespaces = {
        name: labels
        for name, labels in cache.namespace_view().items()
        if not glob_matches(tuple(exempt), name)
    }
    ready = cache.synced and cache.dra_synced
    return World(policies, namespaces, tuple(cache.dra_templates()), ready)


def fingerprint_of(cluster: ClusterState, policies: PolicySet) -> tuple[object, ...]:
    cache = cluster.cache
    return (policies.version, Same(cache.dra()), sorted(cache.namespace_view().items(), key=_first))


class Same:
    """Equal only to the very same object: the DRA snapshot is swapped whole on every change, so
    identity says whether it changed, without comparing every claim."""

    def __init__(self, value: object) -> None:
        self.value = value

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Same) and other.value is self.value

    def __hash__(self) -> int:
        return id(self.value)


def _first(item: tuple[str, object]) -> str:
    return item[0]
