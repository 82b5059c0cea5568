"""The composition root: turn Settings into a running Service. The one place adapters are wired."""

from __future__ import annotations

from webhook.clusterstate import build_cluster_state
from webhook.config import Settings
from webhook.decision import Decision
from webhook.metrics import Metrics
from webhook.policy.store import PolicyStore
from webhook.quota.files import load_quotas
from webhook.quota.gauges import register_quota_gauges
from webhook.review import ReviewDeps, review
from webhook.service import Readiness, Service
from webhook.types import AdmissionRequest, Endpoint


def build_service(settings: Settings) -> Service:
    metrics = Metrics()
    store = PolicyStore(settings.policies_dir, metrics)
    store.load()
    cluster = build_cluster_state(settings)
    # Until the policy loader registers GPUQuota, quota policies are read here, once.
    quotas = load_quotas(settings.policies_dir)
    register_quota_gauges(metrics, cluster, lambda: quotas)

    def run_review(request: AdmissionRequest, endpoint: Endpoint) -> Decision:
        return review(request, endpoint, ReviewDeps(policies=store.current))

    def readiness() -> Readiness:
        cluster_ready, cluster_text = cluster.readiness()
        return Readiness(
            ready=store.loaded and cluster_ready,
            checks={"policies": store.current.version, "cluster": cluster_text},
        )

    async def start_watches() -> None:
        cluster.start()

    async def stop_watches() -> None:
        cluster.stop()

    return Service(
        review=run_review,
        readiness=readiness,
        metrics=metrics,
        max_body_bytes=settings.max_body_bytes,
        failure_mode=settings.failure_mode,
        on_startup=(start_watches,),
        on_shutdown=(stop_watches,),
    )
