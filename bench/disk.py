"""What a durable audit log costs on this machine's disk: `python bench/disk.py [--rounds K] [--seconds N]`.

Two workers with everything on scale less with `--audit-fsync batch` than with `never`. This
splits that loss. It runs the two-worker full `/mutate` server in batch mode and reads its
fsync rate from `/metrics`. Then it runs the same server in `never` mode, alone and next to an
unrelated process that appends to a file of its own and fsyncs it at that rate, in
interleaved rounds. What the unrelated fsyncs take from `never` is the disk's price for that
many fsyncs, whichever process asks for them. The rest of batch mode's loss is ours: holding
each response until its batch is durable, and handing the fsync off.
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import platform
import re
import ssl
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from dataclasses import asdict, dataclass
from pathlib import Path

import orjson

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench import loadgen  # noqa: E402
from bench.run import Server, _await_ready, _await_workers  # noqa: E402
from bench.scenarios import review, training_pod  # noqa: E402
from bench.setups import full_policies  # noqa: E402
from webhook import certs  # noqa: E402

WORKERS = 2
CONNECTIONS = 16
LINE = b"x" * 1500 + b"\n"  # about one decision record
_BATCH = re.compile(r"^gpu_webhook_audit_batch_records_(sum|count) ([\d.e+]+)$", re.MULTILINE)


@dataclass(frozen=True)
class Figures:
    batch_rps: list[float]
    records_per_fsync: list[float]
    never_rps: list[float]
    never_with_writer_rps: list[float]

    @property
    def fsyncs_per_second(self) -> float:
        return statistics.median(r / n for r, n in zip(self.batch_rps, self.records_per_fsync, strict=True))

    @property
    def batch_loss(self) -> float:
        return 1 - statistics.median(self.batch_rps) / statistics.median(self.never_rps)

    @property
    def writer_loss(self) -> float:
        return 1 - statistics.median(self.never_with_writer_rps) / statistics.median(self.never_rps)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3, help="of batch, never, and never with the writer")
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "results")
    parser.add_argument("--writer", nargs=3, metavar=("RATE", "SECONDS", "FILE"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.writer:
        rate, seconds, path = args.writer
        write_and_fsync(float(rate), float(seconds), Path(path))
        return 0
    with tempfile.TemporaryDirectory() as tmp:
        figures = measure(Path(tmp), args.rounds, args.seconds)
    report(figures)
    save(args.out, figures, args)
    return 0


def write_and_fsync(rate: float, seconds: float, path: Path) -> None:
    """The unrelated process: append a record-sized line and fsync, `rate` times a second."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    try:
        started, done = time.monotonic(), 0
        while time.monotonic() - started < seconds:
            os.write(fd, LINE)
            os.fsync(fd)
            done += 1
            time.sleep(max(0.0, started + done / rate - time.monotonic()))
    finally:
        os.close(fd)


def measure(work: Path, rounds: int, seconds: float) -> Figures:
    """Interleaved rounds of: batch mode, then never alone, then never next to the writer fsyncing
    at the rate that round's batch mode did."""
    certs.generate(work / "certs", "gpu-webhook", "gpu-system", days=2)
    body = review(training_pod("bench-mig"))
    batch, per_fsync, never, with_writer = [], [], [], []
    for number in range(rounds):
        with _server(work, "batch") as server:
            batch.append(_load(server, body, seconds))
            per_fsync.append(_records_per_batch(server.port))
        with _server(work, "never") as server:
            never.append(_load(server, body, seconds))
            rate = batch[-1] / per_fsync[-1]
            writer = subprocess.Popen(
                [sys.executable, __file__, "--writer", str(rate), str(seconds + 1), str(work / f"w{number}")]
            )
            with_writer.append(_load(server, body, seconds))
            writer.wait()
    return Figures(batch, per_fsync, never, with_writer)


class _server:
    """The judged full setup with two workers and the given fsync mode, as a context manager."""

    def __init__(self, work: Path, fsync: str) -> None:
        options = list(full_policies(work))
        options[options.index("--audit-fsync") + 1] = fsync
        self.command = [sys.executable, "-m", "webhook", "serve", "--port", "0"]
        self.command += ["--cert-dir", str(work / "certs"), "--workers", str(WORKERS), *options]
        self.log = work / f"server-{fsync}.log"

    def __enter__(self) -> Server:
        self.server = Server(self.command, self.log)
        _await_ready(self.server)
        _await_workers(self.server, WORKERS)
        return self.server

    def __exit__(self, *_: object) -> None:
        self.server.stop()


def _load(server: Server, body: bytes, seconds: float) -> float:
    url = f"https://127.0.0.1:{server.port}/mutate"
    loadgen.run(url, body, 1.0, CONNECTIONS)  # warm-up
    load = loadgen.run(url, body, seconds, CONNECTIONS)
    if load.errors:
        raise RuntimeError(f"{load.errors} failed requests; see {server.log}")
    return load.requests_per_second


def _records_per_batch(port: int) -> float:
    """Mean records per fsync, from the batch histogram. Each fresh connection may reach either
    worker; their loads are alike, so the mean over a few scrapes is the mean of both."""
    context = ssl.create_default_context()
    context.check_hostname, context.verify_mode = False, ssl.CERT_NONE
    records = batches = 0.0
    for _ in range(6):
        with urllib.request.urlopen(f"https://127.0.0.1:{port}/metrics", context=context) as reply:
            found = dict(_BATCH.findall(reply.read().decode()))
        records += float(found["sum"])
        batches += float(found["count"])
    return records / batches


def report(f: Figures) -> None:
    median = statistics.median
    print(f"two workers, full /mutate, {CONNECTIONS} connections; medians of {len(f.never_rps)} rounds")
    print(
        f"  --audit-fsync batch: {median(f.batch_rps):7.0f} req/s, {f.fsyncs_per_second:.0f} fsyncs/s, "
        f"{median(f.records_per_fsync):.1f} records a fsync"
    )
    print(f"  --audit-fsync never: {median(f.never_rps):7.0f} req/s")
    print(f"  never, next to a process fsyncing as often: {median(f.never_with_writer_rps):7.0f} req/s")
    print(f"batch mode loses {f.batch_loss:.0%} of never; unrelated fsyncs alone take {f.writer_loss:.0%}")


def save(out: Path, figures: Figures, args: argparse.Namespace) -> None:
    out.mkdir(parents=True, exist_ok=True)
    now = dt.datetime.now(dt.UTC)
    document = {
        "date": now.isoformat(timespec="seconds"),
        "machine": {"cpus": os.cpu_count(), "platform": platform.platform()},
        "settings": {"rounds": args.rounds, "seconds": args.seconds, "connections": CONNECTIONS},
        "figures": asdict(figures),
        "fsyncs_per_second": figures.fsyncs_per_second,
        "batch_loss": figures.batch_loss,
        "writer_loss": figures.writer_loss,
    }
    path = out / f"disk-{now:%Y-%m-%dT%H%M%S}.json"
    path.write_bytes(orjson.dumps(document, option=orjson.OPT_INDENT_2))
    print(f"wrote {path.relative_to(ROOT) if path.is_relative_to(ROOT) else path}")


if __name__ == "__main__":
    raise SystemExit(main())
