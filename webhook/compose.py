"""The composition root: turn Settings into a running Service. The one place adapters are wired."""

from __future__ import annotations

import dataclasses

from webhook.audit.setup import build_recorder
from webhook.config import Settings
from webhook.decision import Decision
from webhook.metrics import Metrics
from webhook.policy.store import PolicyStore
from webhook.policy.watch import PolicyWatcher
from webhook.review import ReviewDeps, ReviewSettings, review
from webhook.service import Readiness, Service
from webhook.types import AdmissionRequest, Endpoint


def build_service(settings: Settings) -> Service:
    metrics = Metrics()
    store = PolicyStore(settings.policies_dir, metrics)
    store.load()
    watcher = PolicyWatcher(store, settings.policy_check_seconds)
    review_settings = ReviewSettings(
        settings.excluded_namespaces, settings.own_username, settings.advisory_webhook
    )

    def run_review(request: AdmissionRequest, endpoint: Endpoint) -> Decision:
        return review(request, endpoint, ReviewDeps(policies=store.current, settings=review_settings))

    def readiness() -> Readiness:
        checks = {"policies": store.current.version}
        if store.last_error:
            checks["policy_reload"] = f"rejected, last good set in force: {store.last_error}"
        return Readiness(ready=store.loaded, checks=checks)

    service = Service(
        review=run_review,
        readiness=readiness,
        metrics=metrics,
        max_body_bytes=settings.max_body_bytes,
        failure_mode=settings.failure_mode,
        on_startup=(watcher.start,),
        on_shutdown=(watcher.stop,),
    )
    audit = build_recorder(settings, metrics.registry, lambda: store.current.version)
    if audit is None:
        return service
    recorder, writer = audit
    return dataclasses.replace(
        service,
        record=recorder.record,
        on_startup=(*service.on_startup, writer.start),
        on_shutdown=(writer.close, *service.on_shutdown),
    )
