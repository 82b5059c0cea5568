"""`gpu-webhook scan` through its real entry point, on an inventory, with the default security bundle."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import orjson
import pytest
import yaml

from tests.conftest import BUNDLED_POLICIES
from tests.support import cli
from tests.support.workloads import BENIGN, CANARIES, CASES, ESCAPES, INVENTORY, SKIPPED, Case

SECURITY = BUNDLED_POLICIES / "security"
# The documented fields of a scan object record; foreign annotations are never among them.
OBJECT_FIELDS = {
    *("v", "type", "time", "instance", "policyVersion", "seq", "prev", "hash"),
    *("scope", "scan", "kind", "apiVersion", "operation", "namespace", "name", "objectDigest", "owner"),
    *("allowed", "decision", "findings"),
}
FINDINGS = sum(len(c.policies) for c in ESCAPES)


def gpu_webhook(*args: str) -> subprocess.CompletedProcess[str]:
    return cli.gpu_webhook(*args, timeout=120)


def scan(*args: str, policies: Path = SECURITY) -> subprocess.CompletedProcess[str]:
    return gpu_webhook("scan", "--policies", str(policies), *args)


@pytest.fixture(scope="module")
def inventory(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("scan") / "inventory.yaml"
    path.write_text(yaml.safe_dump_all(INVENTORY))
    return path


@pytest.fixture(scope="module")
def report(inventory: Path) -> dict[str, object]:
    result = scan("--inventory", str(inventory), "-o", "json")
    assert result.returncode == 1, result.stderr
    parsed: dict[str, object] = orjson.loads(result.stdout)
    return parsed


def reported(report: dict[str, object]) -> dict[tuple[str, str, str], set[str]]:
    objects = report["objects"]
    assert isinstance(objects, list)
    return {(o["kind"], o["namespace"], o["name"]): {f["policy"] for f in o["findings"]} for o in objects}


@pytest.mark.parametrize("case", ESCAPES, ids=lambda c: "/".join(c.key))
def test_escape_routes_are_reported_by_their_policy(report: dict[str, object], case: Case) -> None:
    assert reported(report).get(case.key) == set(case.policies)


@pytest.mark.parametrize("case", BENIGN, ids=lambda c: "/".join(c.key))
def test_benign_objects_are_not_reported(report: dict[str, object], case: Case) -> None:
    assert case.key not in reported(report)


def test_the_summary_counts_objects_findings_and_skips(report: dict[str, object]) -> None:
    summary = report["summary"]
    assert isinstance(summary, dict)
    assert summary["objects"] == len(CASES)
    assert summary["skipped"] == len(SKIPPED)  # kube-system, and a namespace labelled gpuwebhook.io/ignore
    assert summary["withFindings"] == summary["denied"] == len(ESCAPES)
    assert summary["violations"] == {"deny": FINDINGS, "warn": 0, "dryrun": 0}
    per_policy = {p["policy"]: p["violations"] for p in summary["policies"]}
    assert per_policy["gpu-no-privileged-containers"] == 3
    assert per_policy["gpu-ignore-label-admins-only"] == 0  # clean constraints are listed too


def test_table_output_has_a_row_per_finding_and_a_closing_line(inventory: Path) -> None:
    result = scan("--inventory", str(inventory))
    assert result.returncode == 1
    lines = result.stdout.splitlines()
    assert lines[0].split() == ["KIND", "NAMESPACE", "NAME", "ACTION", "POLICY", "MESSAGE"]
    rows = [line.split()[:5] for line in lines[1 : lines.index("")]]
    assert ["Deployment", "ml", "pinned", "deny", "gpu-no-preset-node-name"] in rows
    assert len(rows) == FINDINGS
    assert lines[-1] == (
        f"scanned {len(CASES)} objects from inventory {inventory}: {len(ESCAPES)} with findings, "
        f"{len(ESCAPES)} denied; violations: {FINDINGS} deny, 0 warn, 0 dryrun; "
        f"{len(SKIPPED)} in excluded or ignored namespaces skipped"
    )


def test_benign_objects_alone_exit_zero(tmp_path: Path) -> None:
    path = tmp_path / "benign.yaml"
    path.write_text(yaml.safe_dump_all([c.obj for c in BENIGN]))
    result = scan("--inventory", str(path))
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.startswith(f"scanned {len(BENIGN)} objects"), result.stdout
    assert "0 with findings" in result.stdout


@pytest.mark.parametrize("action", ["warn", "dryrun"])
def test_findings_that_do_not_deny_are_reported_and_exit_zero(tmp_path: Path, action: str) -> None:
    policies = tmp_path / "policies"
    shutil.copytree(SECURITY, policies)
    constraint = policies / "gpu-privileged" / "constraint.yaml"
    constraint.write_text(
        constraint.read_text().replace("enforcementAction: deny", f"enforcementAction: {action}")
    )
    path = tmp_path / "inventory.yaml"
    path.write_text(yaml.safe_dump_all([c.obj for c in [*BENIGN, ESCAPES[4]]]))  # the privileged pod
    result = scan("--inventory", str(path), "-o", "json", policies=policies)
    assert result.returncode == 0, result.stderr
    (found,) = orjson.loads(result.stdout)["objects"]
    assert found["decision"] == ("warned" if action == "warn" else "allowed")
    assert [(f["policy"], f["action"]) for f in found["findings"]] == [
        ("gpu-no-privileged-containers", action)
    ]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--inventory", "/nonexistent/inventory.yaml"], "cannot read inventory"),
        ([], "nothing to scan"),
        (["--kubeconfig", "/nonexistent/kubeconfig"], "kubeconfig /nonexistent/kubeconfig does not exist"),
    ],
)
def test_nothing_to_scan_is_an_error(args: list[str], message: str) -> None:
    result = scan(*args)
    assert result.returncode == 2
    assert message in result.stderr


def test_scan_records_join_the_audit_chain_and_keep_no_secrets(inventory: Path, tmp_path: Path) -> None:
    log = tmp_path / "audit.log"
    first = scan("--inventory", str(inventory), "--audit-log", str(log))
    second = scan("--inventory", str(inventory), "--audit-log", str(log))
    assert first.returncode == second.returncode == 1
    verified = gpu_webhook("audit", "verify", str(log), "--from-start")
    assert verified.returncode == 0, verified.stdout + verified.stderr
    assert f"OK: {2 * (len(ESCAPES) + 1)} records" in verified.stdout
    text = log.read_text()
    for canary in CANARIES:
        assert canary not in text
        assert canary not in first.stdout + first.stderr
    records = [orjson.loads(line) for line in text.splitlines()]
    assert {r["type"] for r in records} == {"scan"}
    objects = [r for r in records if r["scope"] == "object"]
    summaries = [r for r in records if r["scope"] == "summary"]
    assert len(objects) == 2 * len(ESCAPES) and len(summaries) == 2
    assert len({r["scan"] for r in summaries}) == 2
    for record in objects:
        assert set(record) <= OBJECT_FIELDS, set(record) - OBJECT_FIELDS  # identity and verdict, no content
        assert record["objectDigest"].startswith("sha256:")


def test_scan_records_are_found_by_audit_query(inventory: Path, tmp_path: Path) -> None:
    log = tmp_path / "audit.log"
    scan("--inventory", str(inventory), "--audit-log", str(log))
    query = gpu_webhook(
        "audit",
        "query",
        str(log),
        "--type",
        "scan",
        "--policy",
        "gpu-no-host-name*",
        "--kind",
        "Pod",
        "-o",
        "json",
    )
    assert query.returncode == 0, query.stderr
    found = [(r["name"], r["decision"]) for r in orjson.loads(query.stdout)]
    assert found == [("host-pid", "denied")]
    summary = gpu_webhook("audit", "summary", str(log))
    assert summary.returncode == 0  # decisions only by default: scan records do not count as decisions
