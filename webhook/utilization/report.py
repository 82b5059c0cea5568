"""The idle-capacity report: namespaces, workloads, recommendations, and its JSON form. Pure."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from webhook.utilization import analysis
from webhook.utilization.advice import Capabilities, fit, need
from webhook.utilization.analysis import NamespaceUsage, Thresholds, WorkloadUsage
from webhook.utilization.labels import Device
from webhook.utilization.owners import OwnerIndex
from webhook.utilization.recommend import Recommendation, advise
from webhook.utilization.usage import FleetReading


@dataclass(frozen=True)
class Report:
    generated_at: float
    window: str
    source: str
    thresholds: Thresholds
    capabilities: Capabilities
    namespaces: tuple[NamespaceUsage, ...]
    recommendations: tuple[Recommendation, ...]
    notes: tuple[str, ...]
    unallocated: tuple[Device, ...] = field(default=())

    @property
    def gpus_reserved(self) -> float:
        return sum(n.gpus_reserved for n in self.namespaces)

    @property
    def gpus_freed(self) -> float:
        return sum(r.gpus_freed for r in self.recommendations)

    @property
    def idle_namespaces(self) -> tuple[str, ...]:
        return tuple(n.namespace for n in self.namespaces if n.idle)

    def freed_in(self, namespace: str) -> float:
        return sum(r.gpus_freed for r in self.recommendations if r.namespace == namespace)


def build_report(
    reading: FleetReading,
    index: OwnerIndex,
    thresholds: Thresholds,
    capabilities: Capabilities,
    source: str,
) -> Report:
    usages = analysis.workloads(reading.rows, index, thresholds)
    namespaces = analysis.namespaces(usages, thresholds)
    advice = [advise(ns, index, thresholds, capabilities, reading.window.text) for ns in namespaces]
    recommendations = tuple(r for a in advice for r in a.recommendations)
    freed = {
        ns.namespace: sum(r.gpus_freed for r in recommendations if r.namespace == ns.namespace)
        for ns in namespaces
    }
    # Idle namespaces first, then the ones with the most to gain.
    ordered = sorted(namespaces, key=lambda n: (not n.idle, -freed[n.namespace], n.namespace))
    return Report(
        generated_at=reading.at,
        window=reading.window.text,
        source=source,
        thresholds=thresholds,
        capabilities=capabilities,
        namespaces=tuple(ordered),
        recommendations=tuple(sorted(recommendations, key=lambda r: (-r.gpus_freed, r.name))),
        notes=tuple(n for a in advice for n in a.notes),
        unallocated=tuple(analysis.unallocated(reading.rows)),
    )


def as_json(report: Report) -> dict[str, Any]:
    return {
        "generatedAt": report.generated_at,
        "window": report.window,
        "source": report.source,
        "thresholds": {
            "idlePercent": report.thresholds.idle_percent,
            "busyPercent": report.thresholds.busy_percent,
            "headroom": report.thresholds.headroom,
        },
        "modes": list(report.capabilities.modes),
        "gpusReserved": _round(report.gpus_reserved),
        "gpusFreed": _round(report.gpus_freed),
        "idleNamespaces": list(report.idle_namespaces),
        "unallocatedGpus": [d.describe() for d in report.unallocated],
        "namespaces": [_namespace(n, report) for n in report.namespaces],
        "recommendations": [_recommendation(r) for r in report.recommendations],
        "notes": list(report.notes),
    }


def _namespace(usage: NamespaceUsage, report: Report) -> dict[str, Any]:
    return {
        "namespace": usage.namespace,
        "idle": usage.idle,
        "gpusReserved": _round(usage.gpus_reserved),
        "utilMeanPercent": _round(usage.util_mean),
        "utilP95Percent": _round(usage.util_p95),
        "memoryPeakMiB": _round(usage.memory_peak_mib),
        "gpusFreed": _round(report.freed_in(usage.namespace)),
        "workloads": [_workload(w, report) for w in usage.workloads],
    }


def _workload(usage: WorkloadUsage, report: Report) -> dict[str, Any]:
    wanted = need(usage, report.thresholds)
    chosen = fit(usage, report.thresholds, report.capabilities)
    return {
        "kind": usage.workload.kind,
        "name": usage.workload.name,
        "pods": list(usage.pods),
        "state": usage.state,
        "gpus": [d.describe() for d in usage.devices],
        "gpusReserved": _round(usage.gpus_reserved),
        "model": usage.model_name,
        "card": usage.card,
        "current": usage.current,
        "utilMeanPercent": _round(usage.util_mean),
        "utilP95Percent": _round(usage.util_p95),
        "memoryPeakMiB": _round(usage.memory_peak_mib),
        "memoryP95MiB": _round(usage.memory_p95_mib),
        "needMemoryMiB": wanted.memory_mib if wanted else None,
        "needCoresPercent": wanted.cores if wanted else None,
        "fits": chosen.describe() if chosen else None,
    }


def _recommendation(rec: Recommendation) -> dict[str, Any]:
    return {
        "name": rec.name,
        "namespace": rec.namespace,
        "workloads": [w.describe() for w in rec.workloads],
        "sharing": rec.fit.describe(),
        "mode": rec.fit.mode,
        "migProfile": rec.fit.profile,
        "gpusReserved": _round(rec.gpus_reserved),
        "gpusFreed": _round(rec.gpus_freed),
        "policy": rec.policy,
    }


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 3)
