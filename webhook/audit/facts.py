"""A decision's facts on their way to the journal helper, which builds its record from them.

The worker sends what review() decided, encoded once with orjson, beside the request body
it already read; the helper (journald.py) parses that body again and builds the very record
`decision_record` would have built in the worker. Only what the record keeps travels: the
patch's paths (never its values), findings up to the record's limit. Pure: bytes in and out.
"""

from __future__ import annotations

import datetime as dt
from fractions import Fraction
from typing import Any

import orjson

from webhook.audit.chain import Record
from webhook.audit.record import MAX_FINDINGS, decision_record, json_safe
from webhook.decision import Decision, Finding
from webhook.types import AdmissionRequest, Endpoint, PatchOperation

_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
_MICROSECOND = dt.timedelta(microseconds=1)


def encode_facts(
    decision: Decision,
    *,
    endpoint: Endpoint,
    latency_ms: float,
    now: dt.datetime,
    instance: str,
    policy_version: str,
) -> bytes:
    """The facts of one decision, as JSON, which `decode_record` turns into its record; TypeError
    when the quota figures hold what JSON cannot carry as it is."""
    facts: Record = {
        "endpoint": endpoint,
        "latencyMs": latency_ms,
        "time": (now - _EPOCH) // _MICROSECOND,  # exact, unlike a float timestamp
        "instance": instance,
        "policyVersion": policy_version,
        "allowed": decision.allowed,
        "code": decision.code,
        "message": decision.message,
        "warnings": decision.warnings,
        "own": [w for w in decision.warnings if w in decision.own_warnings],
        "patch": [_paths(op) for op in decision.patch],
        "annotations": decision.audit_annotations,
        "findings": [(f.policy, f.action, f.message) for f in decision.findings[:MAX_FINDINGS]],
        "sharingMode": decision.sharing_mode,
        "quota": decision.quota,
        "gpus": None if decision.gpus is None else str(decision.gpus),
        "unreviewed": decision.unreviewed,
    }
    # TypeError for what JSON cannot carry as it is (keys that are not strings, integers past 64
    # bits): the caller builds that record itself.
    return orjson.dumps(facts, default=_plain)


def decode_record(facts: bytes, request: AdmissionRequest) -> Record:
    """The decision record of `request` (parsed from the same body review() read) and its facts."""
    sent: dict[str, Any] = orjson.loads(facts)
    return decision_record(
        request,
        _decision(sent),
        endpoint=sent["endpoint"],
        latency_ms=sent["latencyMs"],
        now=_EPOCH + sent["time"] * _MICROSECOND,
        instance=sent["instance"],
        policy_version=sent["policyVersion"],
    )


def _decision(sent: dict[str, Any]) -> Decision:
    gpus = sent["gpus"]
    return Decision(
        allowed=sent["allowed"],
        code=sent["code"],
        message=sent["message"],
        warnings=tuple(sent["warnings"]),
        own_warnings=frozenset(sent["own"]),
        patch=tuple(sent["patch"]),
        audit_annotations=sent["annotations"],
        findings=tuple(Finding(policy, action, message) for policy, action, message in sent["findings"]),
        sharing_mode=sent["sharingMode"],
        quota=sent["quota"],
        gpus=None if gpus is None else Fraction(gpus),
        unreviewed=sent["unreviewed"],
    )


def _paths(operation: PatchOperation) -> PatchOperation:
    """What the record keeps of an operation (record._patched_path): never the value it wrote."""
    kept: PatchOperation = {"op": operation["op"], "path": operation["path"]}
    if "from" in operation:
        kept["from"] = operation["from"]
    return kept


def _plain(value: Any) -> Any:
    """What orjson cannot encode itself (a Fraction, a set), as json_safe renders it; the helper
    applies json_safe again, with the scrubber, so the record is the same as if built here."""
    return json_safe(value, _same)


def _same(text: str) -> str:
    return text
