"""The real server with --audit-log: one record per decision, written before the reply, even under SIGKILL."""

from __future__ import annotations

import http.client
import threading
from pathlib import Path
from typing import Any

import orjson
import pytest

from tests.conftest import BUNDLED_POLICIES
from tests.support.apiserver import check_reply
from tests.support.reviews import load_example, make_review
from tests.support.server import ServerProcess, start_server
from tests.support.tlsclient import JSON_HEADERS
from webhook.audit.chain import Record
from webhook.audit.files import expand, read_file
from webhook.audit.signing import generate, load_public
from webhook.audit.verify import verify

CANARY = "canary-9f2e-db-password"


def serve(cert_dir: Path, log: Path, *extra: str) -> ServerProcess:
    args = ["--cert-dir", str(cert_dir), "--policies", str(BUNDLED_POLICIES), "--audit-log", str(log), *extra]
    return start_server(args, ca_file=cert_dir / "ca.crt")


def gpu_pod_with_secret(index: int) -> dict[str, Any]:
    pod = load_example("pod-gpu-training.yaml")
    pod["metadata"]["name"] = f"trainer-{index}"
    container = pod["spec"]["containers"][0]
    container["env"] = [*container.get("env", []), {"name": "DB_PASSWORD", "value": CANARY}]
    container["envFrom"] = [{"secretRef": {"name": "db-creds"}}]
    pod["metadata"].setdefault("annotations", {})["vault.example.com/token"] = CANARY
    return pod


def every_record(log: Path) -> list[Record]:
    return [orjson.loads(line.data) for path in expand([log]) for line in read_file(path) if line.complete]


def logged(log: Path) -> list[Record]:
    """The decision records (each worker also writes a `start` record when it opens the log)."""
    return [record for record in every_record(log) if record["type"] == "decision"]


@pytest.fixture
def log(tmp_path: Path) -> Path:
    return tmp_path / "audit" / "decisions.log"


def _journal_helpers(server: ServerProcess) -> int:
    """The server's running journal helper processes (webhook/audit/journald.py)."""
    found = 0
    for status in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = status.read_text().rsplit(")", 1)[1].split()
            command = (status.parent / "cmdline").read_bytes()
        except OSError:  # the process has gone
            continue
        if b"webhook.audit.journald" in command and int(fields[1]) == server.process.pid:
            found += 1
    return found


WRITERS = pytest.mark.parametrize("writer", ["helper", "worker"])


@WRITERS
def test_one_record_per_decision_with_dry_run_marked(cert_dir: Path, log: Path, writer: str) -> None:
    server = serve(cert_dir, log, "--audit-writer", writer)
    sent: list[tuple[str, str, bool]] = []
    try:
        for index, (endpoint, dry_run) in enumerate(
            [("mutate", False), ("validate", False), ("validate", True)]
        ):
            review = make_review(gpu_pod_with_secret(index), dry_run=dry_run)
            check_reply(review, server.client().post_json(f"/{endpoint}", review), endpoint)
            sent.append((review["request"]["uid"], endpoint, dry_run))
        assert server.client().request("POST", "/validate", b"{bad", JSON_HEADERS).status == 400
        assert _journal_helpers(server) == (1 if writer == "helper" else 0)
    finally:
        server.stop_gracefully()
    records = logged(log)
    assert [(r["uid"], r["endpoint"], r["dryRun"]) for r in records] == sent
    assert all(r["namespace"] == "ml-team" and r["user"] == "alice@example.com" for r in records)
    assert CANARY not in log.read_text()
    assert verify(expand([log]), from_genesis=True).ok


@WRITERS
def test_every_acknowledged_decision_survives_sigkill_under_load(
    cert_dir: Path, log: Path, writer: str
) -> None:
    server = serve(cert_dir, log, "--audit-writer", writer)
    acknowledged: list[str] = []
    lock = threading.Lock()
    enough = threading.Event()

    def load(worker: int) -> None:
        client = server.client()
        for index in range(100_000):
            review = make_review(gpu_pod_with_secret(index))
            endpoint = "/validate" if index % 2 else "/mutate"
            try:
                reply = client.keepalive("POST", endpoint, orjson.dumps(review), JSON_HEADERS)
            except (OSError, http.client.HTTPException):
                return
            if reply.status == 200:
                with lock:
                    acknowledged.append(orjson.loads(reply.body)["response"]["uid"])
                    if len(acknowledged) >= 600:
                        enough.set()

    threads = [threading.Thread(target=load, args=(n,), daemon=True) for n in range(8)]
    for thread in threads:
        thread.start()
    assert enough.wait(timeout=120), server.output()
    server.process.kill()
    server.process.wait(timeout=30)
    for thread in threads:
        thread.join(timeout=30)

    with lock:
        acked = set(acknowledged)
    uids = {r["uid"] for r in logged(log)}
    assert acked <= uids, f"{len(acked - uids)} acknowledged decisions are missing from the log"
    assert CANARY not in log.read_text(errors="replace")

    restarted = serve(cert_dir, log)
    review = make_review(gpu_pod_with_secret(0))
    check_reply(review, restarted.client().post_json("/validate", review), "validate")
    restarted.stop_gracefully()
    result = verify(expand([log]), from_genesis=True)
    assert result.ok, result.describe()
    assert result.records >= len(acked) + 1


@pytest.mark.parametrize(("mode", "allowed"), [("closed", False), ("open", True)])
def test_an_unwritable_log_follows_the_failure_mode(
    cert_dir: Path, tmp_path: Path, mode: str, allowed: bool
) -> None:
    log = tmp_path / "audit.log"
    log.symlink_to("/dev/full")
    server = serve(cert_dir, log, "--audit-failure-mode", mode)
    try:
        for endpoint in ("validate", "mutate"):
            review = make_review(load_example("pod-gpu-training.yaml"))
            response = check_reply(review, server.client().post_json(f"/{endpoint}", review), endpoint)
            assert response["allowed"] is allowed
            if not allowed:
                assert response["status"]["code"] == 500
                assert "audit log" in response["status"]["message"]
        advisory = server.client().post_json("/validate-advisory", make_review(load_example("pod-cpu.yaml")))
        if allowed:
            assert advisory.status == 200 and advisory.json()["response"]["allowed"] is True  # type: ignore[index]
        else:
            assert (
                advisory.status == 503
            )  # never a denial there: the call fails and failurePolicy Ignore applies
        metrics = server.client().request("GET", "/metrics").body.decode()
        assert "gpu_webhook_audit_write_failures_total 3.0" in metrics
    finally:
        server.stop_gracefully()


def test_records_are_copied_to_stdout(cert_dir: Path, log: Path) -> None:
    server = serve(cert_dir, log, "--audit-stdout")
    try:
        review = make_review(load_example("pod-cpu.yaml"))
        server.client().post_json("/validate", review)
        uid = review["request"]["uid"]
        copied = server.wait_for_log(lambda e: e.get("type") == "decision" and e.get("uid") == uid)
    finally:
        server.stop_gracefully()
    assert copied == logged(log)[0]


def test_workers_share_one_chain(cert_dir: Path, log: Path) -> None:
    server = serve(cert_dir, log, "--workers", "2")
    try:
        for _ in range(2):
            server.wait_for_log(lambda e: e.get("msg") == "Application startup complete.")
        for _ in range(30):
            review = make_review(load_example("pod-cpu.yaml"))
            check_reply(review, server.client().post_json("/validate", review), "validate")
    finally:
        server.stop()
    result = verify(expand([log]), from_genesis=True)
    assert result.ok, result.describe()
    assert result.records == 30 + 2  # and a `start` record per worker
    # Each worker accepts on its own socket, and every request here is a new connection: the
    # kernel spreads them, so both workers write (all 30 on one has odds of 2 in a billion).
    assert len({r["instance"] for r in logged(log)}) == 2
    starts = [r for r in every_record(log) if r["type"] == "start"]
    assert {r["instance"] for r in starts} == {r["instance"] for r in logged(log)}


def test_signed_checkpoints_from_a_running_server(cert_dir: Path, log: Path, tmp_path: Path) -> None:
    private, public = generate(tmp_path / "keys")
    server = serve(cert_dir, log, "--audit-signing-key", str(private), "--audit-checkpoint-records", "5")
    try:
        for _ in range(12):
            review = make_review(load_example("pod-cpu.yaml"))
            check_reply(review, server.client().post_json("/validate", review), "validate")
    finally:
        server.stop_gracefully()
    result = verify(expand([log]), public_key=load_public(public), from_genesis=True)
    assert result.ok, result.describe()
    assert result.signatures >= 3
    assert result.last_signed_seq == result.last_seq, "a graceful stop signs the tail"
