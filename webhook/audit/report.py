"""`audit report`: one self-contained HTML page with inline SVG charts and a filterable denial table.

Nothing is fetched: styles and the small filter script are inline, and a
Content-Security-Policy forbids any network access from the page.
"""

from __future__ import annotations

import datetime as dt
from collections import Counter
from collections.abc import Sequence
from html import escape
from pathlib import Path

from webhook.audit.charts import hbars, number, stacked_columns
from webhook.audit.output import cell
from webhook.audit.summary import Stats

DECISION_SERIES = (("allowed", "#54a24b"), ("warned", "#eeca3b"), ("denied", "#e45756"))
MAX_COLUMNS = 48
BUCKET_MINUTES = (1, 5, 15, 30, 60, 180, 360, 720, 1440, 10080)
TOP_ROWS = 15
DENIAL_COLUMNS = ("time", "namespace", "name", "kind", "user", "policies", "message")
CSP = "default-src 'none'; style-src 'unsafe-inline'; script-src 'unsafe-inline'; img-src data:"

STYLE = """
body{font:14px system-ui,sans-serif;margin:24px;color:#222}
h1{font-size:20px}h2{font-size:16px;margin-top:28px}
.totals span{display:inline-block;margin-right:18px}
svg.chart text{font:12px system-ui,sans-serif;fill:#333}
svg.chart text.total{font-size:10px;text-anchor:middle}
table{border-collapse:collapse;width:100%;font-size:12px}
th,td{border-bottom:1px solid #ddd;padding:4px 6px;text-align:left;vertical-align:top}
tr.hidden{display:none}
input#filter{width:320px;padding:4px;margin:8px 0}
"""

SCRIPT = """
(function(){
  var input=document.getElementById('filter');
  var rows=document.querySelectorAll('#denials tbody tr');
  var shown=document.getElementById('shown');
  function apply(){
    var words=input.value.toLowerCase().split(/\\s+/).filter(Boolean);var n=0;
    rows.forEach(function(row){
      var text=row.textContent.toLowerCase();
      var hit=words.every(function(w){return text.indexOf(w)>=0;});
      row.classList.toggle('hidden',!hit);if(hit){n++;}
    });
    shown.textContent=String(n);
  }
  var m=/[#&]filter=([^&]*)/.exec(location.hash);
  if(m){input.value=decodeURIComponent(m[1]);}
  input.addEventListener('input',apply);apply();
})();
"""


def render(stats: Stats, *, sources: Sequence[Path], title: str = "gpu-webhook audit report") -> str:
    sections = [
        _header(stats, sources, title),
        _section(
            "Decisions over time", stacked_columns("decisions-over-time", timeline(stats), DECISION_SERIES)
        ),
        _section(
            "Denials by policy", hbars("denials-by-policy", _top(stats.denied_policies), color="#e45756")
        ),
        _section(
            "Denials by namespace",
            hbars("denials-by-namespace", _top(stats.denied_namespaces), color="#e45756"),
        ),
        _section("Sharing-mode mix", hbars("sharing-modes", _top(stats.sharing_modes), color="#72b7b2")),
        _section(
            "GPU-equivalents admitted per namespace",
            hbars("gpus-by-namespace", _gpus(stats), color="#4c78a8"),
        ),
        _denials(stats),
    ]
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f'<meta http-equiv="Content-Security-Policy" content="{CSP}">'
        f"<title>{escape(title)}</title><style>{STYLE}</style></head><body>"
        + "".join(sections)
        + f"<script>{SCRIPT}</script></body></html>\n"
    )


def timeline(stats: Stats) -> list[tuple[str, dict[str, int]]]:
    """Per-minute counts merged into at most MAX_COLUMNS buckets of a round width."""
    minutes: dict[dt.datetime, Counter[str]] = {}
    for key, counts in stats.minutes.items():
        moment = _minute(key)
        if moment is not None:
            minutes[moment] = counts
    if not minutes:
        return []
    first, last = min(minutes), max(minutes)
    span = (last - first).total_seconds() / 60 + 1
    width = next((w for w in BUCKET_MINUTES if span / w <= MAX_COLUMNS), BUCKET_MINUTES[-1])
    buckets: dict[dt.datetime, Counter[str]] = {}
    start = _floor(first, width)
    for index in range(int((last - start).total_seconds() // (60 * width)) + 1):
        buckets[start + dt.timedelta(minutes=width * index)] = Counter()
    for moment, counts in minutes.items():
        buckets[_floor(moment, width)].update(counts)
    label = "%Y-%m-%d %H:%M" if width < 1440 else "%Y-%m-%d"
    return [(moment.strftime(label), dict(counts)) for moment, counts in sorted(buckets.items())]


def _header(stats: Stats, sources: Sequence[Path], title: str) -> str:
    p50, p99 = stats.percentile(50), stats.percentile(99)
    totals = [
        ("records", str(stats.total)),
        *((name, str(stats.decisions.get(name, 0))) for name, _ in DECISION_SERIES),
        ("dry run", str(stats.dry_run)),
        ("p50 latency", "-" if p50 is None else f"{p50:.3f} ms"),
        ("p99 latency", "-" if p99 is None else f"{p99:.3f} ms"),
    ]
    spans = "".join(
        f'<span data-total="{escape(k)}">{escape(k)}: <b>{escape(v)}</b></span>' for k, v in totals
    )
    files = ", ".join(escape(str(p)) for p in sources)
    when = f"{escape(stats.first_time or '-')} to {escape(stats.last_time or '-')}"
    return f'<h1>{escape(title)}</h1><p>{when}; from {files}</p><p class="totals">{spans}</p>'


def _section(heading: str, body: str) -> str:
    return f"<section><h2>{escape(heading)}</h2>{body}</section>"


def _denials(stats: Stats) -> str:
    head = "".join(f"<th>{escape(c)}</th>" for c in DENIAL_COLUMNS)
    rows = []
    for record in reversed(stats.recent_denials):
        cells = "".join(f"<td>{escape(cell(record, c))}</td>" for c in DENIAL_COLUMNS)
        rows.append(f'<tr data-uid="{escape(str(record.get("uid", "")))}">{cells}</tr>')
    count = len(rows)
    return (
        f"<section><h2>Recent denials (newest first, up to {stats.recent_denials.maxlen})</h2>"
        '<input id="filter" type="search" placeholder="filter: namespace, user, policy, words…">'
        f' <span>showing <b id="shown">{count}</b> of {count}</span>'
        f'<table id="denials"><thead><tr>{head}</tr></thead><tbody>{"".join(rows)}</tbody></table></section>'
    )


def _top(counter: Counter[str]) -> list[tuple[str, float]]:
    return [(name, float(count)) for name, count in counter.most_common(TOP_ROWS)]


def _gpus(stats: Stats) -> list[tuple[str, float]]:
    ordered = sorted(stats.gpus.items(), key=lambda item: (-item[1], item[0]))
    return [(ns, float(number(value))) for ns, value in ordered[:TOP_ROWS]]


def _minute(key: str) -> dt.datetime | None:
    try:
        return dt.datetime.strptime(key, "%Y-%m-%dT%H:%M").replace(tzinfo=dt.UTC)
    except ValueError:
        return None


def _floor(moment: dt.datetime, width_minutes: int) -> dt.datetime:
    epoch_minutes = int(moment.timestamp() // 60)
    return dt.datetime.fromtimestamp((epoch_minutes - epoch_minutes % width_minutes) * 60, dt.UTC)
