"""Start a real `gpu-webhook serve` process and wait for the events it logs, never for a fixed time."""

from __future__ import annotations

import json
import os
import queue
import re
import signal
import subprocess
import sys
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.support.patience import PATIENCE
from tests.support.tlsclient import TLSClient

STARTUP_TIMEOUT = PATIENCE  # of silence from the server, not of start-up in all
_LISTENING = re.compile(r"Uvicorn running on https://[^:]+:(\d+)")
LogEntry = dict[str, Any]


@dataclass
class ServerProcess:
    process: subprocess.Popen[str]
    ca_file: Path
    port: int = 0
    lines: queue.Queue[str] = field(default_factory=queue.Queue, repr=False)
    seen: list[str] = field(default_factory=list, repr=False)

    def __repr__(self) -> str:
        return f"ServerProcess(pid={self.process.pid}, port={self.port})"

    def client(self, **options: Any) -> TLSClient:
        return TLSClient(self.port, self.ca_file, **options)

    def wait_for_log(self, predicate: Callable[[LogEntry], bool], timeout: float = PATIENCE) -> LogEntry:
        """Block until the server logs an entry matching `predicate`; fail with its output if it
        exits first or stays silent for `timeout` seconds."""
        while True:
            try:
                line = self.lines.get(timeout=timeout)
            except queue.Empty:
                raise AssertionError("server never logged the awaited event:\n" + self.output()) from None
            self.seen.append(line)
            entry = _parse(line)
            if entry is not None and entry.get("msg") == "<process exited>":
                raise AssertionError(f"server exited with {entry.get('returncode')}:\n{self.output()}")
            if entry is not None and predicate(entry):
                return entry

    def output(self) -> str:
        while not self.lines.empty():
            self.seen.append(self.lines.get_nowait())
        return "".join(self.seen)

    def stop(self, sig: signal.Signals = signal.SIGTERM, timeout: float = PATIENCE) -> int:
        if self.process.poll() is None:
            self.process.send_signal(sig)
        return self.process.wait(timeout=timeout)

    def stop_gracefully(self) -> None:
        """SIGTERM, as the kubelet sends it; uvicorn drains, then re-raises the signal to exit."""
        self.process.send_signal(signal.SIGTERM)
        self.wait_for_log(lambda e: e.get("msg", "").startswith("Finished server process"))
        assert self.process.wait(timeout=PATIENCE) in (0, -signal.SIGTERM)


def start_server(
    args: Sequence[str],
    *,
    ca_file: Path,
    cwd: Path | None = None,
    env: dict[str, str] | None = None,
    prefix: Sequence[str] = (),
) -> ServerProcess:
    """`prefix` runs the server under another command (nsenter into a namespace, say)."""
    command = [*prefix, sys.executable, "-m", "webhook", "serve", "--host", "127.0.0.1", *args]
    if not any(a == "--port" for a in args) and "GPU_WEBHOOK_PORT" not in (env or {}):
        command += ["--port", "0"]
    process = subprocess.Popen(
        command,
        cwd=cwd,
        env={**os.environ, **(env or {})},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    server = ServerProcess(process=process, ca_file=ca_file)
    threading.Thread(target=_pump, args=(process, server.lines), daemon=True).start()
    listening = server.wait_for_log(lambda e: bool(_LISTENING.search(e.get("msg", ""))), STARTUP_TIMEOUT)
    match = _LISTENING.search(listening["msg"])
    assert match is not None
    server.port = int(match.group(1))
    return server


def _pump(process: subprocess.Popen[str], lines: queue.Queue[str]) -> None:
    assert process.stdout is not None
    for line in process.stdout:
        lines.put(line)
    lines.put(json.dumps({"msg": "<process exited>", "returncode": process.wait()}) + "\n")


def _parse(line: str) -> LogEntry | None:
    try:
        entry = json.loads(line)
    except ValueError:
        return None
    return entry if isinstance(entry, dict) else None
