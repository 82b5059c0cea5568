"""Rotated certificate files are served to new connections without a restart."""

from __future__ import annotations

import ssl
from pathlib import Path
from typing import cast

import pytest

from tests.conftest import BUNDLED_POLICIES
from tests.support.server import start_server
from webhook import certs
from webhook.tls import ReloadingContext


class FakeClock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def own_certs(tmp_path: Path) -> Path:
    certs.generate(tmp_path / "tls", "gpu-webhook", "gpu-system", days=30)
    return tmp_path / "tls"


def test_live_server_serves_the_rotated_certificate(own_certs: Path) -> None:
    server = start_server(
        [
            "--cert-dir",
            str(own_certs),
            "--policies",
            str(BUNDLED_POLICIES),
            "--cert-check-seconds",
            "0",
        ],
        ca_file=own_certs / "ca.crt",
    )
    try:
        client = server.client()
        before = client.peer_certificate()
        certs.rotate(own_certs, days=5)
        after = client.peer_certificate()  # the next handshake checks the files first
        assert after != before
        assert after == _der(own_certs / "tls.crt")
        server.wait_for_log(lambda e: e.get("msg") == "serving certificate reloaded")
        assert client.request("GET", "/healthz").status == 200
    finally:
        server.stop()


def test_garbage_files_keep_the_previous_certificate(own_certs: Path) -> None:
    server = start_server(
        [
            "--cert-dir",
            str(own_certs),
            "--policies",
            str(BUNDLED_POLICIES),
            "--cert-check-seconds",
            "0",
        ],
        ca_file=own_certs / "ca.crt",
    )
    try:
        client = server.client()
        before = client.peer_certificate()
        (own_certs / "tls.crt").write_text("not a certificate")
        assert client.peer_certificate() == before
        server.wait_for_log(lambda e: e.get("msg") == "certificate reload failed; keeping the previous one")
        certs.rotate(own_certs, days=5, service="gpu-webhook", namespace="gpu-system")
        assert client.peer_certificate() == _der(own_certs / "tls.crt")
    finally:
        server.stop()


def test_files_are_checked_at_most_once_per_interval(own_certs: Path) -> None:
    clock = FakeClock()
    reloading = ReloadingContext(own_certs, check_seconds=2.0, clock=clock)
    original = reloading._current
    certs.rotate(own_certs, days=5)
    reloading._on_handshake(cast(ssl.SSLObject, _Conn()), None, reloading.context)
    assert reloading._current is original  # inside the interval: no file access
    clock.now = 2.5
    connection = _Conn()
    reloading._on_handshake(cast(ssl.SSLObject, connection), None, reloading.context)
    assert reloading._current is not original
    assert connection.context is reloading._current


def test_refresh_reports_whether_anything_changed(own_certs: Path) -> None:
    reloading = ReloadingContext(own_certs)
    assert reloading.refresh() is False
    certs.rotate(own_certs, days=5)
    assert reloading.refresh() is True
    assert reloading.refresh() is False


class _Conn:
    context: object = None


def _der(path: Path) -> bytes:
    from cryptography import x509
    from cryptography.hazmat.primitives.serialization import Encoding

    return x509.load_pem_x509_certificate(path.read_bytes()).public_bytes(Encoding.DER)
