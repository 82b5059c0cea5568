"""Starting with no flags, and stopping without dropping requests in flight."""

from __future__ import annotations

import shutil
import signal
import socket
import ssl
from pathlib import Path

import orjson

from tests.conftest import BUNDLED_POLICIES
from tests.support.apiserver import check_reply
from tests.support.patience import PATIENCE
from tests.support.reviews import load_example, make_review
from tests.support.server import start_server
from tests.support.tlsclient import SERVICE_NAME, TLSClient, client_context


def test_no_flags_runs_the_dev_setup(tmp_path: Path) -> None:
    shutil.copytree(BUNDLED_POLICIES, tmp_path / "policies")
    ca_file = tmp_path / "certs/dev/ca.crt"
    server = start_server([], ca_file=ca_file, cwd=tmp_path, env={"GPU_WEBHOOK_PORT": "0"})
    try:
        assert (tmp_path / "certs/dev/tls.key").stat().st_mode & 0o777 == 0o600
        review = make_review(load_example("pod-gpu-training.yaml"))
        check_reply(review, server.client().post_json("/mutate", review), "mutate")
        assert (
            TLSClient(server.port, ca_file, server_name="localhost").request("GET", "/healthz").status == 200
        )
    finally:
        server.stop_gracefully()


def test_sigterm_drains_a_request_in_flight(cert_dir: Path) -> None:
    args = [
        "--cert-dir",
        str(cert_dir),
        "--policies",
        str(BUNDLED_POLICIES),
        "--log-level",
        "debug",
        "--body-timeout-seconds",  # the body is split around a signal: a busy machine may dawdle
        f"{PATIENCE:g}",
    ]
    server = start_server(args, ca_file=cert_dir / "ca.crt")
    review = make_review(load_example("pod-cpu.yaml"))
    body = orjson.dumps(review)
    raw = socket.create_connection(("127.0.0.1", server.port), timeout=PATIENCE)
    with client_context(cert_dir / "ca.crt").wrap_socket(raw, server_hostname=SERVICE_NAME) as sock:
        sock.sendall(
            b"POST /validate HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            b"Content-Length: %d\r\n\r\n" % len(body) + body[:10]
        )
        server.wait_for_log(lambda e: e.get("msg") == "request received")
        server.process.send_signal(signal.SIGTERM)
        server.wait_for_log(lambda e: e.get("msg") == "Shutting down")
        sock.sendall(body[10:])
        reply = _read_http_reply(sock)
    assert reply.startswith(b"HTTP/1.1 200")
    response = orjson.loads(reply.split(b"\r\n\r\n", 1)[1])
    assert response["response"]["uid"] == review["request"]["uid"]
    server.wait_for_log(lambda e: e.get("msg", "").startswith("Finished server process"))
    assert server.process.wait(timeout=PATIENCE) in (0, -signal.SIGTERM)


def _read_http_reply(sock: ssl.SSLSocket) -> bytes:
    data = b""
    while True:
        chunk = sock.recv(65536)
        if not chunk:
            return data
        data += chunk
        head, _, body = data.partition(b"\r\n\r\n")
        for line in head.split(b"\r\n"):
            if line.lower().startswith(b"content-length:") and len(body) >= int(line.split(b":")[1]):
                return data
