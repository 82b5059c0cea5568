"""`serve --scan-interval` on an inventory: scan records stream into the decision log, and /metrics
carries the per-policy gauge and the time of the last scan."""

from __future__ import annotations

import re
import time
from pathlib import Path

import orjson
import pytest
import yaml

from tests.conftest import BUNDLED_POLICIES
from tests.support.apiserver import check_reply
from tests.support.cli import gpu_webhook
from tests.support.reviews import make_review
from tests.support.server import start_server
from tests.support.workloads import CANARIES, CASES, ESCAPES, INVENTORY, pod

pytestmark = pytest.mark.slow


def test_a_server_with_a_scan_interval_writes_scan_records_and_gauges(cert_dir: Path, tmp_path: Path) -> None:
    inventory, log = tmp_path / "inventory.yaml", tmp_path / "audit.log"
    inventory.write_text(yaml.safe_dump_all(INVENTORY))
    args = [
        *("--cert-dir", str(cert_dir), "--policies", str(BUNDLED_POLICIES / "security")),
        *("--inventory", str(inventory), "--audit-log", str(log)),
    ]
    before = time.time()
    server = start_server(args, ca_file=cert_dir / "ca.crt", env={"GPU_WEBHOOK_SCAN_INTERVAL": "0.5"})
    try:
        # Logged while the app starts, so before start_server() returned: among the lines already seen.
        (started,) = [e for e in map(_entry, server.seen) if e.get("msg") == "background scan on"]
        assert (started["interval_seconds"], started["leader_election"]) == (0.5, False)
        first = server.wait_for_log(lambda e: e.get("msg") == "scan finished")
        assert (first["objects"], first["with_findings"], first["deny"]) == (
            len(CASES),
            len(ESCAPES),
            sum(len(c.policies) for c in ESCAPES),
        )
        review = make_review(pod("admitted-meanwhile", hostPID=True))
        check_reply(review, server.client().post_json("/validate", review), "validate")
        second = server.wait_for_log(lambda e: e.get("msg") == "scan finished")
        assert second["scan"] != first["scan"]
        metrics = server.client().request("GET", "/metrics").body.decode()
        server.stop_gracefully()
    finally:
        server.stop()
    assert 'gpu_webhook_scan_violations{action="deny",policy="gpu-no-host-namespaces"} 2.0' in metrics
    assert 'gpu_webhook_scan_violations{action="deny",policy="gpu-max-per-pod"} 1.0' in metrics
    assert 'gpu_webhook_scan_violations{action="deny",policy="gpu-ignore-label-admins-only"} 0.0' in metrics
    assert f"gpu_webhook_scan_objects {float(len(CASES))}" in metrics
    match = re.search(r"^gpu_webhook_scan_last_completed_timestamp_seconds (\S+)$", metrics, re.M)
    assert match is not None and before < float(match.group(1)) < time.time()

    records = [orjson.loads(line) for line in log.read_text().splitlines()]
    scans = [r for r in records if r["type"] == "scan"]
    summaries = [r for r in scans if r["scope"] == "summary"]
    assert len(summaries) >= 2
    assert {r["scan"] for r in scans} >= {first["scan"], second["scan"]}
    assert sum(r["scan"] == first["scan"] for r in scans) == len(ESCAPES) + 1
    assert [r["type"] for r in records].count("decision") == 1  # both kinds share one chain
    text = log.read_text()
    assert not any(canary in text for canary in CANARIES)
    verified = gpu_webhook("audit", "verify", str(log), "--from-start")
    assert verified.returncode == 0, verified.stdout + verified.stderr


def _entry(line: str) -> dict[str, object]:
    try:
        entry = orjson.loads(line)
    except orjson.JSONDecodeError:
        return {}
    return entry if isinstance(entry, dict) else {}


def test_the_scan_is_off_by_default(cert_dir: Path, tmp_path: Path) -> None:
    log = tmp_path / "audit.log"
    args = [
        "--cert-dir",
        str(cert_dir),
        "--policies",
        str(BUNDLED_POLICIES / "security"),
        "--audit-log",
        str(log),
    ]
    server = start_server(args, ca_file=cert_dir / "ca.crt")
    try:
        metrics = server.client().request("GET", "/metrics").body.decode()
        server.stop_gracefully()
    finally:
        server.stop()
    assert "gpu_webhook_scan" not in metrics
    assert "background scan on" not in server.output()
