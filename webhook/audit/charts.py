"""Inline SVG charts: horizontal bars and stacked columns, with every number written as text.

Plain strings in, one <svg> element out; no scripts, no external resources.
Each mark carries data-* attributes with its exact numbers for tests and tools.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from html import escape

BAR_HEIGHT = 22
LABEL_WIDTH = 180
PLOT_WIDTH = 420
VALUE_WIDTH = 70
COLUMN_AREA_HEIGHT = 180
MIN_COLUMNS_WIDTH = 420
TOTALS_FROM_STEP = 24
CHAR_WIDTH = 7  # about one character of the 12px axis font; labels are spaced by it


def number(value: float) -> str:
    """Integers as integers, other values with at most two decimals."""
    if float(value).is_integer():
        return str(int(value))
    return f"{value:.2f}".rstrip("0").rstrip(".")


def hbars(name: str, rows: Sequence[tuple[str, float]], *, color: str = "#4c78a8", unit: str = "") -> str:
    if not rows:
        return _empty(name)
    top = max(value for _, value in rows) or 1
    height = BAR_HEIGHT * len(rows) + 8
    width = LABEL_WIDTH + PLOT_WIDTH + VALUE_WIDTH
    marks = [_hbar(i, label, value, top, color, unit) for i, (label, value) in enumerate(rows)]
    return _svg(name, width, height, "".join(marks))


def _hbar(index: int, label: str, value: float, top: float, color: str, unit: str) -> str:
    y = 4 + index * BAR_HEIGHT
    length = max(1.0, PLOT_WIDTH * value / top) if value else 0.0
    shown = number(value) + unit
    return (
        f'<g class="bar" data-label="{escape(label)}" data-value="{number(value)}">'
        f"<title>{escape(label)}: {escape(shown)}</title>"
        f'<text x="{LABEL_WIDTH - 6}" y="{y + 15}" text-anchor="end" class="label">'
        f"{escape(_short(label))}</text>"
        f'<rect x="{LABEL_WIDTH}" y="{y + 3}" width="{length:.1f}" height="{BAR_HEIGHT - 6}" fill="{color}"/>'
        f'<text x="{LABEL_WIDTH + length + 6:.1f}" y="{y + 15}" class="value">{escape(shown)}</text>'
        "</g>"
    )


def stacked_columns(
    name: str,
    columns: Sequence[tuple[str, Mapping[str, int]]],
    series: Sequence[tuple[str, str]],
) -> str:
    """One column per time bucket, one stacked segment per series (name, color)."""
    if not columns:
        return _empty(name)
    top = max(sum(counts.values()) for _, counts in columns) or 1
    step = max(8.0, min(40.0, 760 / len(columns)))
    labels = [_tick_text(label, columns[0][0], columns[-1][0]) for label, _ in columns]
    half_label = max(len(t) for t in labels) * CHAR_WIDTH / 2
    left = max(40.0, half_label + 4)  # room for the first label, centred under its column
    width = max(int(left + step * len(columns) + half_label + 4), MIN_COLUMNS_WIDTH)
    height = COLUMN_AREA_HEIGHT + 70
    marks = [
        _column(left + i * step, label, counts, series, top, step)
        for i, (label, counts) in enumerate(columns)
    ]
    legend = _legend(series, height - 14)
    # Wide columns carry their totals; narrow ones get the scale instead, which a total would hit.
    scale = "" if step >= TOTALS_FROM_STEP else f'<text x="2" y="14" class="axis">max {number(top)}</text>'
    axis = scale + _time_axis(labels, step, left)
    return _svg(name, width, height, axis + "".join(marks) + legend)


def _column(
    x: float,
    label: str,
    counts: Mapping[str, int],
    series: Sequence[tuple[str, str]],
    top: int,
    step: float,
) -> str:
    base = float(COLUMN_AREA_HEIGHT + 20)
    data = " ".join(f'data-{escape(s)}="{counts.get(s, 0)}"' for s, _ in series)
    total = sum(counts.get(s, 0) for s, _ in series)
    parts = [f'<g class="column" data-bucket="{escape(label)}" data-total="{total}" {data}>']
    parts.append(
        f"<title>{escape(label)}: " + ", ".join(f"{s} {counts.get(s, 0)}" for s, _ in series) + "</title>"
    )
    for series_name, color in series:
        h = COLUMN_AREA_HEIGHT * counts.get(series_name, 0) / top
        if h:
            base -= h
            parts.append(
                f'<rect x="{x:.1f}" y="{base:.1f}" width="{step * 0.8:.1f}" height="{h:.1f}" '
                f'fill="{color}" class="{escape(series_name)}"/>'
            )
    if step >= TOTALS_FROM_STEP:
        parts.append(f'<text x="{x + step * 0.4:.1f}" y="{base - 3:.1f}" class="total">{total}</text>')
    parts.append("</g>")
    return "".join(parts)


def _time_axis(labels: Sequence[str], step: float, left: float) -> str:
    """A label under every k-th column, k chosen so that no two labels overlap."""
    every = max(1, math.ceil((max(len(t) for t in labels) * CHAR_WIDTH + 12) / step))
    y = COLUMN_AREA_HEIGHT + 34
    return "".join(
        f'<text x="{left + step * (i + 0.4):.1f}" y="{y}" text-anchor="middle" class="axis tick">'
        f"{escape(labels[i])}</text>"
        for i in range(0, len(labels), every)
    )


def _tick_text(label: str, first: str, last: str) -> str:
    """Without the date when the whole chart is within one day (the page header gives it)."""
    day, _, time = label.partition(" ")
    return time if time and first.split(" ")[0] == last.split(" ")[0] == day else label


def _legend(series: Sequence[tuple[str, str]], y: int) -> str:
    items = []
    for i, (series_name, color) in enumerate(series):
        x = 40 + i * 110
        items.append(
            f'<rect x="{x}" y="{y - 10}" width="12" height="12" fill="{color}"/>'
            f'<text x="{x + 16}" y="{y}" class="label">{escape(series_name)}</text>'
        )
    return "".join(items)


def _svg(name: str, width: int, height: int, body: str) -> str:
    return (
        f'<svg class="chart" data-chart="{escape(name)}" role="img" aria-label="{escape(name)}" '
        f'width="{width}" height="{height}" viewBox="0 0 {width} {height}">{body}</svg>'
    )


def _empty(name: str) -> str:
    return f'<p class="empty" data-chart="{escape(name)}">No data.</p>'


def _short(label: str, limit: int = 28) -> str:
    return label if len(label) <= limit else label[: limit - 1] + "…"
