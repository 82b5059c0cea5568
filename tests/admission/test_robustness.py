"""Slow and many clients, overload and deadlines, client certificates: failure modes the operator chose."""

from __future__ import annotations

import socket
import ssl
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import orjson
import pytest

from tests.conftest import BUNDLED_POLICIES
from tests.support import cli
from tests.support.apiserver import check_reply
from tests.support.patience import PATIENCE
from tests.support.reviews import load_example, make_review
from tests.support.server import ServerProcess, start_server
from tests.support.tlsclient import JSON_HEADERS, SERVICE_NAME, TLSClient, client_context
from webhook import certs
from webhook.budget import APISERVER_DEFAULT_SECONDS, budget_seconds, parse_duration

GPU_POD = load_example("pod-gpu-training.yaml")


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("10s", 10.0),
        ("1m30s", 90.0),
        ("500ms", 0.5),
        ("1.5s", 1.5),
        ("2h", 7200.0),
        ("1ns", 1e-9),
        ("", None),
        ("10", None),
        ("s", None),
        ("10x", None),
        ("-1s", None),
        ("1s junk", None),
    ],
)
def test_go_durations(text: str, seconds: float | None) -> None:
    assert parse_duration(text) == seconds


@pytest.mark.parametrize(
    ("timeout", "budget"),
    [
        (None, APISERVER_DEFAULT_SECONDS - 0.5),
        ("3s", 2.5),
        ("1s", 0.8),
        ("30s", 29.5),
        ("5m", 29.5),
        ("nonsense", 9.5),
    ],
)
def test_budget_leaves_a_margin_before_the_apiserver_gives_up(timeout: str | None, budget: float) -> None:
    assert budget_seconds(timeout) == pytest.approx(budget)


def unreviewed_count(server: ServerProcess, endpoint: str) -> float:
    """Requests the server answered by its failure mode, from its /metrics."""
    text = server.client().request("GET", "/metrics").body.decode()
    series = f'gpu_webhook_admission_requests_total{{decision="unreviewed",endpoint="{endpoint}",policy=""}} '
    return sum(float(line.split()[-1]) for line in text.splitlines() if line.startswith(series))


@pytest.fixture
def patient_server(cert_dir: Path) -> Iterator[ServerProcess]:
    """Waits for a body longer than any client here waits for an answer: a trickler can only be
    answered before a normal request if the server let it hold up the others."""
    body_timeout = f"{2 * PATIENCE:g}"
    args = [
        "--cert-dir",
        str(cert_dir),
        "--policies",
        str(BUNDLED_POLICIES),
        "--body-timeout-seconds",
        body_timeout,
    ]
    server = start_server(args, ca_file=cert_dir / "ca.crt")
    yield server
    server.stop_gracefully()


def _trickle(server: ServerProcess, body: bytes) -> ssl.SSLSocket:
    raw = socket.create_connection(("127.0.0.1", server.port), timeout=PATIENCE)
    sock = client_context(server.ca_file).wrap_socket(raw, server_hostname=SERVICE_NAME)
    sock.sendall(
        b"POST /validate HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        b"Content-Length: %d\r\n\r\n" % len(body) + body[:20]
    )
    return sock


def _answered(sock: ssl.SSLSocket) -> bool:
    sock.setblocking(False)
    try:
        return bool(sock.recv(1))
    except ssl.SSLWantReadError:
        return False
    finally:
        sock.setblocking(True)


def test_trickling_clients_do_not_hold_up_a_normal_request(patient_server: ServerProcess) -> None:
    body = orjson.dumps(make_review(GPU_POD))
    tricklers = [_trickle(patient_server, body) for _ in range(20)]
    try:
        review = make_review(GPU_POD)
        check_reply(review, patient_server.client().post_json("/validate", review), "validate")
        assert not any(_answered(s) for s in tricklers)  # answered while all twenty still dawdle
    finally:
        for sock in tricklers:
            sock.close()


def test_the_body_timeout_ends_a_trickling_client(server: ServerProcess) -> None:
    """With the default --body-timeout-seconds (10): the answer comes when the server gives up."""
    with _trickle(server, orjson.dumps(make_review(GPU_POD))) as trickler:
        assert trickler.recv(64).startswith(b"HTTP/1.1 408")


def test_a_burst_of_two_hundred_connections_is_all_answered(server: ServerProcess) -> None:
    reviews = [make_review(GPU_POD) for _ in range(200)]

    def send(review: dict[str, object]) -> str:
        reply = TLSClient(server.port, server.ca_file).post_json("/validate", review)
        return str(check_reply(review, reply, "validate")["uid"])

    with ThreadPoolExecutor(max_workers=200) as pool:
        answered = list(pool.map(send, reviews))
    assert answered == [r["request"]["uid"] for r in reviews]


@pytest.mark.parametrize(
    ("endpoint", "allowed"), [("validate", False), ("mutate", False), ("validate-advisory", True)]
)
def test_a_spent_budget_is_answered_by_the_failure_mode(
    server: ServerProcess, endpoint: str, allowed: bool
) -> None:
    review = make_review(GPU_POD)
    reply = server.client().request("POST", f"/{endpoint}?timeout=1ns", orjson.dumps(review), JSON_HEADERS)
    response = check_reply(review, reply, "validate" if endpoint != "mutate" else "mutate")
    assert response["allowed"] is allowed
    if not allowed:
        assert response["status"]["code"] == 504 and "ran out of time" in response["status"]["message"]
    label = endpoint.replace("validate-", "")
    assert unreviewed_count(server, label) >= 1  # counted apart from reviewed denials and allows


@pytest.mark.parametrize(("mode", "allowed"), [("closed", False), ("open", True)])
def test_overload_is_answered_at_once_by_the_failure_mode(cert_dir: Path, mode: str, allowed: bool) -> None:
    args = [
        "--cert-dir",
        str(cert_dir),
        "--policies",
        str(BUNDLED_POLICIES),
        "--max-inflight",
        "0",
        "--failure-mode",
        mode,
    ]
    server = start_server(args, ca_file=cert_dir / "ca.crt")
    try:
        review = make_review(GPU_POD)
        response = check_reply(review, server.client().post_json("/validate", review), "validate")
        assert response["allowed"] is allowed
        text = response["warnings"][0] if allowed else response["status"]["message"]
        assert "overloaded" in text
        assert unreviewed_count(server, "validate") == 1
    finally:
        server.stop_gracefully()


def test_client_certificates_are_required_with_client_ca(cert_dir: Path, tmp_path: Path) -> None:
    client_ca = tmp_path / "client-ca"
    certs.generate(client_ca, "apiserver-clients", "kube-system", days=2)
    certs.issue_client(client_ca, tmp_path / "client", "kube-apiserver", days=2)
    args = [
        "--cert-dir",
        str(cert_dir),
        "--policies",
        str(BUNDLED_POLICIES),
        "--client-ca",
        str(client_ca / "ca.crt"),
    ]
    server = start_server(args, ca_file=cert_dir / "ca.crt")
    try:
        anonymous = server.client()
        with pytest.raises((ssl.SSLError, ConnectionError, OSError)):
            anonymous.request("GET", "/healthz")
        trusted = server.client()
        trusted.context.load_cert_chain(
            tmp_path / "client" / "client.crt", tmp_path / "client" / "client.key"
        )
        assert trusted.request("GET", "/healthz").status == 200
        stranger = server.client()
        stranger.context.load_cert_chain(cert_dir / "tls.crt", cert_dir / "tls.key")  # signed by another CA
        with pytest.raises((ssl.SSLError, ConnectionError, OSError)):
            stranger.request("GET", "/healthz")
        # The exec probe the mTLS component installs: passes with a client certificate only.
        probe = ["probe", f"https://127.0.0.1:{server.port}/readyz", "--ca-file", str(cert_dir / "ca.crt")]
        assert cli.gpu_webhook(*probe, "--client-cert-dir", str(tmp_path / "client")).returncode == 0
        refused = cli.gpu_webhook(*probe)
        assert refused.returncode == 1 and "gpu-webhook probe:" in refused.stderr
        assert cli.gpu_webhook(
            "probe", f"https://127.0.0.1:{server.port}/nonexistent", "--ca-file", str(cert_dir / "ca.crt"),
            "--client-cert-dir", str(tmp_path / "client"),
        ).returncode == 1  # fmt: skip
    finally:
        server.stop_gracefully()


SLOW_TEMPLATE = """apiVersion: templates.gatekeeper.sh/v1
kind: ConstraintTemplate
metadata: {name: slowrule}
spec:
  crd: {spec: {names: {kind: SlowRule}}}
  targets:
  - target: admission.k8s.gatekeeper.sh
    code:
    - engine: Rego
      source:
        version: v1
        rego: |
          package slowrule
          import rego.v1
          violation contains {"msg": "took its time"} if { not impossible }
          impossible if {
            some i in numbers.range(1, 1200)
            some j in numbers.range(1, 1200)
            i * j == 0
          }
---
apiVersion: constraints.gatekeeper.sh/v1beta1
kind: SlowRule
metadata: {name: slow}
spec:
  match:
    kinds: [{apiGroups: [""], kinds: [Pod]}]
    namespaces: [slow]
"""


def test_a_slow_policy_is_cut_off_at_the_deadline_and_holds_up_nobody(cert_dir: Path, tmp_path: Path) -> None:
    """A policy that evaluates for seconds: its review is answered by the failure mode when the
    apiserver's ?timeout= budget runs out, and other requests are answered meanwhile."""
    (tmp_path / "slow.yaml").write_text(SLOW_TEMPLATE)
    server = start_server(
        ["--cert-dir", str(cert_dir), "--policies", str(tmp_path)], ca_file=cert_dir / "ca.crt"
    )
    slow_review = make_review({**GPU_POD, "metadata": {**GPU_POD["metadata"], "namespace": "slow"}})
    try:
        with ThreadPoolExecutor(max_workers=1) as pool:
            slow = pool.submit(
                server.client().request,
                "POST",
                "/validate?timeout=1s",
                orjson.dumps(slow_review),
                JSON_HEADERS,
            )
            server.wait_for_log(lambda e: e.get("msg") == "admission" and e.get("code") == 504)
            quick = make_review(GPU_POD)
            check_reply(quick, server.client().post_json("/mutate", quick), "mutate")
            response = check_reply(slow_review, slow.result(timeout=60), "validate")
        assert response["allowed"] is False
        assert response["status"]["code"] == 504 and "ran out of time" in response["status"]["message"]
    finally:
        server.stop_gracefully()
