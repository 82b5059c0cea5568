"""`serve --engine opa`: decisions as in-process Rego makes them, and its failure mode when OPA is gone."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import BUNDLED_POLICIES
from tests.support.apiserver import check_reply
from tests.support.cli import gpu_webhook
from tests.support.fakeopa import FakeOpa
from tests.support.patience import PATIENCE
from tests.support.reviews import make_review
from tests.support.server import ServerProcess, start_server

ESCAPE = {
    "apiVersion": "v1",
    "kind": "Pod",
    "metadata": {"name": "escape", "namespace": "ml-team"},
    "spec": {
        "hostPID": True,
        "containers": [
            {
                "name": "main",
                "image": "registry.example.com/x:1",
                "resources": {"limits": {"nvidia.com/gpu": "1"}},
            }
        ],
    },
}
BENIGN = {
    "apiVersion": "v1",
    "kind": "Pod",
    "metadata": {"name": "fine", "namespace": "ml-team"},
    "spec": {
        "containers": [
            {
                "name": "main",
                "image": "registry.example.com/x:1",
                "resources": {"limits": {"nvidia.com/gpu": "1"}},
            }
        ]
    },
}

# Benign too, but a device variable from a ConfigMap is something the bundle's prechecks leave to
# Rego: here, the one KAI's own webhook gives a fractional pod.
KAI_FRACTION: dict[str, Any] = copy.deepcopy(BENIGN)
KAI_FRACTION["metadata"]["name"] = "kai"
KAI_FRACTION["metadata"]["annotations"] = {
    "gpu-fraction": "0.5",
    "runai/shared-gpu-configmap": "kai-bcd2456-shared-gpu",
}
KAI_FRACTION["spec"]["schedulerName"] = "kai-scheduler"
KAI_FRACTION["spec"]["containers"][0] = {
    "name": "main",
    "image": "registry.example.com/x:1",
    "env": [
        {
            "name": "NVIDIA_VISIBLE_DEVICES",
            "valueFrom": {
                "configMapKeyRef": {"name": "kai-bcd2456-shared-gpu-0", "key": "NVIDIA_VISIBLE_DEVICES"}
            },
        }
    ],
}


def _validate(server: ServerProcess, obj: dict[str, Any]) -> dict[str, Any]:
    """Under the largest budget kube-apiserver can give (`timeoutSeconds: 30`): a decision the
    fake OPA is slow to make on a busy machine is still a decision, not "ran out of time"."""
    review = make_review(obj)
    reply = server.client().post_json("/validate?timeout=30s", review)
    return check_reply(review, reply, "validate")


def _opa_serve_args(cert_dir: Path, url: str, *more: str) -> list[str]:
    """`serve` on the bundled policies with the OPA engine at `url`, failing at once (no retries)."""
    return [
        *("--cert-dir", str(cert_dir), "--policies", str(BUNDLED_POLICIES)),
        *("--engine", "opa", "--opa-url", url, "--opa-retries", "0"),
        *more,
    ]


def _serve(cert_dir: Path, opa: FakeOpa, mode: str) -> ServerProcess:
    """No OPA timeout is under test: the start pushes every module to the fake, which compiles the
    whole set on each push, slowly on a busy machine. A stopped OPA refuses at once."""
    timeout = f"{PATIENCE:g}"
    args = _opa_serve_args(cert_dir, opa.url, "--opa-failure-mode", mode, "--opa-timeout", timeout)
    return start_server(args, ca_file=cert_dir / "ca.crt")


@pytest.mark.parametrize(("mode", "allowed_when_down"), [("closed", False), ("open", True)])
def test_opa_engine_decides_like_regopy_then_follows_its_failure_mode(
    cert_dir: Path, server: ServerProcess, mode: str, allowed_when_down: bool
) -> None:
    opa = FakeOpa().start()
    remote = _serve(cert_dir, opa, mode)
    try:
        local = _validate(server, ESCAPE)
        answer = _validate(remote, ESCAPE)
        assert answer["allowed"] is False
        assert answer["status"]["message"] == local["status"]["message"]
        asked = opa.queries
        assert _validate(remote, BENIGN)["allowed"] is True
        assert opa.queries == asked, "a clean pod is settled by the bundle's prechecks, without OPA"
        assert _validate(remote, KAI_FRACTION)["allowed"] is True
        assert opa.queries > asked
        opa.stop()
        assert _validate(remote, BENIGN)["allowed"] is True
        down = _validate(remote, KAI_FRACTION)
        assert down["allowed"] is allowed_when_down
        if not allowed_when_down:
            assert "unreachable" in down["status"]["message"]
    finally:
        remote.stop_gracefully()


def test_an_unreachable_opa_at_start_is_a_clear_error(cert_dir: Path, tmp_path: Path) -> None:
    opa = FakeOpa().start()
    url = opa.url
    opa.stop()
    result = gpu_webhook("serve", *_opa_serve_args(cert_dir, url, "--port", "0"))
    assert result.returncode == 2
    assert "unreachable" in result.stderr and "Traceback" not in result.stderr
