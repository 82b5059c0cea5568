"""Ed25519 keys for signed checkpoints. With certs.py, one of the two importers of cryptography.

The private key signs; anyone holding the public key can verify a log without
being able to extend it. Keys are PEM (PKCS#8 private, SubjectPublicKeyInfo public).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from webhook.audit.chain import signed_text
from webhook.errors import ConfigError

PRIVATE_NAME, PUBLIC_NAME = "audit-signing.key", "audit-signing.pub"


class SigningKey:
    def __init__(self, private: Ed25519PrivateKey) -> None:
        self._private = private
        self.key_id = key_id(private.public_key())

    @classmethod
    def load(cls, path: Path) -> SigningKey:
        try:
            key = serialization.load_pem_private_key(path.read_bytes(), password=None)
        except (OSError, ValueError, TypeError) as e:
            raise ConfigError(f"cannot load the audit signing key {path}: {e}") from e
        if not isinstance(key, Ed25519PrivateKey):
            raise ConfigError(f"{path} is not an Ed25519 private key")
        return cls(key)

    def sign(self, data: bytes) -> str:
        return base64.b64encode(self._private.sign(data)).decode("ascii")


def generate(out: Path, *, force: bool = False) -> tuple[Path, Path]:
    """Write a new key pair into the directory `out`: the private key with mode 0600, the public
    key for verifiers. An existing pair is replaced only with `force`: a lost signing key leaves
    every checkpoint it signed verifiable only with its own public key."""
    private_path, public_path = out / PRIVATE_NAME, out / PUBLIC_NAME
    _make_directory(out)
    existing = [path for path in (private_path, public_path) if path.exists()]
    if existing and not force:
        raise ConfigError(f"{existing[0]} exists: keygen does not replace a key pair unless given --force")
    private = Ed25519PrivateKey.generate()
    private_pem = private.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    public_pem = private.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    _write(private_path, private_pem, 0o600, replace=force)
    _write(public_path, public_pem, 0o644, replace=force)
    return private_path, public_path


def _make_directory(out: Path) -> None:
    try:
        out.mkdir(parents=True, exist_ok=True)
    except FileExistsError as e:
        raise ConfigError(f"{out} exists and is not a directory: keygen --out names a directory") from e
    except OSError as e:
        raise ConfigError(f"cannot create the directory {out}: {e.strerror or e}") from e


def _write(path: Path, data: bytes, mode: int, *, replace: bool) -> None:
    """Create `path` (O_EXCL unless replacing, so a key written meanwhile is never overwritten)."""
    flags = os.O_WRONLY | os.O_CREAT | (os.O_TRUNC if replace else os.O_EXCL)
    try:
        with os.fdopen(os.open(path, flags, mode), "wb") as stream:
            os.fchmod(stream.fileno(), mode)  # a replaced file keeps its old mode otherwise
            stream.write(data)
    except FileExistsError as e:
        raise ConfigError(f"{path} exists: keygen does not replace a key pair unless given --force") from e
    except OSError as e:
        raise ConfigError(f"cannot write {path}: {e.strerror or e}") from e


def load_public(path: Path) -> Ed25519PublicKey:
    try:
        key = serialization.load_pem_public_key(path.read_bytes())
    except OSError as e:
        raise ConfigError(f"cannot load the audit public key {path}: {e.strerror or e}") from e
    except ValueError as e:
        raise ConfigError(f"cannot load the audit public key {path}: {e}") from e
    if not isinstance(key, Ed25519PublicKey):
        raise ConfigError(f"{path} is not an Ed25519 public key")
    return key


def key_id(public: Ed25519PublicKey) -> str:
    raw = public.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    return hashlib.sha256(raw).hexdigest()[:16]


def checkpoint_error(public: Ed25519PublicKey, record: Mapping[str, Any]) -> str | None:
    """None when the checkpoint's signature is good; otherwise why it is not."""
    if record.get("keyId") != key_id(public):
        return f"signed by key {record.get('keyId')!r}, not by the given public key {key_id(public)}"
    try:
        signature = base64.b64decode(str(record.get("sig", "")), validate=True)
        public.verify(signature, signed_text(record))
    except (InvalidSignature, binascii.Error, ValueError):
        return "the checkpoint signature does not verify"
    return None
