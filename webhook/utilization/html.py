"""The report as one self-contained HTML page: inline styles and SVG, and a CSP that forbids fetching."""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from html import escape

from webhook.utilization.advice import fit
from webhook.utilization.charts import UsageBar, line_chart, usage_bars
from webhook.utilization.render import percent, recommendation_yaml
from webhook.utilization.report import Report
from webhook.utilization.timeline import Points

CSP = "default-src 'none'; style-src 'unsafe-inline'; img-src data:"
STYLE = """
body{font:14px system-ui,sans-serif;margin:24px;color:#222;max-width:1100px}
h1{font-size:20px}h2{font-size:16px;margin-top:28px}
svg.chart text{font:12px system-ui,sans-serif;fill:#333}
table{border-collapse:collapse;width:100%;font-size:12px}
th,td{border-bottom:1px solid #ddd;padding:4px 6px;text-align:left;vertical-align:top}
td.num{text-align:right}.idle{color:#b03a2e;font-weight:600}
pre{background:#f6f8fa;padding:8px;overflow:auto;font-size:12px}
.timelines{display:flex;flex-wrap:wrap;gap:8px}
"""


def render(report: Report, timelines: Mapping[str, Points] | None = None) -> str:
    sections = [
        _header(report),
        _section("GPUs reserved and used, per namespace", usage_bars("usage-by-namespace", _bars(report))),
        _timelines(report, timelines or {}),
        _section("Namespaces", _namespace_table(report)),
        _section("Workloads", _workload_table(report)),
        _section("Recommended policies", _policies(report)),
    ]
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f'<meta http-equiv="Content-Security-Policy" content="{CSP}">'
        "<title>gpu-webhook utilization report</title>"
        f"<style>{STYLE}</style></head><body>{''.join(sections)}</body></html>\n"
    )


def _header(report: Report) -> str:
    when = dt.datetime.fromtimestamp(report.generated_at, dt.UTC).strftime("%Y-%m-%d %H:%M UTC")
    idle = ", ".join(report.idle_namespaces) or "none"
    return (
        "<h1>GPU utilization</h1>"
        f"<p>Window {escape(report.window)} ending {when}, from {escape(report.source)}.</p>"
        f"<p><b>{report.gpus_reserved:.2f}</b> GPUs reserved; recommendations free "
        f"<b>{report.gpus_freed:.2f}</b>; {len(report.unallocated)} unallocated now.</p>"
        f'<p>Idle namespaces (mean below {report.thresholds.idle_percent:g}%): <span class="idle">'
        f"{escape(idle)}</span></p>"
    )


def _section(title: str, body: str) -> str:
    return f"<h2>{escape(title)}</h2>{body}"


def _bars(report: Report) -> list[UsageBar]:
    return [
        UsageBar(
            n.namespace,
            n.gpus_reserved,
            n.gpus_reserved * (n.util_mean or 0.0) / 100,
            "IDLE" if n.idle else "",
        )
        for n in report.namespaces
    ]


def _timelines(report: Report, timelines: Mapping[str, Points]) -> str:
    charts = [
        line_chart(
            f"timeline-{index}",
            f"{namespace}: mean utilization %",
            timelines[namespace],
            report.thresholds.idle_percent,
        )
        for index, namespace in enumerate(n.namespace for n in report.namespaces)
        if namespace in timelines
    ]
    if not charts:
        return ""
    return _section("Utilization over the window", f'<div class="timelines">{"".join(charts)}</div>')


def _namespace_table(report: Report) -> str:
    rows = [
        [
            (n.namespace + (" (idle)" if n.idle else ""), "idle" if n.idle else ""),
            (f"{n.gpus_reserved:.2f}", "num"),
            (percent(n.util_mean), "num"),
            (percent(n.util_p95), "num"),
            (_gib(n.memory_peak_mib), "num"),
            (f"{report.freed_in(n.namespace):.2f}", "num"),
        ]
        for n in report.namespaces
    ]
    return _table(["namespace", "GPUs", "mean", "p95", "peak memory", "frees"], rows)


def _workload_table(report: Report) -> str:
    rows = []
    for namespace in report.namespaces:
        for w in namespace.workloads:
            chosen = fit(w, report.thresholds, report.capabilities)
            rows.append(
                [
                    (f"{w.workload.namespace}/{w.workload.describe()}", ""),
                    (w.model_name, ""),
                    (w.current, ""),
                    (w.state, "idle" if w.state == "idle" else ""),
                    (f"{w.gpus_reserved:.2f}", "num"),
                    (percent(w.util_mean), "num"),
                    (percent(w.util_p95), "num"),
                    (_gib(w.memory_peak_mib), "num"),
                    (chosen.describe() if chosen else "-", ""),
                ]
            )
    header = ["workload", "GPU", "now", "state", "GPUs", "mean", "p95", "peak memory", "fits"]
    return _table(header, rows)


def _policies(report: Report) -> str:
    if not report.recommendations:
        return "<p>None: every GPU workload is busy, already shared, or without data.</p>"
    blocks = [f"<pre>{escape(recommendation_yaml(r, report))}</pre>" for r in report.recommendations]
    notes = "".join(f"<li>{escape(n)}</li>" for n in report.notes)
    return "".join(blocks) + (f"<ul>{notes}</ul>" if notes else "")


def _table(header: list[str], rows: list[list[tuple[str, str]]]) -> str:
    head = "".join(f"<th>{escape(h)}</th>" for h in header)
    body = "".join(
        "<tr>" + "".join(f'<td class="{css}">{escape(text)}</td>' for text, css in row) + "</tr>"
        for row in rows
    )
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _gib(mib: float | None) -> str:
    return "-" if mib is None else f"{mib / 1024:.1f} GiB"
