"""An HTTPS client for loopback that verifies our CA and the Service name, as kube-apiserver does."""

from __future__ import annotations

import http.client
import socket
import ssl
from dataclasses import dataclass
from pathlib import Path

import orjson

from tests.support.patience import PATIENCE

SERVICE_NAME = "gpu-webhook.gpu-system.svc"
JSON_HEADERS = {"Content-Type": "application/json"}


@dataclass(frozen=True)
class Reply:
    status: int
    headers: dict[str, str]
    body: bytes

    def json(self) -> dict[str, object]:
        value = orjson.loads(self.body)
        assert isinstance(value, dict)
        return value


class _PinnedConnection(http.client.HTTPSConnection):
    def __init__(self, port: int, server_name: str, context: ssl.SSLContext, timeout: float) -> None:
        super().__init__(server_name, port, context=context, timeout=timeout)
        self._context = context

    def connect(self) -> None:
        raw = socket.create_connection(("127.0.0.1", self.port), self.timeout)
        self.sock = self._context.wrap_socket(raw, server_hostname=self.host)


def client_context(ca_file: Path) -> ssl.SSLContext:
    context = ssl.create_default_context(cafile=str(ca_file))
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    return context


class TLSClient:
    def __init__(
        self, port: int, ca_file: Path, server_name: str = SERVICE_NAME, timeout: float = PATIENCE
    ) -> None:
        self.port = port
        self.server_name = server_name
        self.context = client_context(ca_file)
        self.timeout = timeout
        self._connection: _PinnedConnection | None = None

    def open(self) -> _PinnedConnection:
        return _PinnedConnection(self.port, self.server_name, self.context, self.timeout)

    def request(
        self,
        method: str,
        path: str,
        body: bytes | None = None,
        headers: dict[str, str] | None = None,
    ) -> Reply:
        """One request on a fresh connection: a failure never leaks into the next case."""
        connection = self.open()
        try:
            return self._exchange(connection, method, path, body, headers or {})
        finally:
            connection.close()

    def keepalive(self, method: str, path: str, body: bytes, headers: dict[str, str] | None = None) -> Reply:
        """A request on a reused connection, reopened when the server closed it."""
        for attempt in range(2):
            if self._connection is None:
                self._connection = self.open()
            try:
                return self._exchange(self._connection, method, path, body, headers or {})
            except (http.client.HTTPException, OSError):
                self._connection.close()
                self._connection = None
                if attempt:
                    raise
        raise AssertionError("unreachable")

    def post_json(self, path: str, document: object) -> Reply:
        return self.request("POST", path, orjson.dumps(document), JSON_HEADERS)

    def peer_certificate(self) -> bytes:
        connection = self.open()
        try:
            connection.connect()
            assert isinstance(connection.sock, ssl.SSLSocket)
            der = connection.sock.getpeercert(binary_form=True)
            assert der is not None
            return der
        finally:
            connection.close()

    def close(self) -> None:
        if self._connection is not None:
            self._connection.close()

    @staticmethod
    def _exchange(
        connection: http.client.HTTPSConnection,
        method: str,
        path: str,
        body: bytes | None,
        headers: dict[str, str],
    ) -> Reply:
        connection.request(method, path, body=body, headers=headers)
        response = connection.getresponse()
        data = response.read()
        return Reply(response.status, {k.lower(): v for k, v in response.getheaders()}, data)
