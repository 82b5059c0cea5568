"""An HTTP endpoint with canned answers, for what a real Prometheus will not do on demand.

Used only for transport faults and request inspection: a server that hangs until
released, a malformed or failing body, and recording the headers we send (the
bearer token). Everything about PromQL is tested against a real Prometheus.
"""

from __future__ import annotations

import queue
import threading
import urllib.parse
from collections.abc import Callable
from dataclasses import dataclass

from tests.support.quiethttp import QuietHandler, QuietHTTPServer


@dataclass(frozen=True)
class Recorded:
    path: str
    headers: dict[str, str]
    form: dict[str, list[str]]


Answer = tuple[int, bytes]


class StubServer:
    def __init__(self, answer: Callable[[Recorded], Answer], *, hold: bool = False) -> None:
        self.requests: queue.Queue[Recorded] = queue.Queue()
        self.release = threading.Event()
        if not hold:
            self.release.set()
        self._answer = answer
        self._server = QuietHTTPServer(("127.0.0.1", 0), self._handler())
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.02}, name="stub-http", daemon=True
        )
        self._thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def stop(self) -> None:
        self.release.set()
        self._server.shutdown()
        self._server.server_close()

    def _handler(self) -> type[QuietHandler]:
        stub = self

        class Handler(QuietHandler):
            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length", "0"))
                form = urllib.parse.parse_qs(self.rfile.read(length).decode())
                recorded = Recorded(self.path, dict(self.headers.items()), form)
                stub.requests.put(recorded)
                stub.release.wait(timeout=60)
                self.send_body(*stub._answer(recorded))

        return Handler
