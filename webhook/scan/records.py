"""`scan` records for the audit log: one per object with findings, one summary per run.

Pure. The same redaction as decision records: an object's identity and digest,
never its content; every finding's message scrubbed of the env values, Secret data
and foreign annotation values the object holds.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from typing import Any

from webhook.audit.chain import Record
from webhook.audit.record import MAX_FINDINGS, MAX_NAME_CHARS, envelope, subject
from webhook.audit.redact import Scrubber, clip, sensitive_values
from webhook.scan.judge import Judgement
from webhook.scan.run import ScanSummary

MAX_POLICIES = 1000


def object_record(
    judgement: Judgement, *, scan_id: str, now: dt.datetime, instance: str, policy_version: str
) -> Record:
    record = envelope("scan", now=now, instance=instance, policy_version=policy_version)
    kind = judgement.kind
    record.update(
        scope="object",
        scan=scan_id,
        kind=kind.kind,
        apiVersion=kind.api_version,
        operation=kind.operation,
    )
    record.update(subject(judgement.object, namespace=judgement.namespace, name=judgement.name))
    owner = controller(judgement.object)
    if owner:
        record["owner"] = owner
    scrub = Scrubber(sensitive_values([judgement.object]))
    record.update(
        allowed=judgement.allowed,
        decision=decision(judgement),
        findings=[
            {"policy": f.policy, "action": f.action, "message": scrub(f.message)}
            for f in judgement.findings[:MAX_FINDINGS]
        ],
    )
    return record


def summary_record(summary: ScanSummary, *, now: dt.datetime, instance: str) -> Record:
    record = envelope("scan", now=now, instance=instance, policy_version=summary.policy_version)
    policies = sorted(summary.violations.items())[:MAX_POLICIES]
    record.update(
        scope="summary",
        scan=summary.scan_id,
        source=clip(summary.origin, MAX_NAME_CHARS),
        complete=summary.complete,
        objects=summary.objects,
        skipped=summary.skipped,
        withFindings=summary.with_findings,
        denied=summary.denied,
        unreviewable=summary.unreviewable,
        violations=summary.by_action(),
        policies=[{"policy": p, "action": a, "violations": n} for (p, a), n in policies],
        durationMs=round(summary.seconds * 1000, 3),
    )
    return record


def decision(judgement: Judgement) -> str:
    """The word a decision record would use: denied, warned, or allowed (dryrun findings only)."""
    if judgement.denied:
        return "denied"
    return "warned" if any(f.action == "warn" for f in judgement.findings) else "allowed"


def controller(obj: Mapping[str, Any]) -> str | None:
    """`Kind/name` of the object's controller (a Pod's ReplicaSet, a Job's CronJob), to group findings."""
    metadata = obj.get("metadata")
    owners = metadata.get("ownerReferences") if isinstance(metadata, dict) else None
    for owner in owners if isinstance(owners, list) else []:
        if isinstance(owner, dict) and owner.get("controller") is True:
            kind, name = owner.get("kind"), owner.get("name")
            if isinstance(kind, str) and isinstance(name, str):
                return clip(f"{kind}/{name}", MAX_NAME_CHARS)
    return None
