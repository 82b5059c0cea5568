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
# Bucket widths in seconds: the narrowest that keeps a log's span within MAX_COLUMNS columns, so
# a one-second log, an hour and three days all read as a row of columns.
BUCKET_SECONDS: tuple[int, ...] = (
    *(1, 2, 5, 10, 15, 30),
    *(60, 120, 300, 600, 900, 1800),
    *(3600, 7200, 10800, 21600, 43200, 86400, 604800),
)
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
td.count{text-align:right;white-space:nowrap}
ul.examples{margin:0;padding-left:16px}
th,td{border-bottom:1px solid #ddd;padding:4px 6px;text-align:left;vertical-align:top}
tr.hidden{display:none}
input#filter{width:320px;padding:4px;margin:8px 0}
p.verification.failed{background:#fde2e1;border:1px solid #e45756;padding:8px}
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


def render(
    stats: Stats,
    *,
    sources: Sequence[Path],
    title: str = "gpu-webhook audit report",
    verification: str | None = None,
) -> str:
    """`verification` is what reading found (`ok`, `skipped`, `failed at …`): a page may be passed
    on without its command line, so it says itself whether its log verified."""
    width, columns = timeline(stats)
    sections = [
        _header(stats, sources, title),
        _verification(verification),
        _section(
            f"Decisions over time (per {duration(width)})" if columns else "Decisions over time",
            stacked_columns("decisions-over-time", columns, DECISION_SERIES),
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
        _reasons(stats),
        _denials(stats),
    ]
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f'<meta http-equiv="Content-Security-Policy" content="{CSP}">'
        f"<title>{escape(title)}</title><style>{STYLE}</style></head><body>"
        + "".join(sections)
        + f"<script>{SCRIPT}</script></body></html>\n"
    )


def timeline(stats: Stats) -> tuple[int, list[tuple[str, dict[str, int]]]]:
    """(bucket width in seconds, columns): counts merged into at most MAX_COLUMNS buckets of a
    round width, from per-second counts when the log is short enough to have kept them."""
    moments, resolution = _moments(stats)
    if not moments:
        return 0, []
    first, last = min(moments), max(moments)
    span = (last - first).total_seconds() + resolution
    candidates = [w for w in BUCKET_SECONDS if w >= resolution]
    width = next((w for w in candidates if span / w <= MAX_COLUMNS), BUCKET_SECONDS[-1])
    start = _floor(first, width)
    buckets: dict[dt.datetime, Counter[str]] = {}
    for index in range(int((last - start).total_seconds() // width) + 1):
        buckets[start + dt.timedelta(seconds=width * index)] = Counter()
    for moment, counts in moments.items():
        buckets[_floor(moment, width)].update(counts)
    label = "%Y-%m-%d %H:%M:%S" if width < 60 else "%Y-%m-%d %H:%M" if width < 86400 else "%Y-%m-%d"
    return width, [(moment.strftime(label), dict(counts)) for moment, counts in sorted(buckets.items())]


def duration(seconds: int) -> str:
    for unit, size in (("day", 86400), ("hour", 3600), ("minute", 60)):
        if seconds >= size and seconds % size == 0:
            count = seconds // size
            return unit if count == 1 else f"{count} {unit}s"
    return "second" if seconds == 1 else f"{seconds} seconds"


def _moments(stats: Stats) -> tuple[dict[dt.datetime, Counter[str]], int]:
    keyed, fmt, resolution = (
        (stats.seconds, "%Y-%m-%dT%H:%M:%S", 1)
        if stats.seconds is not None
        else (stats.minutes, "%Y-%m-%dT%H:%M", 60)
    )
    moments = {}
    for key, counts in keyed.items():
        moment = _parse(key, fmt)
        if moment is not None:
            moments[moment] = counts
    return moments, resolution


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


def _verification(verification: str | None) -> str:
    if verification is None:
        return ""
    if verification == "ok":
        return '<p class="verification" data-verification="ok">Hash chain verified.</p>'
    if verification == "skipped":
        return '<p class="verification" data-verification="skipped">Not verified (--no-verify).</p>'
    return (
        '<p class="verification failed" data-verification="failed"><b>This log fails verification</b> '
        f"{escape(verification)}: the figures below include records the chain cannot vouch for.</p>"
    )


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


def _reasons(stats: Stats) -> str:
    """Denials grouped by the rule that denied, each with a few of its messages."""
    if not stats.reasons:
        return _section("Denial reasons by rule", '<p class="empty" data-chart="denial-reasons">No data.</p>')
    rows = []
    for rule, count in stats.reasons.most_common(TOP_ROWS):
        examples = "".join(f"<li>{escape(text)}</li>" for text in stats.examples.get(rule, []))
        rows.append(
            f'<tr data-rule="{escape(rule)}" data-count="{count}"><td>{escape(rule)}</td>'
            f'<td class="count">{count}</td><td><ul class="examples">{examples}</ul></td></tr>'
        )
    table = (
        '<table id="reasons"><thead><tr><th>rule</th><th>denials</th><th>for example</th></tr></thead>'
        f"<tbody>{''.join(rows)}</tbody></table>"
    )
    return _section("Denial reasons by rule", table)


def _top(counter: Counter[str]) -> list[tuple[str, float]]:
    return [(name, float(count)) for name, count in counter.most_common(TOP_ROWS)]


def _gpus(stats: Stats) -> list[tuple[str, float]]:
    ordered = sorted(stats.gpus.items(), key=lambda item: (-item[1], item[0]))
    return [(ns, float(number(value))) for ns, value in ordered[:TOP_ROWS]]


def _parse(key: str, fmt: str) -> dt.datetime | None:
    try:
        return dt.datetime.strptime(key, fmt).replace(tzinfo=dt.UTC)
    except ValueError:
        return None


def _floor(moment: dt.datetime, width_seconds: int) -> dt.datetime:
    epoch = int(moment.timestamp())
    return dt.datetime.fromtimestamp(epoch - epoch % width_seconds, dt.UTC)
