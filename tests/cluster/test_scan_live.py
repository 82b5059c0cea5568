"""The scan against a live API (the fake kube-apiserver, the real client): paged lists of every kind,
the CLI, and two servers of which only the Lease holder scans."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import orjson
import pytest

from tests.conftest import BUNDLED_POLICIES
from tests.support.fakekube import FakeKube
from tests.support.server import ServerProcess, start_server
from tests.support.workloads import CANARIES, CASES, ESCAPES, SKIPPED, namespace
from webhook.cluster import Connection, lister
from webhook.leader import LEASE_NAME
from webhook.scan.kinds import BY_KIND
from webhook.scan.sources import from_cluster

SECURITY = BUNDLED_POLICIES / "security"


def load(fake: FakeKube) -> None:
    """Every case (and the skipped objects) as the API holds them, and their namespaces."""
    for name in ("ml", "kube-system", "opted-out"):
        if fake.get("namespaces", "", name) is None:
            fake.create("namespaces", namespace(name))
    for obj in [c.obj for c in CASES] + SKIPPED:
        resource = BY_KIND[(obj["apiVersion"], obj["kind"])].resource
        if resource == "namespaces":
            fake.update(resource, obj)
        else:
            fake.create(resource, obj)


@pytest.fixture
def loaded(fake: FakeKube) -> FakeKube:
    load(fake)
    return fake


def test_every_kind_is_listed_in_pages_and_typed(loaded: FakeKube, connection: Connection) -> None:
    snapshot = from_cluster(lister(connection, page_size=2), "fake")
    listed = [(obj["apiVersion"], obj["kind"], obj["metadata"]["name"]) for obj, _ in snapshot.objects()]
    expected = [
        (c.obj["apiVersion"], c.obj["kind"], c.obj["metadata"]["name"])
        for c in CASES
        if c.obj["kind"] != "Namespace"
    ]
    assert sorted(listed) == sorted(expected + [("v1", "Pod", p["metadata"]["name"]) for p in SKIPPED])
    assert {n["metadata"]["name"] for n in snapshot.namespaces} == {"ml", "kube-system", "opted-out"}
    assert loaded.count(r"^GET /apis/apps/v1/deployments\?.*continue=") >= 1  # 3 Deployments, pages of 2
    for path in ("/api/v1/replicationcontrollers", "/apis/batch/v1/cronjobs", "/apis/apps/v1/daemonsets"):
        assert loaded.count(f"^GET {path}\\?limit=2") == 1


def test_the_cli_scans_a_live_cluster_as_it_scans_an_inventory(loaded: FakeKube, tmp_path: Path) -> None:
    kubeconfig = loaded.write_kubeconfig(tmp_path / "kubeconfig")
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "webhook",
            "scan",
            "--policies",
            str(SECURITY),
            "--kubeconfig",
            str(kubeconfig),
            "-o",
            "json",
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 1, result.stderr
    report = orjson.loads(result.stdout)
    found = {
        (o["kind"], o["namespace"], o["name"]): {f["policy"] for f in o["findings"]}
        for o in report["objects"]
    }
    assert found == {c.key: set(c.policies) for c in ESCAPES}
    assert report["summary"]["source"] == f"cluster (kubeconfig {kubeconfig})"
    assert report["summary"]["skipped"] == len(SKIPPED) + 1  # and the kube-system Namespace itself
    assert not any(canary in result.stdout for canary in CANARIES)


def isolated_env(tmp_path: Path) -> dict[str, str]:
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    return {"HOME": str(home), "KUBECONFIG": ""}


@pytest.fixture
def replicas(loaded: FakeKube, cert_dir: Path, tmp_path: Path) -> Iterator[list[ServerProcess]]:
    kubeconfig = loaded.write_kubeconfig(tmp_path / "kubeconfig")
    started: list[ServerProcess] = []
    try:
        for index in range(2):
            args = [
                *("--cert-dir", str(cert_dir), "--policies", str(SECURITY)),
                *("--kubeconfig", str(kubeconfig), "--namespace", "gpu-system"),
                *("--audit-log", str(tmp_path / f"audit-{index}.log"), "--scan-interval", "3600"),
            ]
            started.append(start_server(args, ca_file=cert_dir / "ca.crt", env=isolated_env(tmp_path)))
        yield started
    finally:
        for server in started:
            server.stop()


@pytest.mark.slow
def test_of_two_replicas_only_the_lease_holder_scans(
    loaded: FakeKube, replicas: list[ServerProcess], tmp_path: Path
) -> None:
    lease_path = "/apis/coordination.k8s.io/v1/namespaces/gpu-system/leases"
    loaded.wait_for_requests(
        lambda log: sum(line.startswith(f"GET {lease_path}/{LEASE_NAME}") for line in log) >= 4
    )
    lease = loaded.get("leases", "gpu-system", LEASE_NAME)
    assert lease is not None
    holder = lease["spec"]["holderIdentity"]
    (leader,) = [s for s in replicas if holder.endswith(f"/{s.process.pid}")]
    (follower,) = [s for s in replicas if s is not leader]
    finished = leader.wait_for_log(lambda e: e.get("msg") == "scan finished", timeout=60)
    assert (finished["objects"], finished["deny"]) == (len(CASES), sum(len(c.policies) for c in ESCAPES))
    assert finished["source"].startswith("cluster (kubeconfig ")
    metrics = {s is leader: s.client().request("GET", "/metrics").body.decode() for s in replicas}
    assert "gpu_webhook_scan_leader 1.0" in metrics[True]
    assert "gpu_webhook_scan_leader 0.0" in metrics[False]
    assert (
        'gpu_webhook_scan_violations{action="deny",policy="gpu-no-privileged-containers"} 3.0'
        in metrics[True]
    )
    assert "gpu_webhook_scan_violations{" not in metrics[False]
    assert "scan finished" not in follower.output()
    logs = {s is leader: (tmp_path / f"audit-{replicas.index(s)}.log").read_text() for s in replicas}
    assert logs[True].count('"type":"scan"') == len(ESCAPES) + 1
    assert '"type":"scan"' not in logs[False]
    assert loaded.conflicts <= 1  # at most the race for the Lease's creation
