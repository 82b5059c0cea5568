"""The composition root: turn Settings into a running Service. The one place adapters are wired."""

from __future__ import annotations

from webhook.config import Settings
from webhook.decision import Decision
from webhook.metrics import Metrics
from webhook.policy.store import PolicyStore
from webhook.review import ReviewDeps, review
from webhook.service import Readiness, Service
from webhook.types import AdmissionRequest, Endpoint


def build_service(settings: Settings) -> Service:
    metrics = Metrics()
    store = PolicyStore(settings.policies_dir, metrics)
    store.load()

    def run_review(request: AdmissionRequest, endpoint: Endpoint) -> Decision:
        return review(request, endpoint, ReviewDeps(policies=store.current))

    def readiness() -> Readiness:
        return Readiness(ready=store.loaded, checks={"policies": store.current.version})

    return Service(
        review=run_review,
        readiness=readiness,
        metrics=metrics,
        max_body_bytes=settings.max_body_bytes,
        failure_mode=settings.failure_mode,
    )
