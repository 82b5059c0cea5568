"""The composition root: turn Settings into a running Service. The one place adapters are wired."""

from __future__ import annotations

import logging
import time

from webhook.config import Settings
from webhook.decision import Decision
from webhook.metrics import Metrics
from webhook.policy.store import PolicyStore
from webhook.policy.watch import PolicyWatcher
from webhook.review import ReviewDeps, ReviewSettings, review
from webhook.service import Readiness, Service
from webhook.types import AdmissionRequest, Endpoint
from webhook.utilization.cache import CapacityCache, build_cache

log = logging.getLogger(__name__)


def build_service(settings: Settings) -> Service:
    metrics = Metrics()
    store = PolicyStore(settings.policies_dir, metrics)
    store.load()
    watcher = PolicyWatcher(store, settings.policy_check_seconds)
    review_settings = ReviewSettings(settings.excluded_namespaces, settings.own_username)
    capacity = _capacity_cache(settings, metrics, store)

    def run_review(request: AdmissionRequest, endpoint: Endpoint) -> Decision:
        placement = capacity.view(time.time()) if capacity is not None else None
        deps = ReviewDeps(policies=store.current, settings=review_settings, placement=placement)
        return review(request, endpoint, deps)

    def readiness() -> Readiness:
        checks = {"policies": store.current.version}
        if store.last_error:
            checks["policy_reload"] = f"rejected, last good set in force: {store.last_error}"
        if capacity is not None:
            checks["utilization"] = capacity.status(time.time())  # informational: never gates readiness
        return Readiness(ready=store.loaded, checks=checks)

    background = (capacity,) if capacity is not None else ()
    return Service(
        review=run_review,
        readiness=readiness,
        metrics=metrics,
        max_body_bytes=settings.max_body_bytes,
        failure_mode=settings.failure_mode,
        on_startup=(watcher.start, *(c.start for c in background)),
        on_shutdown=(watcher.stop, *(c.stop for c in background)),
    )


def _capacity_cache(settings: Settings, metrics: Metrics, store: PolicyStore) -> CapacityCache | None:
    if settings.utilization is not None:
        return build_cache(settings.utilization, metrics)
    if any(p.inject.prefer_underutilized for p in store.current.sharing):
        log.warning("policies ask for placement hints (preferUnderutilized) but no --prometheus-url is set")
    return None
