"""The threading HTTP server and request handler base that the in-repo fakes share."""

from __future__ import annotations

import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class QuietHTTPServer(ThreadingHTTPServer):
    """Stays silent when a client hangs up (a watch or a timed-out request we abandoned on
    purpose); any other handler failure is still printed, because it is a bug in the fake."""

    daemon_threads = True

    def handle_error(self, request: Any, client_address: Any) -> None:
        if not isinstance(sys.exc_info()[1], ConnectionError | TimeoutError):
            super().handle_error(request, client_address)


class QuietHandler(BaseHTTPRequestHandler):
    """Logs nothing (what a fake was asked is the test's business), and answers in one call."""

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def send_body(self, status: int, body: bytes, content_type: str | None = "application/json") -> None:
        self.send_response(status)
        if content_type:
            self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
