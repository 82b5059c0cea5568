"""The report as text: a namespace table, a workload table, and each recommended policy's YAML."""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence

from webhook.utilization.advice import fit
from webhook.utilization.policydoc import policy_yaml
from webhook.utilization.recommend import Recommendation
from webhook.utilization.report import Report


def table(report: Report) -> str:
    sections = [
        _heading(report),
        _namespace_table(report),
        _workload_table(report),
        *([_notes(report.notes)] if report.notes else []),
        _policies(report),
    ]
    return "\n\n".join(s.rstrip("\n") for s in sections) + "\n"


def recommendation_yaml(rec: Recommendation, report: Report) -> str:
    workloads = ", ".join(w.describe() for w in rec.workloads)
    return policy_yaml(
        rec.policy,
        [
            f"{rec.namespace}: {workloads}",
            f"{rec.gpus_reserved:.2f} GPUs reserved over {report.window}; "
            f"{rec.fit.describe()} would free {rec.gpus_freed:.2f}",
            "Check with: gpu-webhook policies check DIR",
        ],
    )


def _heading(report: Report) -> str:
    when = dt.datetime.fromtimestamp(report.generated_at, dt.UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
    idle = ", ".join(report.idle_namespaces) or "none"
    return "\n".join(
        [
            f"GPU utilization over {report.window} ending {when} ({report.source})",
            f"reserved: {report.gpus_reserved:.2f} GPUs; could free: {report.gpus_freed:.2f}; "
            f"unallocated now: {len(report.unallocated)}",
            f"idle namespaces (mean below {report.thresholds.idle_percent:g}%): {idle}",
        ]
    )


def _namespace_table(report: Report) -> str:
    rows = [
        [
            n.namespace + (" (IDLE)" if n.idle else ""),
            f"{n.gpus_reserved:.2f}",
            percent(n.util_mean),
            percent(n.util_p95),
            _gib(n.memory_peak_mib),
            f"{report.freed_in(n.namespace):.2f}",
        ]
        for n in report.namespaces
    ]
    return _grid(["NAMESPACE", "GPUS", "MEAN", "P95", "PEAK MEM", "FREES"], rows)


def _workload_table(report: Report) -> str:
    rows = []
    for namespace in report.namespaces:
        for w in namespace.workloads:
            chosen = fit(w, report.thresholds, report.capabilities)
            rows.append(
                [
                    f"{w.workload.namespace}/{w.workload.describe()}",
                    f"{w.gpus_reserved:.2f}",
                    w.current,
                    w.state,
                    percent(w.util_mean),
                    percent(w.util_p95),
                    _gib(w.memory_peak_mib),
                    chosen.describe() if chosen else "-",
                ]
            )
    return _grid(["WORKLOAD", "GPUS", "NOW", "STATE", "MEAN", "P95", "PEAK MEM", "FITS"], rows)


def _notes(notes: Sequence[str]) -> str:
    return "\n".join(["Notes:", *(f"- {n}" for n in notes)])


def _policies(report: Report) -> str:
    if not report.recommendations:
        return "No recommendations: every GPU workload is busy, already shared, or without data."
    documents = [recommendation_yaml(r, report) for r in report.recommendations]
    return f"Recommended policies ({len(documents)}):\n---\n" + "---\n".join(documents)


def _grid(header: list[str], rows: list[list[str]]) -> str:
    if not rows:
        return "  ".join(header) + "\n(none)"
    widths = [max(len(str(r[i])) for r in [header, *rows]) for i in range(len(header))]
    lines = [
        "  ".join(cell.ljust(width) for cell, width in zip(r, widths, strict=True)) for r in [header, *rows]
    ]
    return "\n".join(line.rstrip() for line in lines)


def percent(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f}%"


def _gib(mib: float | None) -> str:
    return "-" if mib is None else f"{mib / 1024:.1f}Gi"
