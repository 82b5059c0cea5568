"""Canaries in every field a secret could sit in never reach logs, the audit log or any response."""

from __future__ import annotations

import base64
from pathlib import Path
from typing import Any

import orjson
import pytest

from tests.conftest import BUNDLED_POLICIES
from tests.support.reviews import make_review
from tests.support.server import ServerProcess, start_server

ENV = "canary-env-7Q2x"
ANNOTATION = "canary-annotation-9Kp1"
SECRET_DATA = "canary-secret-data-4Lm8"
STRING_DATA = "canary-string-data-3Vb6"
CANARIES = (ENV, ANNOTATION, SECRET_DATA, STRING_DATA, base64.b64encode(SECRET_DATA.encode()).decode())


def _pod(namespace: str, limits: dict[str, str], name: str = "leaky") -> dict[str, Any]:
    container = {
        "name": "main",
        "image": "x",
        "env": [{"name": "API_TOKEN", "value": ENV}, {"name": "NVIDIA_VISIBLE_DEVICES", "value": ENV}],
        "envFrom": [{"secretRef": {"name": "creds"}}],
        "resources": {"limits": limits},
    }
    metadata = {
        "name": name,
        "namespace": namespace,
        "annotations": {"team.example.com/token": ANNOTATION, "gpuwebhook.io/gpu-memory": "15Gi"},
    }
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": metadata,
        "spec": {"containers": [container], "initContainers": [{**container, "name": "init"}]},
    }


SECRET = {
    "apiVersion": "v1",
    "kind": "Secret",
    "metadata": {"name": "creds", "namespace": "example-mig", "annotations": {"note": ANNOTATION}},
    "data": {"token": base64.b64encode(SECRET_DATA.encode()).decode()},
    "stringData": {"other": STRING_DATA},
}
OBJECTS = [
    ("mig pod", _pod("example-mig", {"nvidia.com/gpu": "1"})),
    (
        "too large for MIG",
        {
            **_pod("example-mig", {"nvidia.com/gpu": "1"}, "huge"),
            "metadata": {
                "name": "huge",
                "namespace": "example-mig",
                "annotations": {"gpuwebhook.io/gpu-memory": "900Gi", "x/y": ANNOTATION},
            },
        },
    ),
    ("invalid quantity", _pod("example-timeslice", {"nvidia.com/gpu": "0.5"})),
    ("no policy", _pod("elsewhere", {"nvidia.com/gpu": "2"})),
    ("secret", SECRET),
]


def _verbose_server(cert_dir: Path, audit: Path, audit_stdout: bool) -> ServerProcess:
    """The bundle, the audit log and debug logs: every place a value could leak to."""
    args = ["--cert-dir", str(cert_dir), "--policies", str(BUNDLED_POLICIES), "--audit-log", str(audit)]
    args += ["--log-level", "debug", *(["--audit-stdout"] if audit_stdout else [])]
    return start_server(args, ca_file=cert_dir / "ca.crt")


@pytest.mark.parametrize("audit_stdout", [False, True])
def test_canaries_never_leak(cert_dir: Path, tmp_path: Path, audit_stdout: bool) -> None:
    audit = tmp_path / "audit.log"
    server = _verbose_server(cert_dir, audit, audit_stdout)
    bodies: list[bytes] = []
    try:
        client = server.client()
        for _, obj in OBJECTS:
            for operation in ("CREATE", "UPDATE"):
                review = make_review(obj, operation=operation, old=obj if operation == "UPDATE" else None)
                for endpoint in ("/mutate", "/validate", "/validate-advisory"):
                    reply = client.post_json(endpoint, review)
                    assert reply.status == 200
                    bodies.append(reply.body)
    finally:
        server.stop_gracefully()
    logs, recorded = server.output(), audit.read_text()
    assert recorded.count('"uid"') >= len(OBJECTS) * 6  # the decisions really were recorded
    for canary in CANARIES:
        assert canary not in logs, f"{canary} in the server's logs"
        assert canary not in recorded, f"{canary} in the audit log"
        assert not any(canary.encode() in body for body in bodies), f"{canary} in a response"


FORGED = '"}\n{"level": "error", "msg": "forged", "x": "\r\n\u2028\x1b[31m'


def _forged_pod() -> dict[str, Any]:
    pod = _pod(f"ns{FORGED}", {"nvidia.com/gpu": f"1{FORGED}"}, name=f"p{FORGED}")
    pod["metadata"]["annotations"][f"gpuwebhook.io/{FORGED}"] = FORGED
    pod["spec"]["containers"][0]["image"] = FORGED
    return pod


def test_user_strings_cannot_forge_or_break_log_lines(cert_dir: Path, tmp_path: Path) -> None:
    """Names, annotations, images and quantities that carry newlines, JSON and escape codes:
    every line the server writes stays one JSON object, and none of them is the forged one."""
    server = _verbose_server(cert_dir, tmp_path / "audit.log", audit_stdout=True)
    sent = 0
    try:
        client = server.client()
        review = make_review(_forged_pod())
        review["request"]["userInfo"]["username"] = FORGED
        for endpoint in ("/mutate", "/validate", "/validate-advisory"):
            assert client.post_json(endpoint, review).status == 200
            sent += 1
        broken = {**review, "request": {**review["request"], "operation": FORGED}}
        assert client.post_json("/validate", broken).status == 400  # the error names the bad value
    finally:
        server.stop_gracefully()
    lines = [line for line in server.output().split("\n") if line.strip()]  # what log shippers split on
    entries = [orjson.loads(line) for line in lines]  # raises if any line is not JSON
    assert all(isinstance(e, dict) for e in entries)
    assert not any(e.get("msg") == "forged" or e.get("level") == "error" for e in entries)
    assert sum(e.get("msg") == "admission" for e in entries) == sent
