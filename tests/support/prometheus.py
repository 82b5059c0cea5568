"""Run a real Prometheus server (Debian's `prometheus` package) on a free loopback port.

Readiness and data are awaited by polling Prometheus' own API with a bound, never
by sleeping a fixed time. Queries here use urllib directly, independent of the
client under test.
"""

from __future__ import annotations

import json
import shutil
import socket
import ssl
import subprocess
import time
import urllib.parse
import urllib.request
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from tests.support.patience import PATIENCE

BINARY = shutil.which("prometheus")
PROMTOOL = shutil.which("promtool")
MISSING = "Prometheus is not installed (Debian: apt-get install prometheus; .ci/run installs it when it can)"
STARTUP_SECONDS = PATIENCE
POLL_SECONDS = 0.05


@dataclass(frozen=True)
class ScrapeJob:
    name: str
    target: str
    honor_labels: bool = True
    target_labels: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Tls:
    """Serve HTTPS with this certificate; clients verify it with `ca_file`."""

    cert_file: Path
    key_file: Path
    ca_file: Path

    def client_context(self) -> ssl.SSLContext:
        return ssl.create_default_context(cafile=str(self.ca_file))


@dataclass
class PrometheusServer:
    process: subprocess.Popen[bytes]
    url: str
    log_file: Path
    tls: Tls | None = None

    def query(self, promql: str) -> list[dict[str, Any]]:
        url = f"{self.url}/api/v1/query?" + urllib.parse.urlencode({"query": promql})
        context = self.tls.client_context() if self.tls else None
        with urllib.request.urlopen(url, timeout=PATIENCE, context=context) as response:
            answer = json.loads(response.read())
        assert answer["status"] == "success", answer
        result: list[dict[str, Any]] = answer["data"]["result"]
        return result

    def wait_until(self, what: str, condition: Callable[[], bool], timeout: float = STARTUP_SECONDS) -> None:
        deadline = time.monotonic() + timeout
        while not _holds(condition):
            if self.process.poll() is not None:
                raise AssertionError(f"prometheus exited with {self.process.returncode}:\n{self.log()}")
            if time.monotonic() > deadline:
                raise AssertionError(f"prometheus: {what} not within {timeout}s:\n{self.log()}")
            time.sleep(POLL_SECONDS)

    def wait_for_samples(self, metric: str, series: int, samples: int) -> None:
        """Until `series` series of `metric` each hold at least `samples` samples."""

        def enough() -> bool:
            counts = self.query(f"count_over_time({metric}[10m])")
            return len(counts) >= series and all(float(c["value"][1]) >= samples for c in counts)

        self.wait_until(f"{series} series of {metric} with {samples} samples each", enough)

    def log(self) -> str:
        return self.log_file.read_text(errors="replace")[-4000:] if self.log_file.exists() else ""

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def start_prometheus(
    jobs: Sequence[ScrapeJob], directory: Path, scrape_interval: str = "100ms", tls: Tls | None = None
) -> PrometheusServer:
    assert BINARY is not None, MISSING
    config = directory / "prometheus.yml"
    config.write_text(yaml.safe_dump(_config(jobs, scrape_interval)))
    port = free_port()
    command = [
        BINARY,
        f"--config.file={config}",
        f"--storage.tsdb.path={directory / 'data'}",
        f"--web.listen-address=127.0.0.1:{port}",
        "--log.level=warn",
    ]
    if tls is not None:
        web = directory / "web.yml"
        server_config = {"cert_file": str(tls.cert_file), "key_file": str(tls.key_file)}
        web.write_text(yaml.safe_dump({"tls_server_config": server_config}))
        command.append(f"--web.config.file={web}")
    log_file = directory / "prometheus.log"
    with log_file.open("wb") as log:
        process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT)
    scheme = "https" if tls else "http"
    server = PrometheusServer(process, f"{scheme}://127.0.0.1:{port}", log_file, tls)
    server.wait_until("ready", lambda: _ready(server))
    return server


def _config(jobs: Sequence[ScrapeJob], interval: str) -> dict[str, Any]:
    return {
        "global": {"scrape_interval": interval, "scrape_timeout": interval},
        "scrape_configs": [
            {
                "job_name": job.name,
                "honor_labels": job.honor_labels,
                "static_configs": [{"targets": [job.target], "labels": job.target_labels}],
            }
            for job in jobs
        ],
    }


def _ready(server: PrometheusServer) -> bool:
    context = server.tls.client_context() if server.tls else None
    with urllib.request.urlopen(f"{server.url}/-/ready", timeout=PATIENCE, context=context) as response:
        return bool(response.status == 200)


def _holds(condition: Callable[[], bool]) -> bool:
    try:
        return condition()
    except OSError:  # not listening yet, or refused while starting
        return False
