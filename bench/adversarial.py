"""Ordinary reviews while heavy ones are in flight: `python -m bench.adversarial [--rounds K]`.

Anyone who may create pods may send heavy ones, so what matters is what everyone else gets
meanwhile. Each round starts the trivial handler (bench/trivial.py, the ceiling) and then
`gpu-webhook serve` with the security bundle, and measures ordinary Deployment reviews on
/validate with wrk three times: alone (`quiet`), and while three clients keep heavy reviews in
flight, one after another (as three such pods in flight did in the red-team's test):
- `redteam`: a Deployment whose container adds 10,000 capabilities (about 180 KiB);
- `bounded`: a Deployment within every size bound (webhook.validation.bounds) that still costs a
  second or more of Rego: 60 privileged containers, each with device variables and mounts.
Every request carries `?timeout=5s`, the validating webhook's timeoutSeconds (manifests/base/).

The ordinary load is `--connections` keep-alive clients in this process (not wrk: wrk leaves out
answers slower than its 2 s timeout, which are the ones that matter here), each sending the next
review when the last is answered; a review sent before the phase ends is waited for and counted.
The ceiling is the same clients against the trivial handler, in the same round. Per phase it
reports the ordinary reviews' p50 and p99, p99 as a multiple of the ceiling's p99, and how many
ordinary reviews the failure mode answered instead of a review (`unreviewed`: timeouts and
overload). Writes `bench/results/adversarial-<UTC time>.json`.
"""

from __future__ import annotations

import argparse
import contextlib
import http.client
import ssl
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import orjson  # noqa: E402

from bench.common import admission_review, save_results  # noqa: E402
from bench.run import Server, _await_ready  # noqa: E402
from bench.scenarios import review, training_pod  # noqa: E402
from tests.support.heavy import DEV, deployment, heavy_container  # noqa: E402
from webhook import certs  # noqa: E402

TIMEOUT = "5s"
HEAVY_CLIENTS = 3
FAILURE_MODE = ("ran out of time", "is overloaded", "is busy with large reviews")


ORDINARY = deployment("web", [{"name": "web", "image": "nginx:1.27", "ports": [{"containerPort": 80}]}])
HEAVY = {
    "redteam": deployment(
        "caps",
        [
            {
                "name": "c",
                "image": "busybox",
                "securityContext": {"capabilities": {"add": ["SYS_ADMIN"] * 10_000}},
            }
        ],
    ),
    "bounded": deployment("wide", [heavy_container(i) for i in range(60)], DEV),
}


PATH = f"/validate?timeout={TIMEOUT}"


def _connection(port: int) -> http.client.HTTPSConnection:
    context = ssl.create_default_context()
    context.check_hostname, context.verify_mode = False, ssl.CERT_NONE
    return http.client.HTTPSConnection("127.0.0.1", port, context=context, timeout=120)


def _send(connection: http.client.HTTPSConnection, path: str, body: bytes) -> bool:
    """One review on a kept-alive connection; whether the failure mode answered it."""
    connection.request("POST", path, body, {"Content-Type": "application/json"})
    reply = connection.getresponse().read()
    if not reply.startswith(b"{"):
        return True
    status = orjson.loads(reply).get("response", {}).get("status") or {}
    return any(words in status.get("message", "") for words in FAILURE_MODE)


class Clients:
    """`count` clients, each keeping one review of `body` in flight until stopped: the latency of
    every answer, and how many the failure mode gave."""

    def __init__(self, port: int, path: str, body: bytes, count: int) -> None:
        self.port, self.path, self.body = port, path, body
        self.stop = threading.Event()
        self.latencies_ms: list[float] = []
        self.unreviewed = 0
        self._lock = threading.Lock()
        self.threads = [threading.Thread(target=self._loop, daemon=True) for _ in range(count)]

    def __enter__(self) -> Clients:
        for thread in self.threads:
            thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self.stop.set()
        for thread in self.threads:
            thread.join()

    def _loop(self) -> None:
        connection = _connection(self.port)
        try:
            while not self.stop.is_set():
                started = time.perf_counter()
                unreviewed = _send(connection, self.path, self.body)
                with self._lock:
                    self.latencies_ms.append((time.perf_counter() - started) * 1000)
                    self.unreviewed += unreviewed
        finally:
            connection.close()


def _phase(
    port: int, path: str, body: bytes, seconds: float, connections: int, heavy: bytes | None
) -> dict[str, Any]:
    """Ordinary reviews for `seconds`, with HEAVY_CLIENTS sending `heavy` meanwhile if given."""
    with contextlib.ExitStack() as stack:
        attackers = stack.enter_context(Clients(port, path, heavy, HEAVY_CLIENTS)) if heavy else None
        with Clients(port, path, body, connections) as ordinary:
            ordinary.stop.wait(seconds)
    figures = _figures(ordinary)
    figures["heavy_answered"] = len(attackers.latencies_ms) if attackers else 0
    figures["heavy_unreviewed"] = attackers.unreviewed if attackers else 0
    return figures


def _figures(clients: Clients) -> dict[str, Any]:
    latencies = sorted(clients.latencies_ms)
    quantiles = statistics.quantiles(latencies, n=100) if len(latencies) > 1 else [float("nan")] * 99
    return {
        "requests": len(latencies),
        "p50_ms": quantiles[49],
        "p99_ms": quantiles[98],
        "max_ms": latencies[-1] if latencies else float("nan"),
        "unreviewed": clients.unreviewed,
    }


def run_round(workdir: Path, seconds: float, connections: int) -> dict[str, Any]:
    cert_dir = workdir / "certs"
    trivial = Server(
        [sys.executable, "-m", "bench.trivial", "--cert-dir", str(cert_dir)], workdir / "trivial.log"
    )
    pod = review(training_pod("bench-mig"))
    try:
        _phase(trivial.port, "/mutate", pod, 1.0, connections, None)  # warm-up
        ceiling = _phase(trivial.port, "/mutate", pod, seconds, connections, None)
    finally:
        trivial.stop()
    command = [sys.executable, "-m", "webhook", "serve", "--port", "0", "--cert-dir", str(cert_dir)]
    server = Server(command, workdir / "adversarial.log")
    _await_ready(server)
    try:
        body = admission_review(ORDINARY)
        _phase(server.port, PATH, body, 1.0, connections, None)  # warm-up
        phases = {"quiet": _phase(server.port, PATH, body, seconds, connections, None)}
        for name, obj in HEAVY.items():
            phases[name] = _phase(server.port, PATH, body, seconds, connections, admission_review(obj))
    finally:
        server.stop()
    for phase in phases.values():
        phase["ratio_p99"] = phase["p99_ms"] / ceiling["p99_ms"]
    return {"ceiling": ceiling, "phases": phases}


def _median(rounds: list[dict[str, Any]], phase: str, key: str) -> float:
    return float(statistics.median(r["phases"][phase][key] for r in rounds))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--connections", type=int, default=4)
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "results")
    parser.add_argument("--label", default="adversarial", help="file name prefix, e.g. before-adversarial")
    args = parser.parse_args()
    rounds = []
    for _ in range(args.rounds):
        with tempfile.TemporaryDirectory() as tmp:
            workdir = Path(tmp)
            certs.generate(workdir / "certs", "gpu-webhook", "gpu-system", days=2)
            rounds.append(run_round(workdir, args.seconds, args.connections))
    print(
        f"{'phase':10} {'p50 ms':>8} {'p99 ms':>8} {'x ceil':>7} {'unreviewed':>10}  medians of {len(rounds)}"
    )
    for phase in ("quiet", *HEAVY):
        p50, p99 = _median(rounds, phase, "p50_ms"), _median(rounds, phase, "p99_ms")
        ratio, unreviewed = _median(rounds, phase, "ratio_p99"), _median(rounds, phase, "unreviewed")
        print(f"{phase:10} {p50:8.2f} {p99:8.2f} {ratio:8.1f} {unreviewed:10.0f}")
    _save(args, rounds)
    return 0


def _save(args: argparse.Namespace, rounds: list[dict[str, Any]]) -> None:
    settings = {
        "seconds": args.seconds,
        "connections": args.connections,
        "heavy_clients": HEAVY_CLIENTS,
        "timeout": TIMEOUT,
    }
    save_results(args.out, f"{args.label}-", settings, rounds=rounds)


if __name__ == "__main__":
    raise SystemExit(main())
