"""Soak test (`make soak`): mixed load for ten minutes while policies reload and certificates rotate.

It reports, and fails on: any 5xx or socket error, any acknowledged decision missing from the
audit log, and resident memory that keeps growing after warm-up (by more than 20%).
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.run import Server, free_port  # noqa: E402
from bench.scenarios import cpu_pod, review, training_pod  # noqa: E402
from webhook import certs  # noqa: E402

BODIES = [
    ("/mutate", review(training_pod(f"example-{mode}")))
    for mode in ("mig", "timeslice", "mps", "hami", "kai", "training")
] + [
    ("/validate", review(training_pod("example-mig"))),
    ("/validate", review(cpu_pod())),
    ("/validate-advisory", review(training_pod("ml-team"))),
    ("/mutate", review(cpu_pod())),
]
LUA = """
local requests = {}
local paths = %s
for i, path in ipairs(paths) do
  local f = io.open(string.format("%s/body-%%d.json", i), "rb")
  requests[i] = wrk.format("POST", path, {["Content-Type"] = "application/json"}, f:read("*a"))
  f:close()
end
local n = 0
request = function()
  n = n %% #requests + 1
  return requests[n]
end
"""


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=int, default=600)
    parser.add_argument("--every", type=int, default=30, help="seconds between reloads and rotations")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        figures = soak(work, args.seconds, args.every)
    print(json.dumps(figures, indent=2))
    failed = figures["5xx_or_socket_errors"] or figures["lost_decisions"] or figures["rss_growth"] > 0.2
    print("SOAK FAILED" if failed else "soak passed")
    return 1 if failed else 0


def soak(work: Path, seconds: int, every: int) -> dict[str, Any]:
    cert_dir, policies, audit = work / "certs", work / "policies", work / "audit.log"
    certs.generate(cert_dir, "gpu-webhook", "gpu-system", days=2)
    shutil.copytree(ROOT / "policies", policies)
    port = free_port()
    command = [sys.executable, "-m", "webhook", "serve", "--port", str(port), "--cert-dir", str(cert_dir)]
    command += ["--policies", str(policies), "--audit-log", str(audit), "--audit-fsync", "batch"]
    command += ["--policy-check-seconds", "1", "--cert-check-seconds", "1", "--log-level", "warning"]
    server = Server(command, work / "server.log", port)
    load = _start_wrk(work, server.port, seconds)
    rss, reloads, rotations = [], 0, 0
    started = time.monotonic()
    while load.poll() is None:
        time.sleep(min(every, 10))
        rss.append(_rss_mb(server.process.pid))
        if time.monotonic() - started >= (reloads + 1) * every:
            _touch_policy(policies, reloads)
            certs.rotate(cert_dir, days=2)
            reloads, rotations = reloads + 1, rotations + 1
    output = load.communicate()[0]
    server.stop()
    return _figures(output, audit, rss, reloads, rotations)


def _start_wrk(work: Path, port: int, seconds: int) -> subprocess.Popen[str]:
    for index, (_, body) in enumerate(BODIES, start=1):
        (work / f"body-{index}.json").write_bytes(body)
    paths = "{" + ", ".join(f'"{path}"' for path, _ in BODIES) + "}"
    (work / "mixed.lua").write_text(LUA % (paths, work))
    command = [
        "wrk",
        "-t1",
        "-c16",
        f"-d{seconds}s",
        "-s",
        str(work / "mixed.lua"),
        f"https://127.0.0.1:{port}",
    ]
    return subprocess.Popen(command, stdout=subprocess.PIPE, text=True)


def _touch_policy(policies: Path, generation: int) -> None:
    """A real change each time: the example MIG policy's priority moves, so a new set loads."""
    path = policies / "examples" / "mig.yaml"
    text = re.sub(r"priority: \d+", f"priority: {10 + generation % 2}", path.read_text())
    path.write_text(text)


def _rss_mb(pid: int) -> float:
    match = re.search(r"VmRSS:\s+(\d+) kB", Path(f"/proc/{pid}/status").read_text())
    return int(match[1]) / 1024 if match else 0.0


def _figures(output: str, audit: Path, rss: list[float], reloads: int, rotations: int) -> dict[str, Any]:
    responses = int(re.search(r"(\d+) requests in", output)[1])  # type: ignore[index]
    non_2xx = re.search(r"Non-2xx or 3xx responses: (\d+)", output)
    socket = re.search(r"Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)", output)
    records = sum(1 for line in audit.open() if '"type":"decision"' in line)
    records += sum(
        1 for p in audit.parent.glob("audit.log.*") for line in p.open() if '"type":"decision"' in line
    )
    # Growth is judged after warm-up: the first reloads hold two policy sets for a moment and
    # regopy's allocator settles (measured: flat from the first minute on).
    warm = rss[len(rss) // 4 :]
    head, tail = warm[: max(1, len(warm) // 5)], warm[-max(1, len(warm) // 5) :]
    return {
        "responses": responses,
        "requests_per_second": float(re.search(r"Requests/sec:\s+([\d.]+)", output)[1]),  # type: ignore[index]
        "5xx_or_socket_errors": (int(non_2xx[1]) if non_2xx else 0)
        + (sum(map(int, socket.groups())) if socket else 0),
        "audit_records": records,
        "lost_decisions": max(0, responses - records),
        "policy_reloads": reloads,
        "certificate_rotations": rotations,
        "rss_first_sample_mb": round(rss[0], 1),
        "rss_after_warmup_mb": round(statistics.mean(head), 1),
        "rss_end_mb": round(statistics.mean(tail), 1),
        "rss_max_mb": round(max(rss), 1),
        "rss_growth": round(statistics.mean(tail) / statistics.mean(head) - 1, 3),
        "rss_series_mb": [round(value) for value in rss],
    }


if __name__ == "__main__":
    raise SystemExit(main())
