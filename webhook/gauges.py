"""/metrics gauges for quotas and the cluster cache, computed from live state at scrape time."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from fractions import Fraction

from webhook import quantity
from webhook.accounting.usage import GPU_MEMORY
from webhook.clusterstate import ClusterState
from webhook.metrics import Metrics
from webhook.quota.policy import GPUQuota
from webhook.quota.status import StatusRow, status_rows

LABELS = ("namespace", "quota", "resource")
Sample = tuple[Sequence[str], float]


def register_quota_gauges(
    metrics: Metrics, state: ClusterState, quotas: Callable[[], Sequence[GPUQuota]]
) -> None:
    """Used and limit per namespace, quota and resource (gpus, gpuMemory in bytes, resource names)."""

    def rows() -> list[StatusRow]:
        return status_rows(quotas(), state.cache)

    def used() -> Iterator[Sample]:
        return ((_labels(r), _value(r.resource, r.used)) for r in rows())

    def limit() -> Iterator[Sample]:
        return ((_labels(r), _value(r.resource, r.limit)) for r in rows())

    metrics.add_gauges(
        "gpu_webhook_quota_used", "GPU quota usage, pods plus admissions in flight.", LABELS, used
    )
    metrics.add_gauges("gpu_webhook_quota_limit", "GPU quota limit.", LABELS, limit)
    metrics.add_gauges(
        "gpu_webhook_cluster_synced",
        "1 once pods and namespaces have been listed.",
        (),
        lambda: _synced(state),
    )
    metrics.add_gauges(
        "gpu_webhook_cluster_staleness_seconds",
        "How far the cluster cache may lag the API (0 while every watch is open).",
        (),
        lambda: _staleness(state),
    )


def _labels(row: StatusRow) -> tuple[str, str, str]:
    return (row.namespace, row.quota, row.resource)


def _value(resource: str, amount: Fraction) -> float:
    """Prometheus convention: bytes for memory."""
    return float(amount * quantity.MiB) if resource == GPU_MEMORY else float(amount)


def _synced(state: ClusterState) -> Iterator[Sample]:
    yield (), 1.0 if state.cache.synced else 0.0


def _staleness(state: ClusterState) -> Iterator[Sample]:
    staleness = state.cache.staleness()
    if staleness is not None:
        yield (), staleness
