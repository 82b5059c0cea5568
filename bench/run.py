"""Run the benchmark: `python bench/run.py [--scenario NAME …] [--seconds N]`.

Every scenario starts `gpu-webhook serve` as its own process over TLS and drives it with
a separate load generator (wrk). A trivial starlette handler runs in the same benchmark as
the ceiling, and every figure is reported both absolutely and as a ratio to it.
"""

from __future__ import annotations

import argparse
import contextlib
import re
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


from bench import loadgen  # noqa: E402
from bench.common import save_results  # noqa: E402
from bench.scenarios import Scenario, all_scenarios, review, training_pod  # noqa: E402
from webhook import certs  # noqa: E402

_LISTENING = re.compile(r"Uvicorn running on https://127\.0\.0\.1:(\d+)")
STARTUP_TIMEOUT = 60.0


@dataclass(frozen=True)
class Result:
    name: str
    description: str
    requests_per_second: float
    p50_ms: float
    p99_ms: float
    max_ms: float
    max_rss_mb: float
    errors: int
    ratio_rps: float
    ratio_p99: float
    start_to_ready_s: float
    tool: str


class Server:
    """A server process whose output goes to a file, so a full pipe can never stall it."""

    def __init__(self, command: list[str], log: Path, port: int | None = None) -> None:
        self.log = log
        self.started = time.perf_counter()
        with log.open("w") as out:
            self.process = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, cwd=ROOT)
        self.port = self._await_port(port)

    def _await_port(self, port: int | None) -> int:
        """The port from the server's start-up line, or, given one (quiet logs), once it accepts."""
        deadline = time.monotonic() + STARTUP_TIMEOUT
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"server exited:\n{self.log.read_text()[-2000:]}")
            match = _LISTENING.search(self.log.read_text()) if port is None else None
            if match:
                return int(match[1])
            if port is not None and _accepts(port):
                return port
            time.sleep(0.05)
        raise RuntimeError("server did not start")

    def max_rss_mb(self) -> float:
        return sum(_peak_rss_kb(pid) for pid in [self.process.pid, *_children(self.process.pid)]) / 1024

    def stop(self) -> None:
        self.process.terminate()
        self.process.wait(timeout=30)


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _accepts(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
    except OSError:
        return False
    return True


def _peak_rss_kb(pid: int) -> int:
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return 0
    match = re.search(r"VmHWM:\s+(\d+) kB", status)
    return int(match[1]) if match else 0


def _children(pid: int) -> list[int]:
    try:
        return [int(c) for c in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    except OSError:
        return []


def _await_ready(server: Server) -> None:
    """/readyz 200: policies loaded and cluster caches synced (a live cluster lists first)."""
    import ssl
    import urllib.request

    context = ssl.create_default_context()
    context.check_hostname, context.verify_mode = False, ssl.CERT_NONE
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(f"https://127.0.0.1:{server.port}/readyz", context=context) as reply:
                if reply.status == 200:
                    return
        except OSError:
            pass
        time.sleep(0.05)
    raise RuntimeError("server never became ready")


def _await_workers(server: Server, workers: int) -> None:
    """Every worker listening: connections opened while only the first is would all stay with it
    (the load generator, like kube-apiserver, keeps them open). Each worker listens on its own
    socket, after it logs its start-up, so the kernel's table of listening sockets is what counts."""
    deadline = time.monotonic() + 600
    while _listening(server.port) < workers:
        if time.monotonic() > deadline:
            raise RuntimeError(f"fewer than {workers} workers started")
        time.sleep(0.05)


def _listening(port: int) -> int:
    """Sockets in LISTEN state (0A) on `port`, from /proc/net/tcp and tcp6."""
    count = 0
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with contextlib.suppress(OSError):
            for line in Path(table).read_text().splitlines()[1:]:
                fields = line.split()
                count += fields[1].endswith(f":{port:04X}") and fields[3] == "0A"
    return count


def _measure(
    server: Server, scenario_endpoint: str, body: bytes, seconds: float, connections: int
) -> loadgen.Load:
    url = f"https://127.0.0.1:{server.port}{scenario_endpoint}"
    loadgen.run(url, body, min(seconds, 1.0), connections)  # warm-up: caches, JIT-free but lazy imports
    return loadgen.run(url, body, seconds, connections)


def run_ceiling(
    cert_dir: Path, workdir: Path, seconds: float, connections: int
) -> tuple[loadgen.Load, float]:
    command = [sys.executable, "-m", "bench.trivial", "--cert-dir", str(cert_dir)]
    server = Server(command, workdir / "trivial.log")
    try:
        load = _measure(server, "/mutate", review(training_pod("bench-mig")), seconds, connections)
        return load, server.max_rss_mb()
    finally:
        server.stop()


def run_scenario(
    scenario: Scenario, cert_dir: Path, workdir: Path, seconds: float, connections: int, ceiling: loadgen.Load
) -> Result:
    extra = scenario.prepare(workdir) if scenario.prepare else ()
    command = [
        sys.executable,
        "-m",
        "webhook",
        "serve",
        "--port",
        "0",
        "--cert-dir",
        str(cert_dir),
        "--workers",
        str(scenario.workers),
        *scenario.server_args,
        *extra,
    ]
    server = Server(command, workdir / f"{scenario.name}.log")
    _await_ready(server)
    ready = time.perf_counter() - server.started
    _await_workers(server, scenario.workers)
    try:
        load = _measure(server, scenario.endpoint, scenario.body, seconds, connections)
        rss = server.max_rss_mb()
    finally:
        server.stop()
    return Result(
        scenario.name,
        scenario.description,
        load.requests_per_second,
        load.p50_ms,
        load.p99_ms,
        load.max_ms,
        rss,
        load.errors,
        load.requests_per_second / ceiling.requests_per_second,
        load.p99_ms / ceiling.p99_ms,
        ready,
        load.tool,
    )


def print_table(ceiling: loadgen.Load, results: list[Result]) -> None:
    columns = (
        ("req/s", 9),
        ("x ceil", 7),
        ("p50 ms", 8),
        ("p99 ms", 8),
        ("x ceil", 7),
        ("RSS MB", 7),
        ("errors", 6),
    )
    header = f"{'scenario':32}" + "".join(f" {name:>{width}}" for name, width in columns)
    print(header)
    print("-" * len(header))
    print(
        f"{'ceiling (trivial starlette)':32} {ceiling.requests_per_second:9.0f} {1:7.2f} "
        f"{ceiling.p50_ms:8.2f} "
        f"{ceiling.p99_ms:8.2f} {1:7.2f} {'':>7} {ceiling.errors:6d}"
    )
    for r in results:
        print(
            f"{r.name:32} {r.requests_per_second:9.0f} {r.ratio_rps:7.2f} {r.p50_ms:8.2f} {r.p99_ms:8.2f} "
            f"{r.ratio_p99:7.2f} {r.max_rss_mb:7.0f} {r.errors:6d}"
        )


def main() -> int:
    scenarios = {s.name: s for s in all_scenarios()}
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scenario", action="append", choices=sorted(scenarios), help="default: all")
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--connections", type=int, default=16)
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "results")
    args = parser.parse_args()
    if not loadgen.has_wrk():
        print(
            "wrk not found (apt-get install wrk): using the asyncio fallback, which is less accurate",
            file=sys.stderr,
        )
    chosen = [scenarios[n] for n in args.scenario] if args.scenario else list(scenarios.values())
    with tempfile.TemporaryDirectory() as tmp:
        workdir = Path(tmp)
        certs.generate(workdir / "certs", "gpu-webhook", "gpu-system", days=2)
        ceiling, _ = run_ceiling(workdir / "certs", workdir, args.seconds, args.connections)
        results = [
            run_scenario(s, workdir / "certs", workdir, args.seconds, args.connections, ceiling)
            for s in chosen
        ]
    print_table(ceiling, results)
    _save(args.out, ceiling, results, args)
    return 0


def _save(out: Path, ceiling: loadgen.Load, results: list[Result], args: argparse.Namespace) -> None:
    settings = {"seconds": args.seconds, "connections": args.connections, "wrk_threads": 1}
    save_results(out, "", settings, ceiling=asdict(ceiling), scenarios=[asdict(r) for r in results])


if __name__ == "__main__":
    raise SystemExit(main())
