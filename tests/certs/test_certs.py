"""Certificate generation, rotation and inspection, verified with a real TLS handshake."""

from __future__ import annotations

import socket
import ssl
import threading
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives.asymmetric import ec

from tests.support.tlsclient import client_context
from webhook import certs
from webhook.errors import CertError
from webhook.tls import server_context

SERVICE, NAMESPACE = "gpu-webhook", "gpu-system"


@pytest.fixture
def generated(tmp_path: Path) -> Path:
    certs.generate(tmp_path, SERVICE, NAMESPACE, days=30)
    return tmp_path


def _load(path: Path) -> x509.Certificate:
    return x509.load_pem_x509_certificate(path.read_bytes())


def test_writes_the_four_files_with_private_keys_0600(generated: Path) -> None:
    modes = {p.name: p.stat().st_mode & 0o777 for p in generated.iterdir()}
    assert modes == {"ca.crt": 0o644, "ca.key": 0o600, "tls.crt": 0o644, "tls.key": 0o600}


def test_serving_certificate_names_every_service_address(generated: Path) -> None:
    info = certs.cert_info(_load(generated / "tls.crt"))
    assert set(info.dns_names) == {
        "gpu-webhook",
        "gpu-webhook.gpu-system",
        "gpu-webhook.gpu-system.svc",
        "gpu-webhook.gpu-system.svc.cluster.local",
        "localhost",
    }
    assert "127.0.0.1" in info.ip_addresses
    assert info.issuer == certs.cert_info(_load(generated / "ca.crt")).subject


def test_keys_are_ecdsa_p256(generated: Path) -> None:
    for name in ("ca.crt", "tls.crt"):
        key = _load(generated / name).public_key()
        assert isinstance(key, ec.EllipticCurvePublicKey) and key.curve.name == "secp256r1"


@pytest.mark.parametrize("days", [1, 90])
def test_days_sets_the_serving_lifetime(tmp_path: Path, days: int) -> None:
    certs.generate(tmp_path, SERVICE, NAMESPACE, days=days)
    info = certs.cert_info(_load(tmp_path / "tls.crt"))
    assert (info.not_after - info.not_before).days == days  # plus five minutes of allowed skew


def test_refuses_to_replace_a_ca_without_force(generated: Path) -> None:
    before = (generated / "ca.crt").read_bytes()
    with pytest.raises(CertError, match="--force"):
        certs.generate(generated, SERVICE, NAMESPACE, days=30)
    assert (generated / "ca.crt").read_bytes() == before
    certs.generate(generated, SERVICE, NAMESPACE, days=30, force=True)
    assert (generated / "ca.crt").read_bytes() != before


def test_rotate_keeps_the_ca_and_the_names(generated: Path) -> None:
    ca_before = (generated / "ca.crt").read_bytes()
    old = _load(generated / "tls.crt")
    certs.rotate(generated, days=10)
    new = _load(generated / "tls.crt")
    assert (generated / "ca.crt").read_bytes() == ca_before
    assert new.serial_number != old.serial_number
    assert certs.cert_info(new).dns_names == certs.cert_info(old).dns_names
    assert (generated / "tls.key").stat().st_mode & 0o777 == 0o600


def test_rotate_without_a_ca_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(CertError, match="cannot read"):
        certs.rotate(tmp_path, days=10)


def test_ca_bundle_is_the_base64_ca(generated: Path) -> None:
    import base64

    assert base64.b64decode(certs.ca_bundle(generated)) == (generated / "ca.crt").read_bytes()


@pytest.mark.parametrize(
    "name", ["gpu-webhook.gpu-system.svc", "gpu-webhook.gpu-system.svc.cluster.local", "localhost"]
)
def test_a_client_verifies_the_chain_for_each_name(generated: Path, name: str) -> None:
    assert _handshake(generated, name) in {"TLSv1.2", "TLSv1.3"}


def test_a_client_refuses_an_unlisted_name(generated: Path) -> None:
    with pytest.raises(ssl.SSLCertVerificationError):
        _handshake(generated, "evil.example.com")


@pytest.mark.filterwarnings("ignore:ssl.TLSVersion.TLSv1_1 is deprecated:DeprecationWarning")
def test_tls_1_1_is_refused(generated: Path) -> None:
    context = client_context(generated / "ca.crt")
    context.minimum_version = ssl.TLSVersion.MINIMUM_SUPPORTED
    context.maximum_version = ssl.TLSVersion.TLSv1_1
    with pytest.raises(ssl.SSLError):
        _handshake(generated, "localhost", context)


def _handshake(directory: Path, name: str, context: ssl.SSLContext | None = None) -> str:
    server = server_context(directory / "tls.crt", directory / "tls.key")
    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]

    def accept() -> None:
        conn, _ = listener.accept()
        try:
            with server.wrap_socket(conn, server_side=True):
                pass
        except (ssl.SSLError, OSError):
            pass

    thread = threading.Thread(target=accept)
    thread.start()
    try:
        client = context or client_context(directory / "ca.crt")
        with client.wrap_socket(socket.create_connection(("127.0.0.1", port)), server_hostname=name) as tls:
            version = tls.version()
            assert version is not None
            return version
    finally:
        thread.join(timeout=10)
        listener.close()
