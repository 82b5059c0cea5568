"""A scan run with its records: built as findings arrive, written to the audit journal in batches.

The journal is the server's own (or one opened by `gpu-webhook scan --audit-log`), so
scan records join the same hash chain as decisions. Records go in batches of BATCH:
each batch is one write and one fsync, and no batch holds the journal's lock for
long, so admission decisions written meanwhile wait at most one batch.
"""

from __future__ import annotations

import datetime as dt
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from webhook.audit.chain import Record
from webhook.audit.recorder import default_instance
from webhook.policy.model import PolicySet
from webhook.review import ReviewSettings
from webhook.scan.judge import Judgement
from webhook.scan.records import object_record, summary_record
from webhook.scan.reports import Entry, entry
from webhook.scan.run import ScanSummary, run_scan
from webhook.scan.sources import Snapshot

BATCH = 64
RecordSink = Callable[[Sequence[Mapping[str, Any]]], object]
Clock = Callable[[], dt.datetime]


def utc_now() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


@dataclass
class ScanOutcome:
    summary: ScanSummary
    summary_record: Record
    # Object records, kept only when asked for (the CLI prints them; the server streams them away).
    objects: list[Record] = field(default_factory=list)
    # What policy reports need of each object with findings, kept only when asked for.
    entries: list[Entry] = field(default_factory=list)


class ScanLog:
    def __init__(
        self,
        sink: RecordSink | None,
        *,
        scan_id: str,
        policy_version: str,
        instance: str,
        clock: Clock,
        keep: bool,
        reports: bool = False,
    ) -> None:
        self._sink = sink
        self._scan_id = scan_id
        self._policy_version = policy_version
        self._instance = instance
        self._clock = clock
        self._keep = keep
        self._reports = reports
        self._pending: list[Record] = []
        self.kept: list[Record] = []
        self.entries: list[Entry] = []

    def add(self, judgement: Judgement) -> None:
        now = self._clock()
        record = object_record(
            judgement,
            scan_id=self._scan_id,
            now=now,
            instance=self._instance,
            policy_version=self._policy_version,
        )
        if self._keep:
            self.kept.append(record)
        if self._reports:
            self.entries.append(entry(record, judgement.object, now))
        if self._sink is not None:
            self._pending.append(record)
            if len(self._pending) >= BATCH:
                self.flush()

    def finish(self, summary: ScanSummary) -> Record:
        record = summary_record(summary, now=self._clock(), instance=self._instance)
        if self._sink is not None:
            self._pending.append(record)
            self.flush()
        return record

    def flush(self) -> None:
        if self._sink is not None and self._pending:
            batch, self._pending = self._pending, []
            self._sink(batch)


def scan_once(
    snapshot: Snapshot,
    policies: PolicySet,
    settings: ReviewSettings,
    *,
    sink: RecordSink | None = None,
    keep: bool = False,
    reports: bool = False,
    keep_going: Callable[[], bool] = lambda: True,
    instance: str | None = None,
    clock: Clock = utc_now,
) -> ScanOutcome:
    scan_id = uuid.uuid4().hex[:16]
    log = ScanLog(
        sink,
        scan_id=scan_id,
        policy_version=policies.version,
        instance=instance or default_instance(),
        clock=clock,
        keep=keep,
        reports=reports,
    )
    summary = run_scan(
        snapshot, policies, settings, scan_id=scan_id, on_finding=log.add, keep_going=keep_going
    )
    return ScanOutcome(summary, log.finish(summary), log.kept, log.entries)
