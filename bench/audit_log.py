"""How fast the audit tools are on a large log: `python -m bench.audit_log [RECORDS] [DIR]`.

Writes RECORDS decision records (default 1,000,000) with the real journal, then
times `audit verify`, `query`, `summary` and `tail` through the real CLI.
"""

from __future__ import annotations

import datetime as dt
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from webhook.audit.journal import Journal, JournalOptions
from webhook.audit.record import decision_record
from webhook.decision import Decision, Finding

BATCH = 1000


def build(path: Path, count: int) -> float:
    journal = Journal(JournalOptions(path=path, fsync="batch"))
    journal.open()
    start = dt.datetime(2025, 1, 1, tzinfo=dt.UTC)
    denied = Decision(
        allowed=False, code=403, message="no", findings=(Finding("no-privileged", "deny", "no"),)
    )
    began = time.perf_counter()
    batch = []
    for i in range(count):
        request = {
            "uid": f"uid-{i}",
            "kind": {"group": "", "version": "v1", "kind": "Pod"},
            "namespace": f"team-{i % 50}",
            "name": f"pod-{i}",
            "operation": "CREATE",
            "userInfo": {"username": f"user-{i % 200}", "groups": ["system:authenticated"]},
            "object": {"kind": "Pod", "metadata": {"name": f"pod-{i}"}},
        }
        decision = denied if i % 20 == 0 else Decision(allowed=True)
        batch.append(
            decision_record(
                request,  # type: ignore[arg-type]
                decision,
                endpoint="validate",
                latency_ms=0.2 + (i % 100) / 100,
                now=start + dt.timedelta(seconds=i),
                instance="bench/1",
                policy_version="bench",
            )
        )
        if len(batch) == BATCH:
            journal.append(batch)
            batch = []
    if batch:
        journal.append(batch)
    journal.close()
    return time.perf_counter() - began


def timed(*args: str) -> float:
    began = time.perf_counter()
    subprocess.run([sys.executable, "-m", "webhook", "audit", *args], check=True, stdout=subprocess.DEVNULL)
    return time.perf_counter() - began


def main() -> None:
    count = int(sys.argv[1]) if len(sys.argv) > 1 else 1_000_000
    directory = Path(sys.argv[2]) if len(sys.argv) > 2 else Path(tempfile.mkdtemp())
    log = directory / "audit.log"
    seconds = build(log, count)
    print(f"write {count} records (batches of {BATCH}): {seconds:.1f} s, {log.stat().st_size >> 20} MiB")
    for args in (
        ["verify", str(log)],
        ["query", str(log), "--namespace", "team-7", "--decision", "denied", "-o", "json"],
        ["query", str(log), "--user", "user-*", "--limit", "10"],
        ["query", str(log), "--uid", "uid-999999", "-o", "json"],
        ["summary", str(log)],
        ["tail", str(log), "-n", "20"],
        ["report", str(log), "--out", str(directory / "report.html")],
    ):
        print(f"audit {' '.join(a if '/' not in a else 'LOG' for a in args)}: {timed(*args):.2f} s")


if __name__ == "__main__":
    main()
