"""Build audit logs with known content for the tests: real records, written by the real journal."""

from __future__ import annotations

import datetime as dt
import os
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

import orjson

from webhook.audit.chain import Record
from webhook.audit.journal import FsyncMode, Journal, JournalOptions
from webhook.audit.record import decision_record
from webhook.decision import Decision, Finding
from webhook.types import AdmissionRequest, Endpoint

START = dt.datetime(2025, 3, 1, 12, 0, tzinfo=dt.UTC)


def request(
    uid: str,
    *,
    namespace: str = "team-a",
    user: str = "alice@example.com",
    kind: str = "Pod",
    name: str = "trainer",
    obj: dict[str, Any] | None = None,
    dry_run: bool = False,
) -> AdmissionRequest:
    group, version = ("apps", "v1") if kind in ("Deployment", "Job") else ("", "v1")
    subject = obj or {"apiVersion": "v1", "kind": kind, "metadata": {"name": name, "namespace": namespace}}
    review: dict[str, Any] = {
        "uid": uid,
        "kind": {"group": group, "version": version, "kind": kind},
        "resource": {"group": group, "version": version, "resource": kind.lower() + "s"},
        "namespace": namespace,
        "name": name,
        "operation": "CREATE",
        "userInfo": {"username": user, "groups": ["system:authenticated"]},
        "object": subject,
        "dryRun": dry_run,
    }
    return review  # type: ignore[return-value]


def entry(
    uid: str,
    decision: Decision | None = None,
    *,
    endpoint: Endpoint = "validate",
    minute: int = 0,
    latency_ms: float = 1.0,
    **fields: Any,
) -> Record:
    return decision_record(
        request(uid, **fields),
        decision or Decision(allowed=True),
        endpoint=endpoint,
        latency_ms=latency_ms,
        now=START + dt.timedelta(minutes=minute),
        instance="test/1",
        policy_version="v-test",
    )


def denied(policy: str, message: str) -> Decision:
    return Decision(allowed=False, code=403, message=message, findings=(Finding(policy, "deny", message),))


def write_log(
    path: Path,
    entries: Iterable[Record],
    *,
    batch: int = 100,
    fsync: FsyncMode = "never",
    max_bytes: int = 0,
    keep: int = 5,
    fsync_fn: Callable[[int], None] | None = None,
) -> Journal:
    options = JournalOptions(path=path, fsync=fsync, max_bytes=max_bytes, keep=keep)
    journal = Journal(options, fsync=fsync_fn or os.fsync)
    journal.open()
    pending: list[Record] = []
    for item in entries:
        pending.append(item)
        if len(pending) >= batch:
            journal.append(pending)
            pending = []
    if pending:
        journal.append(pending)
    journal.close()
    return journal


def numbered(count: int, **fields: Any) -> list[Record]:
    return [entry(f"uid-{i}", **fields) for i in range(count)]


def lines(path: Path) -> list[bytes]:
    return path.read_bytes().splitlines(keepends=True)


def records(path: Path) -> list[Record]:
    return [orjson.loads(line) for line in lines(path)]


def rewrite(path: Path, new_lines: Sequence[bytes]) -> None:
    path.write_bytes(b"".join(new_lines))
