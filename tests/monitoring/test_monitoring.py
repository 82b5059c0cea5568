"""manifests/monitoring: rules that promtool accepts and whose alerts fire when they should,
and a dashboard whose every query parses and names metrics that exist."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.support.prometheus import PROMTOOL

MONITORING = Path(__file__).resolve().parents[2] / "manifests" / "monitoring"
RULE_TESTS = Path(__file__).resolve().parent / "alerts.promtool.yaml"
REQUIRED_ALERTS = {
    "GpuWebhookSlowAdmission",
    "GpuWebhookRejectingRequests",
    "GpuWebhookUnreviewedAnswers",
    "GpuWebhookPolicyLoadFailed",
    "GpuWebhookClusterCacheStale",
    "GpuWebhookAuditUnwritable",
    "GpuNamespaceNearQuota",
    "GpuReservedButIdle",
}
needs_promtool = pytest.mark.skipif(
    PROMTOOL is None,
    reason="promtool is not installed: apt-get install prometheus (Debian), which .ci/run does in CI",
)


def rule_groups() -> dict[str, Any]:
    document = yaml.safe_load((MONITORING / "prometheusrule.yaml").read_text())
    assert (document["apiVersion"], document["kind"]) == ("monitoring.coreos.com/v1", "PrometheusRule")
    spec: dict[str, Any] = document["spec"]
    return spec


def rules() -> list[dict[str, Any]]:
    return [rule for group in rule_groups()["groups"] for rule in group["rules"]]


def dashboard() -> dict[str, Any]:
    found: dict[str, Any] = json.loads((MONITORING / "grafana-dashboard.json").read_text())
    return found


def dashboard_queries() -> list[str]:
    return [t["expr"] for p in dashboard()["panels"] for t in p.get("targets", [])]


def promtool(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    assert PROMTOOL is not None
    return subprocess.run([PROMTOOL, *args], cwd=cwd, capture_output=True, text=True, timeout=60, check=False)


@needs_promtool
def test_promtool_accepts_the_rules(tmp_path: Path) -> None:
    (tmp_path / "rules.yml").write_text(yaml.safe_dump(rule_groups()))
    result = promtool("check", "rules", "rules.yml", cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"SUCCESS: {len(rules())} rules found" in result.stdout


@needs_promtool
def test_alerts_fire_when_they_should_and_only_then(tmp_path: Path) -> None:
    (tmp_path / "rules.yml").write_text(yaml.safe_dump(rule_groups()))
    shutil.copy(RULE_TESTS, tmp_path / "tests.yml")
    result = promtool("test", "rules", "tests.yml", cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr


@needs_promtool
def test_every_dashboard_query_parses(tmp_path: Path) -> None:
    variables = {"$__rate_interval": "5m", "$job": ".*"}
    checks = []
    for index, query in enumerate(dashboard_queries()):
        for name, value in variables.items():
            query = query.replace(name, value)
        checks.append({"record": f"dashboard:query_{index}", "expr": query})
    (tmp_path / "queries.yml").write_text(
        yaml.safe_dump({"groups": [{"name": "dashboard", "rules": checks}]})
    )
    result = promtool("check", "rules", "queries.yml", cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr


def test_the_alerts_the_issue_asks_for_exist_with_a_severity_and_a_summary() -> None:
    alerts = {rule["alert"]: rule for rule in rules() if "alert" in rule}
    assert set(alerts) >= REQUIRED_ALERTS
    for name, rule in alerts.items():
        assert rule["labels"]["severity"] in ("info", "warning", "critical"), name
        assert rule["annotations"]["summary"] and rule["annotations"]["description"], name


def test_the_dashboard_reads_only_recorded_rules_that_exist() -> None:
    """Metrics and labels against a real server's /metrics: test_exported.py."""
    recorded = {rule["record"] for rule in rules() if "record" in rule}
    referenced = {name for text in dashboard_queries() for name in re.findall(r"\bgpu:[a-z0-9_:]+", text)}
    assert referenced and referenced <= recorded


def test_every_alert_has_a_promtool_test_that_makes_it_fire() -> None:
    tests = yaml.safe_load(RULE_TESTS.read_text())["tests"]
    fired = {
        case["alertname"]
        for test in tests
        for case in test.get("alert_rule_test", [])
        if case.get("exp_alerts")
    }
    assert {rule["alert"] for rule in rules() if "alert" in rule} <= fired


def test_the_dashboard_is_well_formed() -> None:
    board = dashboard()
    ids = [panel["id"] for panel in board["panels"]]
    assert len(ids) == len(set(ids))
    assert {v["name"] for v in board["templating"]["list"]} == {"datasource", "job"}
    assert "http" not in json.dumps(board)  # nothing fetched from anywhere but the chosen datasource


def test_kustomization_names_files_that_exist() -> None:
    kustomization = yaml.safe_load((MONITORING / "kustomization.yaml").read_text())
    files = kustomization["resources"] + [
        entry.split("=", 1)[-1]
        for generator in kustomization["configMapGenerator"]
        for entry in generator["files"]
    ]
    assert all((MONITORING / name).is_file() for name in files), files
