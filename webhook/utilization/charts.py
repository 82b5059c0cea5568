"""Inline SVG charts as strings: no scripts, no fonts, nothing fetched. Every label is escaped."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from html import escape

ROW = 22
LABEL_WIDTH = 260
BAR_WIDTH = 420
RESERVED_COLOR = "#c9d6e8"
USED_COLOR = "#4c78a8"
LINE_COLOR = "#4c78a8"
THRESHOLD_COLOR = "#e45756"


@dataclass(frozen=True)
class UsageBar:
    label: str
    reserved: float
    used: float
    note: str = ""


def usage_bars(chart_id: str, bars: Sequence[UsageBar]) -> str:
    """Per row, a pale bar for GPUs reserved and a dark one for the part actually used."""
    if not bars:
        return "<p>No GPUs reserved.</p>"
    scale = BAR_WIDTH / max(max(b.reserved for b in bars), 1e-9)
    height = ROW * len(bars) + 8
    width = LABEL_WIDTH + BAR_WIDTH + 150
    rows = "".join(_usage_row(index, bar, scale) for index, bar in enumerate(bars))
    return _svg(chart_id, width, height, rows, "GPUs reserved (pale) and used (dark) per namespace")


def _usage_row(index: int, bar: UsageBar, scale: float) -> str:
    y = index * ROW + 4
    text = f"{bar.used:.2f} of {bar.reserved:.2f}" + (f" {bar.note}" if bar.note else "")
    reserved, used = bar.reserved * scale, bar.used * scale
    return (
        f'<text x="{LABEL_WIDTH - 6}" y="{y + 14}" text-anchor="end">{escape(bar.label)}</text>'
        f'<rect x="{LABEL_WIDTH}" y="{y}" width="{reserved:.1f}" height="16" fill="{RESERVED_COLOR}"/>'
        f'<rect x="{LABEL_WIDTH}" y="{y}" width="{used:.1f}" height="16" fill="{USED_COLOR}"/>'
        f'<text x="{LABEL_WIDTH + reserved + 6:.1f}" y="{y + 14}">{escape(text)}</text>'
    )


def line_chart(
    chart_id: str, title: str, points: Sequence[tuple[float, float]], threshold: float, ceiling: float = 100.0
) -> str:
    """Utilization (0..ceiling) over time, with a dashed threshold line."""
    width, height, pad = 480, 110, 28
    inner_w, inner_h = width - 2 * pad, height - 2 * pad
    if len(points) < 2:
        return f"<p>{escape(title)}: not enough samples to draw.</p>"
    start, end = points[0][0], points[-1][0]
    span = max(end - start, 1e-9)

    def x(at: float) -> float:
        return pad + (at - start) / span * inner_w

    def y(value: float) -> float:
        return pad + inner_h - min(max(value, 0.0), ceiling) / ceiling * inner_h

    path = " ".join(f"{x(at):.1f},{y(v):.1f}" for at, v in points)
    body = (
        f'<text x="{pad}" y="16">{escape(title)}</text>'
        f'<rect x="{pad}" y="{pad}" width="{inner_w}" height="{inner_h}" fill="none" stroke="#ddd"/>'
        f'<line x1="{pad}" x2="{pad + inner_w}" y1="{y(threshold):.1f}" y2="{y(threshold):.1f}" '
        f'stroke="{THRESHOLD_COLOR}" stroke-dasharray="4 3"/>'
        f'<polyline points="{path}" fill="none" stroke="{LINE_COLOR}" stroke-width="1.5"/>'
        f'<text x="{pad - 4}" y="{pad + 4}" text-anchor="end">{ceiling:g}</text>'
        f'<text x="{pad - 4}" y="{pad + inner_h}" text-anchor="end">0</text>'
    )
    return _svg(chart_id, width, height, body, title)


def _svg(chart_id: str, width: float, height: float, body: str, title: str) -> str:
    return (
        f'<svg class="chart" id="{escape(chart_id)}" role="img" '
        f'width="{width}" height="{height}" viewBox="0 0 {width} {height}">'
        f"<title>{escape(title)}</title>{body}</svg>"
    )
