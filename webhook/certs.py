"""Certificates: a CA and a serving certificate for the webhook Service. The only importer of cryptography.

File names follow a Kubernetes TLS Secret and cert-manager: ca.crt, tls.crt, tls.key
(plus ca.key, which only `rotate` needs). Keys are ECDSA P-256, written with mode 0600.
"""

from __future__ import annotations

import base64
import datetime as dt
import ipaddress
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from webhook.errors import CertError

CA_CERT, CA_KEY, TLS_CERT, TLS_KEY = "ca.crt", "ca.key", "tls.crt", "tls.key"
CLIENT_CERT, CLIENT_KEY = "client.crt", "client.key"
CA_DAYS = 3650
LOOPBACK_NAMES = ("localhost",)
LOOPBACK_IPS = ("127.0.0.1", "::1")
_CLOCK_SKEW = dt.timedelta(minutes=5)


@dataclass(frozen=True)
class CertInfo:
    subject: str
    issuer: str
    dns_names: tuple[str, ...]
    ip_addresses: tuple[str, ...]
    not_before: dt.datetime
    not_after: dt.datetime


def service_dns_names(service: str, namespace: str) -> list[str]:
    """Every name kube-apiserver may use to reach a Service, plus loopback for local use."""
    return [
        service,
        f"{service}.{namespace}",
        f"{service}.{namespace}.svc",
        f"{service}.{namespace}.svc.cluster.local",
        *LOOPBACK_NAMES,
    ]


def generate(out: Path, service: str, namespace: str, *, days: int, force: bool = False) -> None:
    """Write a new CA and a serving certificate signed by it."""
    if (out / CA_CERT).exists() and not force:
        raise CertError(
            f"{out / CA_CERT} exists; use `certs rotate --dir {out}` to renew the serving "
            "certificate, or --force to replace the CA (every caBundle must then be updated)"
        )
    out.mkdir(parents=True, exist_ok=True)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_cert = _ca_certificate(ca_key, f"{service}-ca", days=max(days, CA_DAYS))
    _write(out / CA_KEY, _key_pem(ca_key), private=True)
    _write(out / CA_CERT, _cert_pem(ca_cert), private=False)
    _issue_serving(
        out,
        ca_cert,
        ca_key,
        f"{service}.{namespace}.svc",
        service_dns_names(service, namespace),
        days,
    )


def rotate(directory: Path, *, days: int, service: str | None = None, namespace: str | None = None) -> None:
    """Issue a new serving certificate from the existing CA; the caBundle stays valid.

    The names are copied from the current tls.crt unless a service and namespace are given.
    """
    ca_cert, ca_key = _load_ca(directory)
    if service and namespace:
        common_name, names = f"{service}.{namespace}.svc", service_dns_names(service, namespace)
    else:
        common_name, names = _current_names(directory / TLS_CERT)
    _issue_serving(directory, ca_cert, ca_key, common_name, names, days)


def _current_names(path: Path) -> tuple[str, list[str]]:
    try:
        current = _load_cert(path)
    except CertError as e:
        raise CertError(f"{e}; pass --service and --namespace to rotate anyway") from e
    names = list(_dns_names(current))
    if not names:
        raise CertError(f"{path} names no DNS names; pass --service and --namespace")
    return _common_name(current) or names[0], names


def describe(directory: Path) -> dict[str, CertInfo]:
    return {name: cert_info(_load_cert(directory / name)) for name in (CA_CERT, TLS_CERT)}


def ca_bundle(directory: Path) -> str:
    """The base64 PEM that goes into a webhook configuration's clientConfig.caBundle."""
    return base64.b64encode(_read(directory / CA_CERT)).decode("ascii")


def cert_info(cert: x509.Certificate) -> CertInfo:
    return CertInfo(
        subject=cert.subject.rfc4514_string(),
        issuer=cert.issuer.rfc4514_string(),
        dns_names=_dns_names(cert),
        ip_addresses=_ip_addresses(cert),
        not_before=cert.not_valid_before_utc,
        not_after=cert.not_valid_after_utc,
    )


def ensure_dev_certs(directory: Path, service: str, namespace: str) -> bool:
    """Generate a development CA and certificate when none exist; True if it did."""
    if (directory / TLS_CERT).exists() and (directory / TLS_KEY).exists():
        return False
    generate(directory, service, namespace, days=365, force=True)
    return True


def _issue_serving(
    out: Path,
    ca_cert: x509.Certificate,
    ca_key: ec.EllipticCurvePrivateKey,
    common_name: str,
    dns_names: list[str],
    days: int,
) -> None:
    key = ec.generate_private_key(ec.SECP256R1())
    cert = _serving_certificate(key, ca_cert, ca_key, common_name, dns_names, days)
    # The key goes first: a reader that sees the new certificate must also find its key.
    _write(out / TLS_KEY, _key_pem(key), private=True)
    _write(out / TLS_CERT, _cert_pem(cert), private=False)


def issue_client(ca_dir: Path, out: Path, name: str, *, days: int) -> None:
    """A client certificate from the CA in `ca_dir`, for kube-apiserver's admission kubeconfig
    when the server runs with --client-ca; written as client.crt and client.key."""
    ca_cert, ca_key = _load_ca(ca_dir)
    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
    builder = _base_builder(subject, ca_cert.subject, key.public_key(), days)
    builder = builder.add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
    builder = builder.add_extension(_key_usage(ca=False), critical=True)
    builder = builder.add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.CLIENT_AUTH]), critical=False)
    authority = x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key())
    cert = builder.add_extension(authority, critical=False).sign(ca_key, hashes.SHA256())
    out.mkdir(parents=True, exist_ok=True)
    _write(out / CLIENT_KEY, _key_pem(key), private=True)
    _write(out / CLIENT_CERT, _cert_pem(cert), private=False)


def _ca_certificate(key: ec.EllipticCurvePrivateKey, name: str, *, days: int) -> x509.Certificate:
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
    public = key.public_key()
    builder = _base_builder(subject, subject, public, days)
    builder = builder.add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
    builder = builder.add_extension(_key_usage(ca=True), critical=True)
    builder = builder.add_extension(
        x509.AuthorityKeyIdentifier.from_issuer_public_key(public), critical=False
    )
    return builder.sign(key, hashes.SHA256())


def _serving_certificate(
    key: ec.EllipticCurvePrivateKey,
    ca_cert: x509.Certificate,
    ca_key: ec.EllipticCurvePrivateKey,
    common_name: str,
    dns_names: list[str],
    days: int,
) -> x509.Certificate:
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])
    builder = _base_builder(subject, ca_cert.subject, key.public_key(), days)
    builder = builder.add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
    builder = builder.add_extension(_key_usage(ca=False), critical=True)
    builder = builder.add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
    builder = builder.add_extension(_subject_alt_names(dns_names), critical=False)
    authority = x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key())
    builder = builder.add_extension(authority, critical=False)
    return builder.sign(ca_key, hashes.SHA256())


def _base_builder(
    subject: x509.Name, issuer: x509.Name, public: ec.EllipticCurvePublicKey, days: int
) -> x509.CertificateBuilder:
    if days < 1:
        raise CertError(f"--days must be at least 1, got {days}")
    now = dt.datetime.now(dt.UTC)
    return (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(issuer)
        .public_key(public)
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - _CLOCK_SKEW)
        .not_valid_after(now + dt.timedelta(days=days))
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(public), critical=False)
    )


def _key_usage(*, ca: bool) -> x509.KeyUsage:
    return x509.KeyUsage(
        digital_signature=True,
        content_commitment=False,
        key_encipherment=False,
        data_encipherment=False,
        key_agreement=False,
        key_cert_sign=ca,
        crl_sign=ca,
        encipher_only=False,
        decipher_only=False,
    )


def _subject_alt_names(dns_names: list[str]) -> x509.SubjectAlternativeName:
    names: list[x509.GeneralName] = [x509.DNSName(name) for name in dict.fromkeys(dns_names)]
    names += [x509.IPAddress(ipaddress.ip_address(ip)) for ip in LOOPBACK_IPS]
    return x509.SubjectAlternativeName(names)


def _dns_names(cert: x509.Certificate) -> tuple[str, ...]:
    return tuple(_san(cert).get_values_for_type(x509.DNSName))


def _ip_addresses(cert: x509.Certificate) -> tuple[str, ...]:
    return tuple(str(ip) for ip in _san(cert).get_values_for_type(x509.IPAddress))


def _san(cert: x509.Certificate) -> x509.SubjectAlternativeName:
    try:
        return cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    except x509.ExtensionNotFound:
        return x509.SubjectAlternativeName([])


def _common_name(cert: x509.Certificate) -> str | None:
    values = cert.subject.get_attributes_for_oid(NameOID.COMMON_NAME)
    return str(values[0].value) if values else None


def _load_ca(directory: Path) -> tuple[x509.Certificate, ec.EllipticCurvePrivateKey]:
    cert = _load_cert(directory / CA_CERT)
    try:
        key = serialization.load_pem_private_key(_read(directory / CA_KEY), password=None)
    except ValueError as e:
        raise CertError(f"{directory / CA_KEY}: not a PEM private key") from e
    if not isinstance(key, ec.EllipticCurvePrivateKey):
        raise CertError(f"{directory / CA_KEY}: expected an ECDSA key")
    return cert, key


def _load_cert(path: Path) -> x509.Certificate:
    try:
        return x509.load_pem_x509_certificate(_read(path))
    except ValueError as e:
        raise CertError(f"{path}: not a PEM certificate") from e


def _read(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except OSError as e:
        raise CertError(f"cannot read {path}: {e.strerror}") from e


def _key_pem(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )


def _cert_pem(cert: x509.Certificate) -> bytes:
    return cert.public_bytes(serialization.Encoding.PEM)


def _write(path: Path, data: bytes, *, private: bool) -> None:
    """Replace `path` atomically; the file never exists with looser permissions than its final ones."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        os.fchmod(fd, 0o600 if private else 0o644)
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
