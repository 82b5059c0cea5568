"""The live server over TLS: contract, bad input, and health, as kube-apiserver would see them."""

from __future__ import annotations

import socket
import ssl
from typing import Any

import orjson
import pytest

from tests.support.apiserver import apply_patch, check_reply
from tests.support.patience import PATIENCE
from tests.support.reviews import load_example, make_review
from tests.support.server import ServerProcess
from tests.support.tlsclient import JSON_HEADERS, SERVICE_NAME

MiB = 1024 * 1024


@pytest.mark.parametrize("endpoint", ["mutate", "validate"])
@pytest.mark.parametrize("example", ["pod-gpu-training.yaml", "pod-cpu.yaml"])
def test_pods_get_a_well_formed_decision(server: ServerProcess, example: str, endpoint: str) -> None:
    review = make_review(load_example(example))
    reply = server.client().post_json(f"/{endpoint}", review)
    response = check_reply(review, reply, endpoint)
    assert response["allowed"] is True


def test_dry_run_is_answered_like_any_request(server: ServerProcess) -> None:
    review = make_review(load_example("pod-gpu-training.yaml"), dry_run=True)
    check_reply(review, server.client().post_json("/validate", review), "validate")


def test_sample_review_from_the_readme(server: ServerProcess) -> None:
    """What the README promises for its curl line: the MIG example policy turns the GPU into a slice."""
    review = load_example("review-gpu-pod.json")
    response = check_reply(review, server.client().post_json("/mutate", review), "mutate")
    admitted = apply_patch(review["request"]["object"], response)
    trainer = next(c for c in admitted["spec"]["containers"] if c["name"] == "trainer")
    assert trainer["resources"]["limits"]["nvidia.com/mig-1g.20gb"] == "1"
    assert "nvidia.com/gpu" not in trainer["resources"]["limits"]
    toleration = {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}
    assert toleration in admitted["spec"]["tolerations"]


def _deep(depth: int) -> bytes:
    return b'{"a":' * depth + b"1" + b"}" * depth


BAD_REQUESTS: list[tuple[str, str, str, bytes, dict[str, str], int]] = [
    ("malformed json", "POST", "/mutate", b"{not json", JSON_HEADERS, 400),
    ("empty body", "POST", "/validate", b"", JSON_HEADERS, 400),
    (
        "missing request",
        "POST",
        "/mutate",
        b'{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview"}',
        JSON_HEADERS,
        400,
    ),
    (
        "unknown apiVersion",
        "POST",
        "/validate",
        orjson.dumps({**make_review(load_example("pod-cpu.yaml")), "apiVersion": "admission.k8s.io/v1beta1"}),
        JSON_HEADERS,
        400,
    ),
    (
        "uid is a number",
        "POST",
        "/mutate",
        orjson.dumps(
            {
                "apiVersion": "admission.k8s.io/v1",
                "kind": "AdmissionReview",
                "request": {
                    "uid": 1,
                    "kind": {"group": "", "version": "v1", "kind": "Pod"},
                    "operation": "CREATE",
                    "object": {},
                },
            }
        ),
        JSON_HEADERS,
        400,
    ),
    ("deep nesting", "POST", "/mutate", _deep(100_000), JSON_HEADERS, 400),
    ("text/plain", "POST", "/mutate", b"{}", {"Content-Type": "text/plain"}, 415),
    ("no content type", "POST", "/validate", b"{}", {}, 415),
    ("GET on mutate", "GET", "/mutate", b"", {}, 405),
    ("PUT on validate", "PUT", "/validate", b"{}", JSON_HEADERS, 405),
    ("POST on healthz", "POST", "/healthz", b"{}", JSON_HEADERS, 405),
    ("unknown path", "GET", "/admin", b"", {}, 404),
    ("too large", "POST", "/mutate", b" " * (3 * MiB + 1), JSON_HEADERS, 413),
]


@pytest.mark.parametrize(
    ("method", "path", "body", "headers", "status"),
    [c[1:] for c in BAD_REQUESTS],
    ids=[c[0] for c in BAD_REQUESTS],
)
def test_bad_requests_get_a_one_line_json_error(
    server: ServerProcess, method: str, path: str, body: bytes, headers: dict[str, str], status: int
) -> None:
    reply = server.client().request(method, path, body or None, headers)
    assert reply.status == status
    assert reply.headers["content-type"].startswith("application/json")
    assert b"\n" not in reply.body
    error = reply.json()["error"]
    assert isinstance(error, str) and error
    assert server.client().request("GET", "/healthz").status == 200


def _raw_tls(server: ServerProcess) -> ssl.SSLSocket:
    raw = socket.create_connection(("127.0.0.1", server.port), timeout=PATIENCE)
    return server.client().context.wrap_socket(raw, server_hostname=SERVICE_NAME)


def _read_status(sock: ssl.SSLSocket) -> int:
    head = b""
    while b"\r\n" not in head:
        chunk = sock.recv(4096)
        assert chunk, "connection closed before a status line"
        head += chunk
    return int(head.split(b" ", 2)[1])


def test_oversized_body_is_refused_before_it_is_sent(server: ServerProcess) -> None:
    with _raw_tls(server) as sock:
        sock.sendall(
            b"POST /mutate HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            b"Content-Length: 104857600\r\n\r\n{"
        )
        assert _read_status(sock) == 413  # answered although 100 MiB were announced and 1 byte sent


def test_oversized_chunked_body_is_cut_off(server: ServerProcess) -> None:
    chunk = b" " * MiB
    with _raw_tls(server) as sock:
        sock.sendall(
            b"POST /validate HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            b"Transfer-Encoding: chunked\r\n\r\n"
        )
        for _ in range(4):
            sock.sendall(b"%x\r\n%s\r\n" % (len(chunk), chunk))
        assert _read_status(sock) == 413


@pytest.mark.parametrize("path", ["/healthz", "/readyz"])
def test_health_endpoints(server: ServerProcess, path: str) -> None:
    reply = server.client().request("GET", path)
    assert reply.status == 200
    body: dict[str, Any] = reply.json()
    assert body.get("status") == "ok" or body.get("ready") is True


def test_metrics_count_requests_by_endpoint_decision_and_policy(server: ServerProcess) -> None:
    client = server.client()
    review = make_review(load_example("pod-cpu.yaml"))
    client.post_json("/validate", review)
    client.request("POST", "/validate", b"{", JSON_HEADERS)
    pod = load_example("pod-gpu-training.yaml")
    pod["metadata"]["name"] = "request-data-never-labels"
    pod["spec"]["containers"][0]["securityContext"] = {"privileged": True}
    privileged = make_review(pod)
    denied = check_reply(privileged, client.post_json("/validate", privileged), "validate")
    # The message quotes the request; the label is only the constraint's name.
    assert not denied["allowed"] and "request-data-never-labels" in denied["status"]["message"]
    text = client.request("GET", "/metrics").body.decode()
    requests = "gpu_webhook_admission_requests_total"
    assert f'{requests}{{decision="allowed",endpoint="validate",policy=""}}' in text
    assert f'{requests}{{decision="rejected",endpoint="validate",policy=""}}' in text
    denials = f'{requests}{{decision="denied",endpoint="validate",policy="gpu-no-privileged-containers"}}'
    assert f"{denials} 1.0" in text
    assert "request-data-never-labels" not in text
    assert "gpu_webhook_admission_duration_seconds_bucket" in text
    assert "gpu_webhook_policy_load_errors_total 0.0" in text
    assert "gpu_webhook_build_info{" in text


def test_a_denial_is_one_json_log_line_without_the_object(server: ServerProcess) -> None:
    """Allowed requests log at debug level (test_no_leaks.py runs a debug server): this one is denied."""
    pod = load_example("pod-gpu-training.yaml")
    pod["metadata"]["name"] = 'evil"\n{"level":"forged"}'
    pod["spec"]["containers"][0]["securityContext"] = {"privileged": True}
    review = make_review(pod)
    server.client().post_json("/validate", review)
    entry = server.wait_for_log(lambda e: e.get("uid") == review["request"]["uid"])
    assert entry["msg"] == "admission" and entry["decision"] == "denied" and entry["level"] == "info"
    assert entry["object_name"] == pod["metadata"]["name"]
    assert "registry.example.com" not in orjson.dumps(entry).decode()
