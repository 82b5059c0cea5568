"""Build the decision record: the facts of one admission decision, and nothing the log must not keep.

Pure: the clock, the instance id and the policy version are passed in. The writer
adds `seq`, `prev` and `hash`. The schema is versioned by `v` (docs/audit.md).
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import itertools
from collections.abc import Callable, Mapping
from typing import Any

from webhook.audit.chain import SCHEMA_VERSION, Record
from webhook.audit.redact import Scrubber, clip, object_digest, own_annotations, sensitive_values
from webhook.decision import Decision, Finding
from webhook.types import AdmissionRequest, Endpoint, KubeObject, PatchOperation

MAX_GROUPS = 64
MAX_FINDINGS = 256
MAX_NAME_CHARS = 256
_JSON_DEPTH = 6
_JSON_ITEMS = 100


def rfc3339(moment: dt.datetime) -> str:
    return moment.astimezone(dt.UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def envelope(record_type: str, *, now: dt.datetime, instance: str, policy_version: str) -> Record:
    """The fields every record type shares; a `scan` record starts from this too."""
    return {
        "v": SCHEMA_VERSION,
        "type": record_type,
        "time": rfc3339(now),
        "instance": instance,
        "policyVersion": policy_version,
    }


def subject(obj: Mapping[str, Any] | None, *, namespace: str = "", name: str = "") -> Record:
    """Which object a record is about: its identity and a digest, never its content."""
    metadata = obj.get("metadata") if obj is not None else None
    meta: Mapping[str, Any] = metadata if isinstance(metadata, dict) else {}
    fields: Record = {
        "namespace": clip(namespace or _text(meta.get("namespace")), MAX_NAME_CHARS),
        "name": clip(name or _text(meta.get("name")), MAX_NAME_CHARS),
        "objectDigest": object_digest(obj),
    }
    if not fields["name"] and _text(meta.get("generateName")):
        fields["generateName"] = clip(_text(meta.get("generateName")), MAX_NAME_CHARS)
    annotations = own_annotations(obj)
    if annotations:
        fields["annotations"] = annotations
    return fields


def decision_record(
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
    scrub = _scrubber_for(request, decision)
    user = request.get("userInfo", {})
    record = envelope("decision", now=now, instance=instance, policy_version=policy_version)
    record.update(
        endpoint=endpoint,
        uid=request["uid"],
        operation=request["operation"],
        kind=request["kind"]["kind"],
        apiVersion=_api_version(request),
        resource=request.get("resource", {}).get("resource", ""),
        user=clip(user.get("username", ""), MAX_NAME_CHARS),
        groups=[clip(group, MAX_NAME_CHARS) for group in user.get("groups", [])[:MAX_GROUPS]],
        dryRun=bool(request.get("dryRun", False)),
    )
    record.update(subject(obj, namespace=request.get("namespace", ""), name=request.get("name", "")))
    record.update(verdict(decision, scrub))
    gpus = _admitted_gpus(request, endpoint, decision)
    if gpus:
        record["gpus"] = gpus
    record["latencyMs"] = round(latency_ms, 3)
    if request.get("subResource"):
        record["subResource"] = request.get("subResource")
    return record


def verdict(decision: Decision, scrub: Callable[[str], str]) -> Record:
    """What was decided and why, with every free text scrubbed."""
    fields: Record = {
        "allowed": decision.allowed,
        "decision": outcome(decision),
        "code": decision.code,
        "findings": [_finding(f, scrub) for f in decision.findings[:MAX_FINDINGS]],
        "patch": [_patched_path(op) for op in decision.patch],
        "sharingMode": decision.sharing_mode,
    }
    if not decision.allowed:
        fields["message"] = scrub(decision.message)
    if decision.warnings:
        own = decision.own_warnings
        fields["warnings"] = [clip(w) if w in own else scrub(w) for w in decision.warnings]
    if decision.audit_annotations:
        fields["auditAnnotations"] = {k: scrub(v) for k, v in decision.audit_annotations.items()}
    quota = getattr(decision, "quota", None)
    if quota is not None:
        fields["quota"] = json_safe(quota, scrub)
    if decision.unreviewed:
        fields["unreviewed"] = decision.unreviewed
    return fields


def outcome(decision: Decision) -> str:
    if not decision.allowed:
        return "denied"
    warned = decision.warnings or any(f.action == "warn" for f in decision.findings)
    return "warned" if warned else "allowed"


def json_safe(value: Any, scrub: Callable[[str], str], depth: int = 0) -> Any:
    """A bounded JSON rendering of whatever the quota engine reports; strings are scrubbed."""
    if depth > _JSON_DEPTH:
        return None
    # The quota engine reports plain dicts, lists and scalars: settled by exact type first,
    # since the general checks below (is_dataclass, ABC isinstance) cost several times more.
    kind = type(value)
    if kind is str:
        return scrub(value)
    if value is None or kind is bool or kind is int:
        return value
    if kind is dict:
        items = value.items() if len(value) <= _JSON_ITEMS else itertools.islice(value.items(), _JSON_ITEMS)
        return {k if type(k) is str else str(k): json_safe(v, scrub, depth + 1) for k, v in items}
    if kind is list:
        return [json_safe(v, scrub, depth + 1) for v in value[:_JSON_ITEMS]]
    return _any_json_safe(value, scrub, depth)


def _any_json_safe(value: Any, scrub: Callable[[str], str], depth: int) -> Any:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        value = {f.name: getattr(value, f.name) for f in dataclasses.fields(value)}
    if isinstance(value, Mapping):
        items = list(value.items())[:_JSON_ITEMS]
        return {str(k): json_safe(v, scrub, depth + 1) for k, v in items}
    if isinstance(value, list | tuple | set | frozenset):
        return [json_safe(v, scrub, depth + 1) for v in list(value)[:_JSON_ITEMS]]
    if value is None or isinstance(value, bool | int):
        return value
    if isinstance(value, float):
        return round(value, 4)
    if isinstance(value, str):
        return scrub(value)
    try:
        return round(float(value), 4)
    except (TypeError, ValueError):
        return scrub(str(value))


def _scrubber_for(request: AdmissionRequest, decision: Decision) -> Callable[[str], str]:
    """Walking the objects costs time, so only decisions that carry policy-written free text pay.

    Audit annotations and quota figures are ours (policy and constraint names, amounts), and
    so are the warnings review() marked as its own (Decision.own_warnings); the mutated object
    holds no secret the submitted one did not. None of them needs the walk.
    """
    policy_warnings = any(w not in decision.own_warnings for w in decision.warnings)
    if not (decision.message or policy_warnings or decision.findings):
        return clip
    objects: list[KubeObject | None] = [request.get("object"), request.get("oldObject")]
    return Scrubber(sensitive_values(objects))


def _finding(finding: Finding, scrub: Callable[[str], str]) -> Record:
    return {"policy": finding.policy, "action": finding.action, "message": scrub(finding.message)}


def _patched_path(operation: PatchOperation) -> Record:
    """The path an operation touched, never the value it wrote."""
    fields: Record = {"op": operation["op"], "path": operation["path"]}
    if "from" in operation:
        fields["from"] = operation["from"]
    return fields


def _admitted_gpus(request: AdmissionRequest, endpoint: Endpoint, decision: Decision) -> float | None:
    """GPU-equivalents a pod creation was admitted with, whether or not a quota applies: the
    count review() read once for every rule (its default accounting), so reports need no quota
    to show usage."""
    if (
        endpoint != "validate"
        or decision.gpus is None
        or request["operation"] != "CREATE"
        or request["kind"]["kind"] != "Pod"
        or request.get("subResource")
    ):
        return None
    return round(float(decision.gpus), 4)


def _api_version(request: AdmissionRequest) -> str:
    kind = request["kind"]
    return f"{kind['group']}/{kind['version']}" if kind["group"] else kind["version"]


def _text(value: Any) -> str:
    return value if isinstance(value, str) else ""
