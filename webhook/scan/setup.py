"""Wire the periodic scan from Settings: the composition root calls this, nothing else does."""

from __future__ import annotations

from collections.abc import Callable

from prometheus_client import Counter

from webhook.clusterstate import NO_CLUSTER, ClusterState, own_namespace, replica_id
from webhook.config import Settings
from webhook.errors import ConfigError
from webhook.inventory import load_inventory
from webhook.leader import LeaseElector
from webhook.metrics import Metrics
from webhook.policy.model import PolicySet
from webhook.review import ReviewSettings
from webhook.scan.periodic import PeriodicScan, ScanJob, register_scan_gauges
from webhook.scan.publish import Publisher
from webhook.scan.reports import FLAVOURS
from webhook.scan.sources import Snapshot, empty, from_cluster, from_inventory
from webhook.scan.stream import RecordSink


def build_periodic_scan(
    settings: Settings,
    metrics: Metrics,
    policies: Callable[[], PolicySet],
    cluster: ClusterState,
    review_settings: ReviewSettings,
    sink: RecordSink | None,
) -> PeriodicScan | None:
    """None when --scan-interval is 0. With a cluster, the replicas elect one scanner by Lease."""
    if settings.scan_interval_seconds <= 0:
        return None
    snapshot, elector, publisher = _source(settings, cluster)
    failures = Counter(
        "gpu_webhook_scan_failures",
        "Background scans that failed (API or audit log errors).",
        registry=metrics.registry,
    )
    job = ScanJob(snapshot, policies, review_settings, sink, publisher)
    scan = PeriodicScan(job, settings.scan_interval_seconds, elector=elector, on_failure=failures.inc)
    register_scan_gauges(metrics, scan)
    return scan


def _source(
    settings: Settings, cluster: ClusterState
) -> tuple[Callable[[], Snapshot], LeaseElector | None, Publisher | None]:
    publish = settings.scan_publish
    if publish != "none" and publish not in FLAVOURS:
        raise ConfigError(f"--scan-publish {publish[:40]!r} is not one of none, {', '.join(FLAVOURS)}")
    if publish != "none" and (settings.inventory is not None or not cluster.live):
        raise ConfigError("--scan-publish writes reports to the cluster the scan reads: it needs a cluster")
    if settings.inventory is not None:
        fixed = from_inventory(load_inventory(settings.inventory), settings.dra_gpu_classes)
        return (lambda: fixed), None, None
    if not cluster.live:
        nothing = empty(NO_CLUSTER)
        return (lambda: nothing), None, None
    from webhook import cluster as kube  # the kubernetes client loads only when there is a cluster

    connection = kube.connect(settings.kubeconfig)
    if connection is None:
        raise ConfigError("the cluster that answered at start-up is no longer configured")
    origin = f"cluster ({connection.description})"
    lister = kube.lister(connection)
    elector = LeaseElector(kube.LeaseStore(connection, own_namespace(settings)), replica_id())
    classes = settings.dra_gpu_classes
    publisher = None if publish == "none" else Publisher(kube.CustomObjectStore(connection), publish)
    return (lambda: from_cluster(lister, origin, classes)), elector, publisher
