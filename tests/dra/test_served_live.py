"""A real `gpu-webhook serve` against the fake kube-apiserver: `/readyz` and `/mutate` warn of a
rewrite to a resource name no node serves, from the live node watch, and stop once a node does."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import BUNDLED_POLICIES
from tests.dra.test_served import NODE, POD, WARNING
from tests.support.fakekube import FakeKube
from tests.support.reviews import make_review
from tests.support.server import LogEntry, ServerProcess, start_server

pytestmark = pytest.mark.slow
SHARED = "nvidia.com/gpu.shared"
UNSERVED = f"no node and no DeviceClass serves {SHARED}"


@pytest.fixture
def fake() -> Iterator[FakeKube]:
    api = FakeKube().start()
    yield api
    api.stop()


def serve(fake: FakeKube, cert_dir: Path, tmp_path: Path) -> ServerProcess:
    home = tmp_path / "home"
    home.mkdir()
    kubeconfig = fake.write_kubeconfig(tmp_path / "kubeconfig")
    return start_server(
        [
            *("--cert-dir", str(cert_dir), "--policies", str(BUNDLED_POLICIES)),
            *("--kubeconfig", str(kubeconfig)),
        ],
        ca_file=cert_dir / "ca.crt",
        env={"HOME": str(home), "KUBECONFIG": ""},
    )


def logged(server: ServerProcess, predicate: Callable[[LogEntry], bool]) -> None:
    """The server logged it: before start_server returned, or from now on."""
    for line in server.seen:
        try:
            entry = json.loads(line)
        except ValueError:
            continue
        if isinstance(entry, dict) and predicate(entry):
            return
    server.wait_for_log(predicate)


def synced(kind: str) -> Callable[[LogEntry], bool]:
    return lambda e: e.get("msg") == "cache synced" and e.get("kind") == kind


def checks(server: ServerProcess) -> dict[str, Any]:
    reply = server.client().request("GET", "/readyz")
    assert reply.status == 200  # informational: never a reason to stop serving
    found = reply.json()["checks"]
    assert isinstance(found, dict)
    return found


def mutate_warnings(server: ServerProcess) -> list[str]:
    response = server.client().post_json("/mutate", make_review(POD)).json()["response"]
    assert isinstance(response, dict) and response["allowed"] and response["patch"]
    return list(response.get("warnings") or [])


def test_unserved_names_come_and_go_with_the_node_watch(
    fake: FakeKube, cert_dir: Path, tmp_path: Path
) -> None:
    fake.create("nodes", NODE)  # whole GPUs only; the bundled timeslice policy asks for gpu.shared
    server = serve(fake, cert_dir, tmp_path)
    try:
        for kind in ("pods", "namespaces", "nodes"):
            logged(server, synced(kind))
        assert checks(server)["resources"] == UNSERVED
        assert any(WARNING in w for w in mutate_warnings(server))

        fake.update("nodes", {**NODE, "status": {"allocatable": {SHARED: "32"}}})
        server.wait_for_log(
            lambda e: e.get("msg") == "node resource names changed" and SHARED in e.get("added", [])
        )
        assert "resources" not in checks(server)
        assert not any(WARNING in w for w in mutate_warnings(server))
    finally:
        server.stop()


def test_a_refused_node_watch_leaves_the_webhook_ready_without_the_check(
    fake: FakeKube, cert_dir: Path, tmp_path: Path
) -> None:
    fake.forbidden.add("nodes")  # a ClusterRole from before nodes were read
    fake.create("nodes", NODE)
    server = serve(fake, cert_dir, tmp_path)
    try:
        for kind in ("pods", "namespaces"):
            logged(server, synced(kind))
        logged(
            server, lambda e: e.get("msg") == "cluster watch failed; backing off" and e.get("kind") == "nodes"
        )
        found = checks(server)
        assert "resources" not in found  # unknown nodes: nothing is called unserved
        assert "nodes not listed (ClusterError: list nodes: HTTP 403 Forbidden)" in str(found["cluster"])
        assert not any(WARNING in w for w in mutate_warnings(server))
    finally:
        server.stop()
