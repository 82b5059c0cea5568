"""The threading HTTP server the in-repo fakes share."""

from __future__ import annotations

import sys
from http.server import ThreadingHTTPServer
from typing import Any


class QuietHTTPServer(ThreadingHTTPServer):
    """Stays silent when a client hangs up (a watch or a timed-out request we abandoned on
    purpose); any other handler failure is still printed, because it is a bug in the fake."""

    daemon_threads = True

    def handle_error(self, request: Any, client_address: Any) -> None:
        if not isinstance(sys.exc_info()[1], ConnectionError | TimeoutError):
            super().handle_error(request, client_address)
