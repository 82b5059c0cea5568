"""`quota status` rows, bars and table, the command itself, and the /metrics gauges."""

from __future__ import annotations

import subprocess
from fractions import Fraction
from pathlib import Path

import orjson
import pytest
import yaml

from tests.support.cli import gpu_webhook
from tests.support.pods import gpu_pod, make_pod, namespace, quota, quota_doc, res
from webhook.clusterstate import ClusterState
from webhook.gauges import register_quota_gauges
from webhook.inventory import cache_from, parse_inventory
from webhook.metrics import Metrics
from webhook.quota.gate import LocalGate
from webhook.quota.status import bar, render_table, status_rows

EXISTING = [
    namespace("ml-team", {"team": "ml"}),
    namespace("team-a"),
    namespace("team-b"),
    *[gpu_pod(f"train-{i}", gpus=1) for i in range(7)],
    gpu_pod("done", gpus=8, phase="Succeeded"),
    make_pod("mig", "team-a", [res("a", {"nvidia.com/mig-1g.10gb": 3})]),
]
QUOTAS = [
    quota("ml-team", {"gpus": 8, "gpuMemory": "320Gi"}, match={"namespaces": ["ml-team"]}),
    quota(
        "teams", {"resources": {"nvidia.com/mig-1g.10gb": 14}}, match={"namespaces": ["team-*", "team-new"]}
    ),
]


def inventory_text() -> str:
    return yaml.safe_dump_all(EXISTING)


def test_rows_cover_every_matching_namespace_and_limit() -> None:
    rows = status_rows(QUOTAS, cache_from(parse_inventory(inventory_text(), "inv")))
    found = {(r.namespace, r.quota, r.resource): (r.used, r.limit) for r in rows}
    assert found == {
        ("ml-team", "ml-team", "gpus"): (Fraction(7), Fraction(8)),
        ("ml-team", "ml-team", "gpuMemory"): (Fraction(0), Fraction(320 * 1024)),
        ("team-a", "teams", "nvidia.com/mig-1g.10gb"): (Fraction(3), Fraction(14)),
        ("team-b", "teams", "nvidia.com/mig-1g.10gb"): (Fraction(0), Fraction(14)),
        ("team-new", "teams", "nvidia.com/mig-1g.10gb"): (Fraction(0), Fraction(14)),  # named, no pods yet
    }


@pytest.mark.parametrize(
    ("fraction", "expected"),
    [
        (Fraction(0), "[--------------------]    0%"),
        (Fraction(7, 8), "[##################--]   88%"),
        (Fraction(1), "[####################]  100%"),
        (Fraction(5, 4), "[####################]! 125%"),
    ],
)
def test_bars(fraction: Fraction, expected: str) -> None:
    assert bar(fraction) == expected


def test_the_table_lines_up() -> None:
    rows = status_rows(QUOTAS[:1], cache_from(parse_inventory(inventory_text(), "inv")))
    assert render_table(rows).splitlines() == [
        "NAMESPACE  QUOTA    RESOURCE   USED  LIMIT",
        "ml-team    ml-team  gpus       7     8      [##################--]   88%",
        "ml-team    ml-team  gpuMemory  0Mi   320Gi  [--------------------]    0%",
    ]


def run_status(tmp_path: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    policies = tmp_path / "policies"
    policies.mkdir(exist_ok=True)
    (policies / "quotas.yaml").write_text(
        yaml.safe_dump_all(
            [
                quota_doc("ml-team", {"gpus": 8, "gpuMemory": "320Gi"}, match={"namespaces": ["ml-team"]}),
                quota_doc(
                    "teams", {"resources": {"nvidia.com/mig-1g.10gb": 14}}, match={"namespaces": ["team-*"]}
                ),
            ]
        )
    )
    inventory = tmp_path / "inventory.yaml"
    inventory.write_text(inventory_text())
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    return gpu_webhook(
        "quota",
        "status",
        "--policies",
        str(policies),
        *extra,
        env={"HOME": str(home), "KUBECONFIG": ""},
        cwd=tmp_path,
    )


def test_quota_status_command_prints_the_table(tmp_path: Path) -> None:
    result = run_status(tmp_path, "--inventory", "inventory.yaml")
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].split() == ["NAMESPACE", "QUOTA", "RESOURCE", "USED", "LIMIT"]
    assert lines[1].split()[:5] == ["ml-team", "ml-team", "gpus", "7", "8"]
    assert "usage from inventory inventory.yaml" in result.stderr


def test_quota_status_as_json(tmp_path: Path) -> None:
    result = run_status(tmp_path, "--inventory", "inventory.yaml", "-o", "json")
    assert result.returncode == 0, result.stderr
    document = orjson.loads(result.stdout)
    assert document["source"] == "inventory inventory.yaml"
    row = next(r for r in document["rows"] if r["namespace"] == "team-a")
    assert (row["used"], row["limit"], row["percent"]) == ("3", "14", 21.4)


def test_quota_status_without_any_cluster_uses_an_empty_state(tmp_path: Path) -> None:
    result = run_status(tmp_path)
    assert result.returncode == 0, result.stderr
    assert "no cluster access" in result.stderr
    assert "ml-team    ml-team  gpus       0     8" in result.stdout


def test_quota_status_reports_bad_policies(tmp_path: Path) -> None:
    (tmp_path / "policies").mkdir()
    (tmp_path / "policies" / "bad.yaml").write_text(yaml.safe_dump(quota_doc("bad", {"gpus": -1})))
    result = run_status(tmp_path)
    assert result.returncode == 2
    assert "spec.limits.gpus: must not be negative" in result.stderr


def test_gauges_export_used_and_limit() -> None:
    cache = cache_from(parse_inventory(inventory_text(), "inv"))
    metrics = Metrics()
    register_quota_gauges(metrics, ClusterState(cache, LocalGate(cache), "inventory"), lambda: QUOTAS)
    text = metrics.render().decode()
    assert 'gpu_webhook_quota_used{namespace="ml-team",quota="ml-team",resource="gpus"} 7.0' in text
    assert (
        'gpu_webhook_quota_limit{namespace="ml-team",quota="ml-team",resource="gpuMemory"} 3.4359738368e+11'
        in text
    )
    assert (
        'gpu_webhook_quota_used{namespace="team-a",quota="teams",resource="nvidia.com/mig-1g.10gb"} 3.0'
        in text
    )
    assert "gpu_webhook_cluster_synced 1.0" in text
