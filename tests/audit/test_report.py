"""The HTML report: self-contained, charts carrying the right numbers, rendered by headless Chromium."""

from __future__ import annotations

import re
import shutil
import subprocess
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from tests.audit.logs import denied, entry
from tests.audit.sample import sample
from webhook.audit.report import render
from webhook.audit.summary import collect

HOSTILE = "<script>alert(1)</script>"


@pytest.fixture(scope="module")
def page() -> str:
    records = [*sample(), entry("hostile-0", denied("no-privileged", HOSTILE), minute=43, namespace="team-b")]
    return render(collect(records), sources=[Path("audit.log")])


def charts(html: str) -> dict[str, ET.Element]:
    found = {}
    for svg in re.findall(r"<svg .*?</svg>", html, flags=re.S):
        element = ET.fromstring(svg)  # noqa: S314 - our own output, not untrusted input
        found[element.attrib["data-chart"]] = element
    return found


def bars(chart: ET.Element) -> dict[str, str]:
    """Bar label -> the number written next to the bar (what a reader sees)."""
    result = {}
    for bar in chart.iter("g"):
        if bar.attrib.get("class") == "bar":
            shown = [t.text for t in bar.iter("text") if t.attrib.get("class") == "value"]
            assert shown == [bar.attrib["data-value"]]
            result[bar.attrib["data-label"]] = bar.attrib["data-value"]
    return result


def test_bar_charts_show_the_right_numbers(page: str) -> None:
    found = charts(page)
    assert bars(found["denials-by-policy"]) == {"no-privileged": "4", "gpu-quota": "1"}
    assert bars(found["denials-by-namespace"]) == {"team-b": "5"}
    assert bars(found["sharing-modes"]) == {"mig": "2", "timeslice": "1"}
    assert bars(found["gpus-by-namespace"]) == {"team-c": "2", "team-a": "0.5"}


def test_decisions_over_time_adds_up(page: str) -> None:
    columns = [g for g in charts(page)["decisions-over-time"].iter("g") if g.attrib.get("class") == "column"]
    assert 1 < len(columns) <= 48
    totals = {s: sum(int(c.attrib[f"data-{s}"]) for c in columns) for s in ("allowed", "warned", "denied")}
    assert totals == {"allowed": 12, "warned": 2, "denied": 5}
    by_bucket = {c.attrib["data-bucket"]: c.attrib for c in columns}
    assert by_bucket["2025-03-01 12:10"]["data-denied"] == "1"
    assert by_bucket["2025-03-01 12:00"]["data-allowed"] == "1"


def test_the_denial_table_lists_each_denial_and_escapes_it(page: str) -> None:
    rows = re.findall(r'<tr data-uid="([^"]+)">', page)
    assert rows == ["hostile-0", "quota-0", "priv-2", "priv-1", "priv-0"]
    assert HOSTILE not in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page


def test_the_page_fetches_nothing(page: str) -> None:
    assert "http://" not in page and "https://" not in page
    assert not re.search(r"\b(src|href)=", page)
    assert "default-src 'none'" in page


def test_it_renders_in_headless_chromium(tmp_path: Path, page: str) -> None:
    browser = shutil.which("chromium") or shutil.which("chromium-browser")
    if browser is None:
        pytest.skip(
            "chromium is not installed (Debian: apt-get install chromium); SVG numbers are checked above"
        )
    report = tmp_path / "report.html"
    report.write_text(page, encoding="utf-8")
    result = subprocess.run(
        [
            browser,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--no-first-run",
            f"--user-data-dir={tmp_path / 'profile'}",
            "--virtual-time-budget=2000",
            "--dump-dom",
            f"file://{report}#filter=gpu-quota",
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    dom = result.stdout
    assert len(re.findall(r'<svg class="chart"', dom)) == 5
    assert 'data-label="no-privileged" data-value="4"' in dom
    shown = re.search(r'<b id="shown">(\d+)</b>', dom)
    assert shown is not None and shown.group(1) == "1", "the filter script ran and kept one row"
    assert len(re.findall(r'<tr data-uid="[^"]+" class="hidden">', dom)) == 4
