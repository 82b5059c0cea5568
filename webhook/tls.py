"""Server TLS: a hardened SSLContext that picks up rotated certificate files without a restart.

uvicorn loads TLS files once at start-up. We hand it a context whose SNI callback
(called on every handshake, with or without SNI) swaps in a context rebuilt when
tls.crt or tls.key change on disk, as cert-manager and Secret volume updates do.
"""

from __future__ import annotations

import logging
import os
import ssl
import threading
import time
from collections.abc import Callable
from pathlib import Path

from webhook.certs import TLS_CERT, TLS_KEY

log = logging.getLogger(__name__)

# TLS 1.2 suites with forward secrecy and AEAD only; TLS 1.3 suites are all modern.
TLS12_CIPHERS = "ECDHE+AESGCM:ECDHE+CHACHA20"
FileSignature = tuple[tuple[int, int, int], ...]


def server_context(cert_file: Path, key_file: Path, client_ca: Path | None = None) -> ssl.SSLContext:
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    context.set_ciphers(TLS12_CIPHERS)
    context.options |= ssl.OP_NO_COMPRESSION | ssl.OP_CIPHER_SERVER_PREFERENCE
    context.set_alpn_protocols(["http/1.1"])
    context.load_cert_chain(cert_file, key_file)
    if client_ca is not None:
        context.verify_mode = ssl.CERT_REQUIRED
        context.load_verify_locations(cafile=client_ca)
    return context


class ReloadingContext:
    """Serves the newest valid certificate in `cert_dir` to each new connection."""

    def __init__(
        self,
        cert_dir: Path,
        *,
        check_seconds: float = 1.0,
        client_ca: Path | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._cert, self._key = cert_dir / TLS_CERT, cert_dir / TLS_KEY
        self._client_ca = client_ca
        self._check_seconds = check_seconds
        self._clock = clock
        self._lock = threading.Lock()
        self._signature = self._file_signature()
        self._rejected: FileSignature | None = None
        self._current = self._build()
        self._base = self._build()
        self._base.sni_callback = self._on_handshake
        self._next_check = clock() + check_seconds

    @property
    def context(self) -> ssl.SSLContext:
        """The context to give the server; it delegates each handshake to the current one."""
        return self._base

    def refresh(self) -> bool:
        """Reload if the files changed and are valid; True if a new certificate is now served."""
        with self._lock:
            signature = self._file_signature()
            if signature in (self._signature, self._rejected):
                return False
            try:
                self._current = self._build()
            except (OSError, ssl.SSLError) as e:
                self._rejected = signature
                log.warning("certificate reload failed; keeping the previous one", extra={"error": str(e)})
                return False
            self._signature = signature
            log.info("serving certificate reloaded", extra={"cert": str(self._cert)})
            return True

    def _on_handshake(
        self, connection: ssl.SSLObject | ssl.SSLSocket, name: str | None, _: ssl.SSLContext
    ) -> None:
        now = self._clock()
        if now >= self._next_check:
            self._next_check = now + self._check_seconds
            self.refresh()
        connection.context = self._current

    def _build(self) -> ssl.SSLContext:
        return server_context(self._cert, self._key, self._client_ca)

    def _file_signature(self) -> FileSignature:
        """Identity of both files; a Secret volume's ..data swap changes inode and mtime."""
        try:
            stats = [os.stat(path) for path in (self._cert, self._key)]
        except OSError:
            return ()
        return tuple((s.st_ino, s.st_mtime_ns, s.st_size) for s in stats)
