"""Hot reload: valid sets swap in atomically, broken sets leave the last good one in force."""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path

import pytest

from tests.support.apiserver import check_reply
from tests.support.reviews import make_review
from tests.support.server import ServerProcess, start_server
from webhook.errors import PolicyError
from webhook.metrics import Metrics
from webhook.policy.sources import PolicySources
from webhook.policy.store import PolicyStore
from webhook.policy.watch import PolicyWatcher

POLICY = """apiVersion: gpuwebhook.io/v1alpha1
kind: GPUSharingPolicy
metadata: {{name: shared}}
spec:
  match: {{namespaces: [team]}}
  sharing: {sharing}
"""
MIG = POLICY.format(sharing="{mode: mig, gpuModel: A100-40GB}")
TIMESLICE = POLICY.format(sharing="{mode: timeslice}")
BROKEN = "apiVersion: gpuwebhook.io/v1alpha1\nkind: GPUSharingPolicy\nmetadata: {name: x\n"


def _store(directory: Path) -> tuple[PolicyStore, Metrics]:
    metrics = Metrics()
    store = PolicyStore(PolicySources((directory,), bundle=False), metrics)
    store.load()
    return store, metrics


def _mode(store: PolicyStore) -> str:
    return store.current.sharing[0].sharing.mode


def test_a_valid_change_is_swapped_in(tmp_path: Path) -> None:
    (tmp_path / "p.yaml").write_text(MIG)
    store, _ = _store(tmp_path)
    watcher = PolicyWatcher(store, interval=60)
    asyncio.run(watcher.start())
    (tmp_path / "p.yaml").write_text(TIMESLICE)
    assert asyncio.run(watcher.check()) is True
    assert _mode(store) == "timeslice"
    assert asyncio.run(watcher.check()) is False  # nothing changed since


def test_a_broken_change_keeps_the_last_good_set(tmp_path: Path) -> None:
    (tmp_path / "p.yaml").write_text(MIG)
    store, metrics = _store(tmp_path)
    watcher = PolicyWatcher(store, interval=60)
    asyncio.run(watcher.start())
    (tmp_path / "broken.yaml").write_text(BROKEN)
    assert asyncio.run(watcher.check()) is False
    assert _mode(store) == "mig"
    assert store.last_error is not None and "broken.yaml" in store.last_error
    assert metrics.policy_load_errors._value.get() == 1


def test_the_first_load_must_succeed(tmp_path: Path) -> None:
    (tmp_path / "broken.yaml").write_text(BROKEN)
    with pytest.raises(PolicyError):
        _store(tmp_path)


def _configmap_version(root: Path, version: str, text: str) -> None:
    """Lay out files the way the kubelet does for a ConfigMap volume, swapping ..data atomically."""
    target = root / f"..{version}"
    target.mkdir()
    (target / "p.yaml").write_text(text)
    link = root / "..data_tmp"
    link.symlink_to(target.name)
    os.replace(link, root / "..data")
    if not (root / "p.yaml").is_symlink():
        (root / "p.yaml").symlink_to("..data/p.yaml")


def test_configmap_symlink_swaps_are_noticed(tmp_path: Path) -> None:
    _configmap_version(tmp_path, "2026_11_29_1", MIG)
    store, _ = _store(tmp_path)
    watcher = PolicyWatcher(store, interval=60)
    asyncio.run(watcher.start())
    _configmap_version(tmp_path, "2026_11_29_2", TIMESLICE)
    assert asyncio.run(watcher.check()) is True
    assert _mode(store) == "timeslice"
    assert store.current.files == (str(tmp_path / "p.yaml"),)


def _resource(server: ServerProcess) -> str:
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "nb", "namespace": "team"},
        "spec": {
            "containers": [{"name": "c", "image": "x", "resources": {"limits": {"nvidia.com/gpu": "1"}}}]
        },
    }
    review = make_review(pod)
    response = check_reply(review, server.client().post_json("/mutate", review), "mutate")
    return str(response["auditAnnotations"]["sharing-mode"])


def _replace(path: Path, text: str) -> None:
    """Write `path` in one step: the server polls every 0.2 s, and must never read half a file."""
    staged = path.parent.parent / f"{path.name}.staged"
    staged.write_text(text)
    os.replace(staged, path)


def _loaded_version(server: ServerProcess) -> str:
    """The version of the set the server loaded at start."""
    entries = (json.loads(line) for line in server.seen if line.startswith("{"))
    return str(next(e["version"] for e in entries if e.get("msg") == "policy set loaded"))


def test_live_server_keeps_enforcing_through_a_broken_file_then_takes_an_edit(
    tmp_path: Path, cert_dir: Path
) -> None:
    policies = tmp_path / "policies"
    policies.mkdir()
    (policies / "p.yaml").write_text(MIG)
    args = ["--cert-dir", str(cert_dir), "--policies", str(policies), "--policy-check-seconds", "0.2"]
    server = start_server(args, ca_file=cert_dir / "ca.crt")
    try:
        first = _loaded_version(server)
        assert _resource(server) == "mig"
        _replace(policies / "broken.yaml", BROKEN)
        rejected = server.wait_for_log(lambda e: e.get("msg") == "policy set rejected")
        assert any("broken.yaml:3: not valid YAML: a '{...}' mapping" in p for p in rejected["problems"])
        assert _resource(server) == "mig"
        ready = server.client().request("GET", "/readyz")
        assert ready.status == 200 and b"last good set in force" in ready.body
        (policies / "broken.yaml").unlink()  # a check may come now, and reload the first set
        _replace(policies / "p.yaml", TIMESLICE)
        server.wait_for_log(lambda e: e.get("msg") == "policy set loaded" and e.get("version") != first)
        assert _resource(server) == "timeslice"
        metrics = server.client().request("GET", "/metrics").body.decode()
        assert "gpu_webhook_policy_load_errors_total 1.0" in metrics
    finally:
        server.stop_gracefully()
