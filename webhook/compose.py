"""The composition root: turn Settings into a running Service. The one place adapters are wired."""

from __future__ import annotations

import asyncio
import collections
import dataclasses
import functools
import logging
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

from prometheus_client import Counter

from webhook import cluster as cluster_api
from webhook import kubeversion
from webhook.audit.setup import build_recorder
from webhook.clusterstate import ClusterState, build_cluster_state, own_namespace
from webhook.config import Settings
from webhook.decision import Decision
from webhook.dra import templates
from webhook.dra.served import unserved
from webhook.errors import ConfigError
from webhook.events import DenialEvents
from webhook.gatekeeper_data import namespace_inventory, static_inventory
from webhook.gauges import register_quota_gauges
from webhook.keeper.loop import KeeperLoop
from webhook.keeper.setup import build_template_keeper
from webhook.match import glob_matches
from webhook.measured import Measured
from webhook.metrics import Metrics
from webhook.native.params import from_layout
from webhook.policy.loader import EngineFactory, regopy_engine
from webhook.policy.sources import PolicySources
from webhook.policy.store import PolicyStore
from webhook.policy.watch import PolicyWatcher
from webhook.review import ReviewDeps, ReviewSettings, review
from webhook.scan.periodic import PeriodicScan
from webhook.scan.setup import build_periodic_scan
from webhook.service import Hook, Readiness, Service
from webhook.types import AdmissionRequest, Endpoint
from webhook.utilization.cache import CapacityCache, build_cache

log = logging.getLogger(__name__)


def policy_sources(settings: Settings) -> PolicySources:
    return PolicySources(settings.policy_paths, bundle=settings.security_bundle)


def build_service(settings: Settings) -> Service:
    metrics = Metrics()
    store = PolicyStore(policy_sources(settings), metrics, engine_factory(settings))
    store.load()
    watcher = PolicyWatcher(store, settings.policy_check_seconds)
    cluster = build_cluster_state(settings)
    register_quota_gauges(metrics, cluster, lambda: store.current.quotas)
    metrics.add_gauges(
        "gpu_webhook_dra_templates_missing",
        "ResourceClaimTemplates that mode dra policies need and the cluster state lacks.",
        ("namespace",),
        lambda: _missing_by_namespace(store, cluster, settings.excluded_namespaces),
    )
    capacity = _capacity_cache(settings, metrics, store)
    inventory = (
        static_inventory(settings.inventory) if settings.inventory else namespace_inventory(cluster.cache)
    )
    version_text = settings.kubernetes_version or cluster.kubernetes_version
    version = kubeversion.parse(version_text) if version_text else None
    log.info("kubernetes version", extra={"version": version_text or "unknown"})
    review_settings = ReviewSettings(
        settings.excluded_namespaces,
        settings.own_username,
        settings.advisory_webhook,
        settings.quota_failure_mode,
        settings.enforcement,
    )

    measured = Measured()

    def run_review(request: AdmissionRequest, endpoint: Endpoint, *, may_block: bool = True) -> Decision:
        deps = ReviewDeps(
            policies=store.current,
            settings=review_settings,
            namespace_labels=cluster.cache.namespace_labels,
            quota_gate=cluster.gate,
            quota_unavailable=cluster.stale_reason(),
            gatekeeper_inventory=inventory,
            placement=capacity.view(time.time()) if capacity is not None else None,
            may_block=may_block,
            kubernetes_version=version,
            dra=cluster.cache.dra(),
            allocatable=cluster.cache.allocatable,
            # Param kinds are not watched: with --inventory FILE they come from it, else none is known.
            native_params=from_layout(inventory) if settings.inventory else None,
            within_bounds=measured.checked(request),
        )
        decision = review(request, endpoint, deps)  # WouldBlock: it runs again, on a thread
        measured.forget(request)
        return decision

    strict = cluster.gate.mode == "strict"
    # Sized to the CPUs regopy can use: more threads than that only contend for the GIL (bench/).
    executor = ThreadPoolExecutor(settings.review_threads, thread_name_prefix="review")
    # Large reviews get a thread of their own: however many arrive, ordinary ones keep theirs.
    heavy_executor = ThreadPoolExecutor(1, thread_name_prefix="review-heavy")
    service = Service(
        review=run_review,
        # Strict quota calls the Kubernetes API from any review: never on the loop.
        review_now=None if strict else functools.partial(run_review, may_block=False),
        readiness=_readiness(store, cluster, capacity, settings.excluded_namespaces),
        metrics=metrics,
        max_body_bytes=settings.max_body_bytes,
        failure_mode=settings.failure_mode,
        on_startup=(watcher.start, _hook(cluster.start), *((capacity.start,) if capacity else ())),
        on_shutdown=(
            watcher.stop,
            _hook(cluster.stop),
            *((capacity.stop,) if capacity else ()),
            _hook(lambda: executor.shutdown(wait=False, cancel_futures=True)),  # never wait on a stuck review
            _hook(lambda: heavy_executor.shutdown(wait=False, cancel_futures=True)),
        ),
        executor=executor,
        is_heavy=measured.is_heavy,
        heavy_executor=heavy_executor,
        threaded=lambda endpoint: strict or (endpoint != "mutate" and bool(store.current.constraints)),
        body_timeout_seconds=settings.body_timeout_seconds,
        max_inflight=settings.max_inflight,
    )
    audit = build_recorder(settings, metrics.registry, lambda: store.current.version)
    if audit is not None:
        recorder, writer = audit
        service = dataclasses.replace(
            service,
            record=recorder.record,
            readiness=_with_audit(service.readiness, recorder.readiness),
            on_startup=(*service.on_startup, recorder.start),
            on_shutdown=(recorder.stop, writer.close, *service.on_shutdown),
        )
    sink = audit[1].journal.append if audit is not None else None
    scan = build_periodic_scan(settings, metrics, lambda: store.current, cluster, review_settings, sink)
    service = _with_background(service, scan) if scan is not None else service
    keeper = build_template_keeper(settings, metrics, lambda: store.current, cluster)
    service = _with_background(service, keeper) if keeper is not None else service
    return _with_denial_events(service, settings) if settings.emit_denial_events else service


def _with_denial_events(service: Service, settings: Settings) -> Service:
    connection = cluster_api.connect(settings.kubeconfig)
    if connection is None:
        raise ConfigError("--emit-denial-events needs a cluster: no service account and no kubeconfig")
    dropped = Counter(
        "gpu_webhook_denial_events_dropped",
        "Denial Events not written, by reason (rate limited, queue full, write failed, ...).",
        ["reason"],
        registry=service.metrics.registry,
    )
    events = DenialEvents(
        cluster_api.EventStore(connection, own_namespace(settings)),
        on_dropped=lambda reason: dropped.labels(reason=reason).inc(),
    )
    return dataclasses.replace(
        service,
        on_denial=events.offer,
        on_startup=(*service.on_startup, _hook(events.start)),
        on_shutdown=(_in_thread(events.stop), *service.on_shutdown),
    )


def _with_background(service: Service, task: PeriodicScan | KeeperLoop) -> Service:
    """A background task starts once the audit log is open and the caches are starting, and stops
    (releasing its Lease) before they close."""

    async def stop() -> None:
        await asyncio.to_thread(task.stop)

    return dataclasses.replace(
        service,
        on_startup=(*service.on_startup, _hook(task.start)),
        on_shutdown=(stop, *service.on_shutdown),
    )


def _readiness(
    store: PolicyStore, cluster: ClusterState, capacity: CapacityCache | None, exempt: tuple[str, ...]
) -> Callable[[], Readiness]:
    def readiness() -> Readiness:
        cluster_ready, cluster_text = cluster.readiness()
        checks = {"policies": store.current.version, "cluster": cluster_text}
        if store.last_error:
            checks["policy_reload"] = f"rejected, last good set in force: {store.last_error}"
        if store.current.skipped:  # informational: the rest of the set is enforced
            first = store.current.skipped[0]
            checks["policy_skipped"] = (
                f"{len(store.current.skipped)} document(s) not enforced, first: {first}"
            )
        missing = unserved(store.current.shared_names, cluster.cache.allocatable, cluster.cache.dra())
        if missing:  # informational: the webhook works; the rewritten pods would stay Pending
            checks["resources"] = f"no node and no DeviceClass serves {', '.join(missing)}"
        absent = _missing_templates(store, cluster, exempt)
        if absent:  # informational too: pods pointed at them would be denied, naming the template
            checks["dra_templates"] = templates.missing_summary(absent)
        if capacity is not None:
            checks["utilization"] = capacity.status(time.time())  # informational: never gates readiness
        return Readiness(ready=store.loaded and cluster_ready, checks=checks)

    return readiness


def _with_audit(
    readiness: Callable[[], Readiness], audit: Callable[[], tuple[bool, str]]
) -> Callable[[], Readiness]:
    """A replica that cannot write its audit log refuses every decision (--audit-failure-mode
    closed): unready, so the Service sends pods to replicas that can record them."""

    def combined() -> Readiness:
        state = readiness()
        audit_ready, audit_text = audit()
        return Readiness(ready=state.ready and audit_ready, checks={**state.checks, "audit": audit_text})

    return combined


def _missing_templates(store: PolicyStore, cluster: ClusterState, exempt: tuple[str, ...]) -> list[str]:
    """Pods in exempt namespaces never reach the webhook: they need no templates."""
    policies = store.current.sharing
    if not any(p.sharing.mode == "dra" for p in policies):
        return []
    cache = cluster.cache
    namespaces = {
        name: cache.namespace_labels(name) for name in cache.namespaces() if not glob_matches(exempt, name)
    }
    return templates.missing(policies, namespaces, cache.dra())


def _missing_by_namespace(
    store: PolicyStore, cluster: ClusterState, exempt: tuple[str, ...]
) -> list[tuple[tuple[str], float]]:
    missing = _missing_templates(store, cluster, exempt)
    counts = collections.Counter(name.split("/", 1)[0] for name in missing)
    return [((namespace,), float(count)) for namespace, count in sorted(counts.items())]


def engine_factory(settings: Settings) -> EngineFactory:
    """Where ConstraintTemplates run: in this process (regopy), or on an OPA server."""
    if settings.engine == "regopy":
        return regopy_engine
    # Imported only when asked for: the OPA client and its HTTP stack add about 0.2 s to every start.
    from webhook.policy.engines.opa import OpaEngine, OpaSettings

    token = settings.opa_token_file.read_text().strip() if settings.opa_token_file else None
    opa = OpaSettings(
        url=settings.opa_url,
        timeout=settings.opa_timeout_seconds,
        retries=settings.opa_retries,
        fail_open=settings.opa_failure_mode == "open",
        token=token,
        ca_file=str(settings.opa_ca_file) if settings.opa_ca_file else None,
    )
    return lambda templates, _: OpaEngine.connect(templates, opa)


def _capacity_cache(settings: Settings, metrics: Metrics, store: PolicyStore) -> CapacityCache | None:
    if settings.utilization is not None:
        return build_cache(settings.utilization, metrics)
    if any(p.inject.prefer_underutilized for p in store.current.sharing):
        log.warning("policies ask for placement hints (preferUnderutilized) but no --prometheus-url is set")
    return None


def _hook(action: Callable[[], None]) -> Hook:
    """Cluster watches run in their own threads; starting and stopping them is quick."""

    async def run() -> None:
        action()

    return run


def _in_thread(action: Callable[[], None]) -> Hook:
    """For a stop that joins a thread: the event loop must not wait on it."""

    async def run() -> None:
        await asyncio.to_thread(action)

    return run
