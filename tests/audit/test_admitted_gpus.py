"""What summary and report count as GPUs admitted, for every form a record on disk may take.

The server writes a record's `gpus` as a number and a quota's amounts as exact text ("2",
"2/7"); logs written before `gpus` existed carry only the quota's text, and a log edited or
written elsewhere may hold a string where a number belongs. Every one of them counts.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest

from tests.audit.logs import entry, write_log
from tests.support.cli import gpu_webhook
from webhook.audit.chain import Record
from webhook.audit.summary import admitted_gpus

QUOTA = {"quota": "ml", "namespace": "ml-team"}
ADMITTED: list[tuple[str, dict[str, Any], float | None]] = [
    # (case, fields of a /validate Pod CREATE record, GPUs counted)
    ("a number, no quota", {"gpus": 1.0}, 1.0),
    ("an int", {"gpus": 2}, 2.0),
    ("a string, no quota (older or edited logs)", {"gpus": "1"}, 1.0),
    ("an exact fraction as text", {"gpus": "2/7"}, 2 / 7),
    ("a decimal as text", {"gpus": "0.5"}, 0.5),
    ("the quota's exact demand", {"gpus": 2.0, "quota": {**QUOTA, "demand": {"gpus": "2"}}}, 2.0),
    ("the quota's fraction", {"gpus": 0.2857, "quota": {**QUOTA, "demand": {"gpus": "2/7"}}}, 2 / 7),
    ("a quota record without gpus (older logs)", {"quota": {**QUOTA, "demand": {"gpus": "3"}}}, 3.0),
    ("older still: before and after", {"quota": {"before": {"gpus": "1"}, "after": {"gpus": "4"}}}, 3.0),
    ("a quota that could not count the pod", {"gpus": 1.0, "quota": {**QUOTA, "error": "x"}}, 1.0),
    ("a demand that is no amount", {"gpus": 1.0, "quota": {**QUOTA, "demand": {"gpus": "lots"}}}, 1.0),
    ("neither a number nor an amount", {"gpus": "many"}, None),
    ("a bool is not a count", {"gpus": True}, None),
    ("nothing", {}, None),
    ("a dry run is not admitted", {"gpus": 1.0, "dryRun": True}, None),
    ("a denial is not admitted", {"gpus": 1.0, "allowed": False}, None),
    ("mutate does not admit", {"gpus": 1.0, "endpoint": "mutate"}, None),
]


def _record(fields: dict[str, Any]) -> Record:
    return {"type": "decision", "endpoint": "validate", "allowed": True, "dryRun": False, **fields}


@pytest.mark.parametrize(("case", "fields", "expected"), ADMITTED, ids=[a[0] for a in ADMITTED])
def test_every_form_of_a_count_is_read(case: str, fields: dict[str, Any], expected: float | None) -> None:
    found = admitted_gpus(_record(fields))
    assert found == (None if expected is None else pytest.approx(expected)), case


def test_a_log_already_on_disk_with_strings_is_summed_per_namespace(tmp_path: Path) -> None:
    """Records as older servers wrote them: no `gpus`, or `gpus` as text; the quota's amounts as text."""
    old = [
        entry("a", namespace="ml-team"),
        entry("b", namespace="ml-team"),
        entry("c", namespace="free"),
    ]
    old[0]["quota"] = {**QUOTA, "demand": {"gpus": "2"}}
    old[1]["quota"] = {**QUOTA, "demand": {"gpus": "2/7"}}
    old[2]["gpus"] = "1"
    log = tmp_path / "audit.log"
    write_log(log, old)
    result = gpu_webhook("audit", "summary", str(log), "-o", "json")
    assert result.returncode == 0, result.stderr
    assert orjson.loads(result.stdout)["gpusAdmittedByNamespace"] == {"ml-team": 2.2857, "free": 1.0}
