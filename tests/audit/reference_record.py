"""The decision record as the worker used to build it: the straightforward computation, kept as
the reference the journal helper's record (webhook/audit/facts.py) is held to.

It differs from today's `decision_record` in one rule on purpose: it scrubs every warning,
while today's leaves the webhook's own warnings (Decision.own_warnings) unscanned.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable

from webhook.audit.chain import Record
from webhook.audit.record import (
    MAX_FINDINGS,
    MAX_GROUPS,
    MAX_NAME_CHARS,
    envelope,
    json_safe,
    outcome,
    subject,
)
from webhook.audit.redact import Scrubber, clip, sensitive_values
from webhook.decision import Decision
from webhook.types import AdmissionRequest, Endpoint, KubeObject


def reference_record(
    request: AdmissionRequest,
    decision: Decision,
    *,
    endpoint: Endpoint,
    latency_ms: float,
    now: dt.datetime,
    instance: str,
    policy_version: str,
) -> Record:
    obj = request.get("object") or request.get("oldObject")
    scrub = _scrubber(request, decision)
    user = request.get("userInfo", {})
    kind = request["kind"]
    record = envelope("decision", now=now, instance=instance, policy_version=policy_version)
    record.update(
        endpoint=endpoint,
        uid=request["uid"],
        operation=request["operation"],
        kind=kind["kind"],
        apiVersion=f"{kind['group']}/{kind['version']}" if kind["group"] else kind["version"],
        resource=request.get("resource", {}).get("resource", ""),
        user=clip(user.get("username", ""), MAX_NAME_CHARS),
        groups=[clip(group, MAX_NAME_CHARS) for group in user.get("groups", [])[:MAX_GROUPS]],
        dryRun=bool(request.get("dryRun", False)),
    )
    record.update(subject(obj, namespace=request.get("namespace", ""), name=request.get("name", "")))
    record.update(_verdict(decision, scrub))
    if (
        endpoint == "validate"
        and decision.gpus is not None
        and request["operation"] == "CREATE"
        and kind["kind"] == "Pod"
        and not request.get("subResource")
    ):
        gpus = round(float(decision.gpus), 4)
        if gpus:
            record["gpus"] = gpus
    record["latencyMs"] = round(latency_ms, 3)
    if request.get("subResource"):
        record["subResource"] = request.get("subResource")
    return record


def _verdict(decision: Decision, scrub: Callable[[str], str]) -> Record:
    fields: Record = {
        "allowed": decision.allowed,
        "decision": outcome(decision),
        "code": decision.code,
        "findings": [
            {"policy": f.policy, "action": f.action, "message": scrub(f.message)}
            for f in decision.findings[:MAX_FINDINGS]
        ],
        "patch": [
            {"op": op["op"], "path": op["path"], **({"from": op["from"]} if "from" in op else {})}
            for op in decision.patch
        ],
        "sharingMode": decision.sharing_mode,
    }
    if not decision.allowed:
        fields["message"] = scrub(decision.message)
    if decision.warnings:
        fields["warnings"] = [scrub(w) for w in decision.warnings]
    if decision.audit_annotations:
        fields["auditAnnotations"] = {k: scrub(v) for k, v in decision.audit_annotations.items()}
    if decision.quota is not None:
        fields["quota"] = json_safe(decision.quota, scrub)
    if decision.unreviewed:
        fields["unreviewed"] = decision.unreviewed
    return fields


def _scrubber(request: AdmissionRequest, decision: Decision) -> Callable[[str], str]:
    if not (decision.message or decision.warnings or decision.findings):
        return clip
    objects: list[KubeObject | None] = [request.get("object"), request.get("oldObject")]
    return Scrubber(sensitive_values(objects))
