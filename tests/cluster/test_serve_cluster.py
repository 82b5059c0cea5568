"""A real `gpu-webhook serve` over TLS: readiness with and without a cluster, and startup errors."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.conftest import BUNDLED_POLICIES
from tests.support.fakekube import FakeKube
from tests.support.pods import gpu_pod, namespace
from tests.support.server import ServerProcess, start_server

pytestmark = pytest.mark.slow


def isolated_env(tmp_path: Path, **extra: str) -> dict[str, str]:
    """No kubeconfig anywhere: HOME is empty and KUBECONFIG names nothing."""
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    return {"HOME": str(home), "KUBECONFIG": "", **extra}


def serve(cert_dir: Path, tmp_path: Path, *args: str) -> ServerProcess:
    return start_server(
        ["--cert-dir", str(cert_dir), "--policies", str(BUNDLED_POLICIES), *args],
        ca_file=cert_dir / "ca.crt",
        env=isolated_env(tmp_path),
    )


def readyz(server: ServerProcess) -> tuple[int, dict[str, object]]:
    reply = server.client().request("GET", "/readyz")
    return reply.status, reply.json()


def test_without_a_cluster_it_is_ready_and_says_why(cert_dir: Path, tmp_path: Path) -> None:
    server = serve(cert_dir, tmp_path)
    try:
        status, body = readyz(server)
        assert status == 200
        checks = body["checks"]
        assert isinstance(checks, dict)
        assert str(checks["cluster"]).startswith("no cluster access: running on an empty state")
        warnings = [line for line in server.output().splitlines() if "no cluster access" in line]
        assert len(warnings) == 1
        metrics = server.client().request("GET", "/metrics").body.decode()
        assert "gpu_webhook_cluster_synced 1.0" in metrics
        assert "# TYPE gpu_webhook_quota_used gauge" in metrics
    finally:
        server.stop()


def test_an_inventory_is_the_state(cert_dir: Path, tmp_path: Path) -> None:
    inventory = tmp_path / "inventory.yaml"
    inventory.write_text(yaml.safe_dump_all([namespace("ml-team"), gpu_pod("a", gpus=3)]))
    server = serve(cert_dir, tmp_path, "--inventory", str(inventory))
    try:
        status, body = readyz(server)
        assert status == 200
        checks = body["checks"]
        assert isinstance(checks, dict)
        assert f"inventory {inventory}; 1 GPU pods, 1 namespaces; quota per-replica" == checks["cluster"]
    finally:
        server.stop()


def test_not_ready_until_the_first_sync(cert_dir: Path, tmp_path: Path) -> None:
    fake = FakeKube().start()
    try:
        fake.create("pods", gpu_pod("a", gpus=2))
        kubeconfig = fake.write_kubeconfig(tmp_path / "kubeconfig")
        with fake.lists_held():
            server = serve(cert_dir, tmp_path, "--kubeconfig", str(kubeconfig))
            fake.wait_for_requests(lambda log: any("/api/v1/pods?limit" in line for line in log))
            status, body = readyz(server)
            assert status == 503
            assert "waiting for the first list" in str(body)
        try:
            pending = {"pods", "namespaces"}  # the DRA kinds and nodes log theirs too, in any order
            while pending:
                entry = server.wait_for_log(
                    lambda e: e.get("msg") == "cache synced" and e.get("kind") in pending
                )
                pending.discard(entry["kind"])
            status, body = readyz(server)
            assert status == 200
            checks = body["checks"]
            assert isinstance(checks, dict)
            assert str(checks["cluster"]).startswith(f"cluster (kubeconfig {kubeconfig}); 1 GPU pods")
        finally:
            server.stop()
    finally:
        fake.stop()


@pytest.mark.parametrize(
    ("flag", "value", "reason"),
    [
        ("--quota-consistency", "strict", "strict needs cluster access"),
        ("--emit-denial-events", "true", "--emit-denial-events needs a cluster"),
    ],
)
def test_cluster_only_settings_without_a_cluster_are_clear_startup_errors(
    cert_dir: Path, tmp_path: Path, flag: str, value: str, reason: str
) -> None:
    command = [sys.executable, "-m", "webhook", "serve", "--cert-dir", str(cert_dir), "--port", "0"]
    result = subprocess.run(
        [*command, "--policies", str(BUNDLED_POLICIES), flag, value],
        capture_output=True,
        text=True,
        env={**os.environ, **isolated_env(tmp_path)},
        timeout=60,
        check=False,
    )
    assert result.returncode != 0
    assert reason in result.stdout + result.stderr
