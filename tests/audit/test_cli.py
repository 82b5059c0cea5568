"""`gpu-webhook audit …` through its real entry point, `python -m webhook`."""

from __future__ import annotations

import csv
import io
import os
import queue
import subprocess
import sys
import threading
from pathlib import Path

import orjson
import pytest

from tests.audit.logs import lines, numbered, records, rewrite, write_log
from tests.audit.sample import SAMPLE_COUNTS, sample
from tests.support.cli import gpu_webhook
from webhook.audit.chain import line_of, record_hash
from webhook.audit.checkpoint import Checkpointer
from webhook.audit.journal import Journal, JournalOptions
from webhook.audit.signing import SigningKey
from webhook.cli import build_parser


def audit(*args: str) -> subprocess.CompletedProcess[str]:
    return gpu_webhook("audit", *args)


@pytest.fixture(scope="module")
def log(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("cli") / "audit.log"
    write_log(path, sample(), batch=4)
    return path


def uids(*args: str) -> list[str]:
    result = audit(*args, "-o", "json")
    assert result.returncode == 0, result.stderr
    return [r["uid"] for r in orjson.loads(result.stdout)]


QUERIES: list[tuple[list[str], list[str]]] = [
    (["--namespace", "team-b"], ["priv-0", "priv-1", "priv-2", "quota-0"]),
    (["--namespace", "team-[bc]", "--decision", "allowed"], ["deploy-0", "dry-0"]),
    (["--user", "bob@example.com", "--policy", "gpu-quota"], ["quota-0"]),
    (["--decision", "denied"], ["priv-0", "priv-1", "priv-2", "quota-0"]),
    (["--decision", "warned"], ["warn-0", "warn-1"]),
    (["--policy", "no-*"], ["priv-0", "priv-1", "priv-2"]),
    (["--kind", "Deployment"], ["deploy-0"]),
    (["--uid", "warn-1"], ["warn-1"]),
    (["--endpoint", "mutate"], ["mutate-0", "mutate-1", "mutate-2"]),
    (
        ["--since", "2025-03-01T12:11:00Z", "--until", "2025-03-01T12:21:00Z"],
        ["priv-1", "priv-2", "quota-0", "warn-0"],
    ),
    (["--since", "2025-03-01T12:42:00Z", "--namespace", "team-c"], ["dry-0"]),
    (["--user", "nobody"], []),
]


@pytest.mark.parametrize(("filters", "expected"), QUERIES, ids=[" ".join(q[0]) for q in QUERIES])
def test_query_filters(log: Path, filters: list[str], expected: list[str]) -> None:
    assert uids("query", str(log), *filters) == expected


def test_query_csv_and_table(log: Path) -> None:
    result = audit("query", str(log), "--decision", "denied", "-o", "csv")
    rows = list(csv.DictReader(io.StringIO(result.stdout)))
    assert [r["uid"] for r in rows] == ["priv-0", "priv-1", "priv-2", "quota-0"]
    assert rows[-1]["policies"] == "gpu-quota"
    assert rows[-1]["message"] == "GPU quota exceeded in namespace team-b"
    table = audit("query", str(log), "--user", "carol@example.com").stdout.splitlines()
    assert table[0].split()[:3] == ["TIME", "ENDPOINT", "DECISION"]
    assert len(table) == 3 and "consider a MIG profile" in table[1]


def test_query_jsonl_and_limit(log: Path) -> None:
    result = audit("query", str(log), "-o", "jsonl", "--limit", "2")
    assert [orjson.loads(line)["uid"] for line in result.stdout.splitlines()] == ["allow-0", "allow-1"]


def test_summary_counts(log: Path) -> None:
    result = audit("summary", str(log), "-o", "json")
    assert result.returncode == 0, result.stderr
    summary = orjson.loads(result.stdout)
    assert summary["records"] == 18
    assert summary["decisions"] == SAMPLE_COUNTS
    assert summary["deniedByPolicy"] == {"no-privileged": 3, "gpu-quota": 1}
    assert summary["sharingModes"] == {"mig": 2, "timeslice": 1}
    assert summary["denialsByRule"][0] == {
        "rule": "no-privileged",
        "count": 3,
        "examples": ["privileged containers are not allowed"],
    }
    assert summary["latencyMs"] == {"p50": 1.0, "p99": 50.0}
    assert summary["gpusAdmittedByNamespace"] == {"team-a": 0.5, "team-c": 2.0}
    text = audit("summary", str(log)).stdout
    assert "p50 1.000 ms  p99 50.000 ms" in text
    assert "privileged containers are not allowed" in text


def test_verify_passes_then_names_an_edited_record(tmp_path: Path, log: Path) -> None:
    ok = audit("verify", str(log))
    assert ok.returncode == 0, ok.stdout + ok.stderr
    assert ok.stdout.startswith("OK: 18 records")
    copy = tmp_path / "audit.log"
    data = lines(log)
    record = orjson.loads(data[9])
    record["allowed"] = True
    data[9] = line_of(record)
    rewrite(copy, data)
    bad = audit("verify", str(copy))
    assert bad.returncode == 1
    assert f"{copy}:10 (seq 10): edited" in bad.stdout


def test_tail_shows_the_last_records(log: Path) -> None:
    result = audit("tail", str(log), "-n", "3")
    assert [orjson.loads(line)["uid"] for line in result.stdout.splitlines()] == [
        "deploy-0",
        "gpus-a",
        "dry-0",
    ]
    denied = audit("tail", str(log), "-n", "2", "--decision", "denied", "-o", "json")
    assert [r["uid"] for r in orjson.loads(denied.stdout)] == ["priv-2", "quota-0"]


def test_tail_follow_prints_new_records(tmp_path: Path) -> None:
    log = tmp_path / "audit.log"
    write_log(log, numbered(2))
    process = subprocess.Popen(
        [sys.executable, "-m", "webhook", "audit", "tail", "-f", "-n", "1", str(log)],
        stdout=subprocess.PIPE,
        text=True,
    )
    out: queue.Queue[str] = queue.Queue()

    def pump() -> None:
        for line in process.stdout or []:
            out.put(line)

    threading.Thread(target=pump, daemon=True).start()
    try:
        assert orjson.loads(out.get(timeout=30))["uid"] == "uid-1"
        journal = Journal(JournalOptions(path=log))
        journal.open()
        journal.append(numbered(1, namespace="new"))
        journal.close()
        follow = orjson.loads(out.get(timeout=30))
        assert (follow["uid"], follow["namespace"], follow["seq"]) == ("uid-0", "new", 3)
    finally:
        process.kill()
        process.wait(timeout=10)


def test_signed_checkpoints_verify_with_the_public_key(tmp_path: Path) -> None:
    keys = tmp_path / "keys"
    assert audit("keygen", "--out", str(keys)).returncode == 0
    assert (keys / "audit-signing.key").stat().st_mode & 0o777 == 0o600
    log = tmp_path / "audit.log"
    checkpointer = Checkpointer(SigningKey.load(keys / "audit-signing.key"), every_records=10, instance="t")
    journal = Journal(JournalOptions(path=log), checkpointer=checkpointer)
    journal.open()
    for _ in range(5):
        journal.append(numbered(7))
    journal.checkpoint()
    journal.close()
    ok = audit("verify", str(log), "--public-key", str(keys / "audit-signing.pub"))
    assert ok.returncode == 0, ok.stdout
    assert "3 checkpoints verified" in ok.stdout
    checkpoints = orjson.loads(audit("query", str(log), "--type", "checkpoint", "-o", "json").stdout)
    assert [(c["seq"], c["records"]) for c in checkpoints] == [(15, 14), (30, 14), (38, 7)]

    rewritten = tmp_path / "rewritten.log"
    _rewrite_whole_chain(log, rewritten)
    assert audit("verify", str(rewritten)).returncode == 0, "the chain alone cannot catch a full rewrite"
    caught = audit("verify", str(rewritten), "--public-key", str(keys / "audit-signing.pub"))
    assert caught.returncode == 1
    assert "signature" in caught.stdout

    other = tmp_path / "other"
    audit("keygen", "--out", str(other))
    wrong = audit("verify", str(log), "--public-key", str(other / "audit-signing.pub"))
    assert wrong.returncode == 1 and "not by the given public key" in wrong.stdout


def _rewrite_whole_chain(source: Path, target: Path) -> None:
    """What an attacker without the key can do: edit a record and recompute every hash after it."""
    out = []
    prev = None
    for record in records(source):
        if record["seq"] == 3:
            record["allowed"] = False
        if prev is not None:
            record["prev"] = prev
        record["hash"] = record_hash(record)
        prev = record["hash"]
        out.append(line_of(record))
    rewrite(target, out)


def test_a_missing_log_is_a_clear_error(tmp_path: Path) -> None:
    result = audit("query", str(tmp_path / "none.log"))
    assert result.returncode == 2
    assert "no audit log" in result.stderr and "Traceback" not in result.stderr


def test_report_command_writes_the_page(tmp_path: Path, log: Path) -> None:
    out = tmp_path / "report.html"
    result = audit("report", str(log), "--out", str(out))
    assert result.returncode == 0, result.stderr
    assert "18 records" in result.stdout
    assert out.read_text().startswith("<!DOCTYPE html>")


AUDIT_FLAGS = [
    ("--audit-fsync", "AUDIT_FSYNC", "always", "audit_fsync", "always"),
    ("--audit-max-bytes", "AUDIT_MAX_BYTES", "10Mi", "audit_max_bytes", 10 * 1024 * 1024),
    ("--audit-keep", "AUDIT_KEEP", "3", "audit_keep", 3),
    ("--audit-signing-key", "AUDIT_SIGNING_KEY", "/k.pem", "audit_signing_key", Path("/k.pem")),
    ("--audit-checkpoint-records", "AUDIT_CHECKPOINT_RECORDS", "50", "audit_checkpoint_records", 50),
    ("--audit-checkpoint-seconds", "AUDIT_CHECKPOINT_SECONDS", "5", "audit_checkpoint_seconds", 5.0),
    ("--audit-failure-mode", "AUDIT_FAILURE_MODE", "open", "audit_failure_mode", "open"),
]


@pytest.mark.parametrize(("flag", "env", "value", "attribute", "parsed"), AUDIT_FLAGS)
def test_audit_serve_flags_and_environment_agree(
    monkeypatch: pytest.MonkeyPatch, flag: str, env: str, value: str, attribute: str, parsed: object
) -> None:
    assert getattr(build_parser().parse_args(["serve", flag, value]), attribute) == parsed
    monkeypatch.setenv(f"GPU_WEBHOOK_{env}", value)
    assert getattr(build_parser().parse_args(["serve"]), attribute) == parsed


def test_audit_stdout_from_flag_and_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    assert build_parser().parse_args(["serve"]).audit_stdout is False
    assert build_parser().parse_args(["serve", "--audit-stdout"]).audit_stdout is True
    monkeypatch.setenv("GPU_WEBHOOK_AUDIT_STDOUT", "true")
    assert build_parser().parse_args(["serve"]).audit_stdout is True


def test_serve_rejects_audit_options_without_a_log() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "webhook", "serve", "--audit-stdout", "--port", "0"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env={**os.environ},
    )
    assert result.returncode == 2
    assert "need --audit-log" in result.stderr
