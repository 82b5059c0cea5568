"""The report at any time span: a second, an hour, three days. Buckets adapt so the chart is a
row of columns whose labels never overlap (measured by Chromium when it is installed), GPUs
admitted are shown with or without a quota, and denials are grouped by the rule that denied,
with examples, in the report and in `audit summary`."""

from __future__ import annotations

import datetime as dt
import itertools
import re
import shutil
import subprocess
from fractions import Fraction
from pathlib import Path
from typing import Any

import pytest

from tests.audit.logs import START, denied, request, write_log
from tests.audit.test_report import charts
from tests.support.cli import gpu_webhook
from tests.support.pods import gpu_pod
from webhook.audit.chain import Record
from webhook.audit.record import decision_record
from webhook.audit.report import render, timeline
from webhook.audit.summary import collect
from webhook.decision import Decision

SPANS = {
    "one second": dt.timedelta(seconds=1),
    "one hour": dt.timedelta(hours=1),
    "three days": dt.timedelta(days=3),
}
RECORDS = 240


def _record(index: int, at: dt.datetime) -> Record:
    """Every fourth a privileged pod denied (its message names the pod), the rest GPU pods
    admitted in namespaces without a quota."""
    name = f"trainer-{index}"
    if index % 4 == 0:
        decision: Decision = denied("no-privileged", f"Pod {name}: container <main> is privileged")
        obj: dict[str, Any] = gpu_pod(name, namespace="team-b")
    else:
        # review() hands the record the pod's GPU-equivalents, read once for every rule.
        decision = Decision(allowed=True, gpus=Fraction(2))
        obj = gpu_pod(name, namespace=f"team-{index % 2}", gpus=2)
    namespace = obj["metadata"]["namespace"]
    review = request(f"uid-{index}", namespace=namespace, name=name, obj=obj)
    return decision_record(
        review, decision, endpoint="validate", latency_ms=1.0, now=at, instance="t/1", policy_version="v"
    )


def _log(span: dt.timedelta) -> list[Record]:
    return [_record(i, START + span * i / (RECORDS - 1)) for i in range(RECORDS)]


@pytest.mark.parametrize(("span", "width"), [("one second", 1), ("one hour", 120), ("three days", 7200)])
def test_buckets_adapt_to_the_span(span: str, width: int) -> None:
    found, columns = timeline(collect(_log(SPANS[span])))
    assert found == width
    assert 1 <= len(columns) <= 48
    assert sum(sum(counts.values()) for _, counts in columns) == RECORDS


@pytest.mark.parametrize("span", SPANS)
def test_axis_labels_are_spaced_apart(span: str) -> None:
    page = render(collect(_log(SPANS[span])), sources=[Path("audit.log")])
    chart = charts(page)["decisions-over-time"]
    ticks = [t for t in chart.iter("{http://www.w3.org/2000/svg}text") if "tick" in t.attrib.get("class", "")]
    ticks = ticks or [t for t in chart.iter("text") if "tick" in t.attrib.get("class", "")]
    assert ticks
    xs = [float(t.attrib["x"]) for t in ticks]
    widest = max(len(t.text or "") for t in ticks) * 7
    assert all(b - a >= widest for a, b in itertools.pairwise(xs))


def test_gpus_admitted_are_shown_without_a_quota() -> None:
    stats = collect(_log(SPANS["one hour"]))
    # 180 admitted pods of 2 GPUs: indexes 1, 2, 3 (mod 4) go to team-1, team-0, team-1.
    assert stats.gpus == {"team-0": 120.0, "team-1": 240.0}
    page = render(stats, sources=[Path("audit.log")])
    assert "No data" not in page.split("GPU-equivalents admitted per namespace")[1].split("</section>")[0]


def test_denials_are_grouped_by_rule_with_examples() -> None:
    stats = collect(_log(SPANS["one hour"]))
    assert dict(stats.reasons) == {"no-privileged": RECORDS // 4}
    assert stats.examples["no-privileged"] == [
        "Pod trainer-0: container <main> is privileged",
        "Pod trainer-4: container <main> is privileged",
        "Pod trainer-8: container <main> is privileged",
    ]
    page = render(stats, sources=[Path("audit.log")])
    assert f'<tr data-rule="no-privileged" data-count="{RECORDS // 4}">' in page
    assert "Pod trainer-4: container &lt;main&gt; is privileged" in page


def test_audit_summary_groups_denials_and_counts_gpus(tmp_path: Path) -> None:
    log = tmp_path / "audit.log"
    write_log(log, _log(SPANS["three days"]))
    text = gpu_webhook("audit", "summary", str(log)).stdout
    reasons = text.split("denial reasons by rule, with examples:\n")[1]
    assert reasons.splitlines()[0].split() == [str(RECORDS // 4), "no-privileged"]
    assert "e.g. Pod trainer-0: container <main> is privileged" in reasons
    assert "GPU-equivalents admitted by namespace:" in text and "team-0" in text


# Measured by the browser: the rendered labels' boxes, not our estimate of them.
MEASURE = """<script>
(function(){
  var chart=document.querySelector('svg[data-chart="decisions-over-time"]');
  var boxes=[].map.call(chart.querySelectorAll('text'),function(t){return t.getBBox();});
  var ticks=[].map.call(chart.querySelectorAll('text.tick'),function(t){return t.getBBox();});
  var overlaps=0;
  for(var i=1;i<ticks.length;i++){if(ticks[i].x<ticks[i-1].x+ticks[i-1].width){overlaps++;}}
  var width=chart.viewBox.baseVal.width;
  var outside=boxes.filter(function(b){return b.x<0||b.x+b.width>width;}).length;
  document.body.setAttribute('data-measured',overlaps+' '+outside+' '+ticks.length);
})();
</script></body>"""


@pytest.mark.parametrize("span", SPANS)
def test_chromium_lays_the_chart_out_without_overlaps(tmp_path: Path, span: str) -> None:
    browser = shutil.which("chromium") or shutil.which("chromium-browser")
    if browser is None:
        pytest.skip(
            "chromium is not installed (Debian: apt-get install chromium); label spacing is checked above"
        )
    page = render(collect(_log(SPANS[span])), sources=[Path("audit.log")])
    report = tmp_path / "report.html"
    report.write_text(page.replace("</body>", MEASURE), encoding="utf-8")
    result = subprocess.run(
        [
            browser,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-background-networking",
            "--no-first-run",
            "--disable-component-update",
            "--disable-sync",
            f"--user-data-dir={tmp_path / 'profile'}",
            "--virtual-time-budget=2000",
            "--dump-dom",
            f"file://{report}",
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    measured = re.search(r'data-measured="(\d+) (\d+) (\d+)"', result.stdout)
    assert measured is not None, "the measuring script did not run"
    overlaps, outside, ticks = (int(n) for n in measured.groups())
    assert (overlaps, outside) == (0, 0) and ticks >= 1
