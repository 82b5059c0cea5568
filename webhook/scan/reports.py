"""A scan's findings as policy reports: wgpolicyk8s.io/v1alpha2 or openreports.io/v1alpha1. Pure.

One report per namespace the scan judged (PolicyReport, or Report), and one for cluster-scoped
objects (ClusterPolicyReport, or ClusterReport), each named REPORT_NAME and labelled as ours,
so that publishing replaces its own reports and no one else's. A result is one finding: the
policy that found it, the scrubbed message of the scan record (never the object, never an env
value), and a reference to the object. Clean objects get no result, as in Gatekeeper's audit,
so a report lists what fails and its summary counts those results.
"""

from __future__ import annotations

import datetime as dt
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from webhook.audit.chain import Record
from webhook.audit.redact import clip
from webhook.policy.model import PolicySet

Flavour = Literal["policyreport", "openreports"]
FLAVOURS: tuple[Flavour, ...] = ("policyreport", "openreports")
SOURCE = "gpu-webhook"
REPORT_NAME = "gpu-webhook-scan"
MANAGED_BY = "app.kubernetes.io/managed-by"
OWNED_LABELS = {MANAGED_BY: "gpu-webhook"}
OMITTED_ANNOTATION = "gpuwebhook.io/results-omitted"
# A report is one etcd object (at most ~1.5 MiB): results beyond these bounds are counted, not kept.
MAX_RESULTS = 1000
MAX_MESSAGE_CHARS = 1024
# The scan's finding actions as report results; a finding the scan could not judge is an error.
RESULT_OF_ACTION = {"deny": "fail", "warn": "warn", "dryrun": "warn"}
SEVERITY_OF_RESULT = {"fail": "high", "warn": "medium", "error": "high"}
UNREVIEWABLE = "gpu-webhook/scan"
SUMMARY_KEYS = ("pass", "fail", "warn", "error", "skip")


@dataclass(frozen=True)
class ReportApi:
    group: str
    version: str
    kind: str
    cluster_kind: str
    plural: str
    cluster_plural: str

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}"

    def resource(self, namespace: str) -> str:
        return self.plural if namespace else self.cluster_plural


APIS: Mapping[Flavour, ReportApi] = {
    "policyreport": ReportApi(
        "wgpolicyk8s.io",
        "v1alpha2",
        "PolicyReport",
        "ClusterPolicyReport",
        "policyreports",
        "clusterpolicyreports",
    ),
    "openreports": ReportApi(
        "openreports.io", "v1alpha1", "Report", "ClusterReport", "reports", "clusterreports"
    ),
}


@dataclass(frozen=True)
class Entry:
    """What a report needs of one judged object with findings: its reference and scrubbed findings."""

    api_version: str
    kind: str
    namespace: str  # "" for cluster-scoped objects (a Namespace)
    name: str
    uid: str
    findings: tuple[Mapping[str, Any], ...]  # the scan record's: policy, action, scrubbed message
    time: dt.datetime


def entry(record: Record, obj: Mapping[str, Any], now: dt.datetime) -> Entry:
    """From the object's scan record (already redacted) and the object's own uid, nothing else of it."""
    metadata = obj.get("metadata")
    uid = metadata.get("uid") if isinstance(metadata, dict) else None
    cluster_scoped = record.get("kind") == "Namespace" and record.get("apiVersion") == "v1"
    return Entry(
        api_version=str(record.get("apiVersion", "")),
        kind=str(record.get("kind", "")),
        namespace="" if cluster_scoped else str(record.get("namespace", "")),
        name=str(record.get("name", "")),
        uid=clip(uid, 64) if isinstance(uid, str) else "",
        findings=tuple(f for f in record.get("findings") or () if isinstance(f, dict)),
        time=now,
    )


def build_reports(
    entries: Iterable[Entry],
    flavour: Flavour,
    *,
    namespaces: Iterable[str] = (),
    rules: Mapping[str, str] | None = None,
) -> list[dict[str, Any]]:
    """One report per namespace with entries or in `namespaces` (those judged, so that a namespace
    cleaned up gets an empty report), then the cluster report; each sorted for stable output.
    `rules`: constraint name to its template's kind, named as each result's rule."""
    grouped: dict[str, list[Entry]] = {name: [] for name in namespaces if name}
    grouped.setdefault("", [])
    for item in entries:
        grouped.setdefault(item.namespace, []).append(item)
    order = sorted(grouped, key=lambda name: (name == "", name))
    return [_report(APIS[flavour], flavour, name, grouped[name], rules or {}) for name in order]


def rules_of(policies: PolicySet) -> dict[str, str]:
    """Each constraint's template kind, by constraint name: the rule of its results."""
    constraints = policies.constraints.constraints if policies.constraints is not None else ()
    return {c.name: c.kind for c in constraints}


def _report(
    api: ReportApi, flavour: Flavour, namespace: str, entries: Sequence[Entry], rules: Mapping[str, str]
) -> dict[str, Any]:
    results = [_result(item, finding, rules) for item in entries for finding in item.findings]
    results.sort(key=lambda r: (r["resources"][0]["kind"], r["resources"][0]["name"], r["policy"]))
    kept = results[:MAX_RESULTS]
    metadata: dict[str, Any] = {"name": REPORT_NAME, **({"namespace": namespace} if namespace else {})}
    metadata["labels"] = dict(OWNED_LABELS)
    if len(results) > len(kept):
        metadata["annotations"] = {OMITTED_ANNOTATION: str(len(results) - len(kept))}
    report: dict[str, Any] = {
        "apiVersion": api.api_version,
        "kind": api.kind if namespace else api.cluster_kind,
        "metadata": metadata,
    }
    if flavour == "openreports":
        report["source"] = SOURCE
    counts = Counter(r["result"] for r in kept)
    report["summary"] = {key: counts.get(key, 0) for key in SUMMARY_KEYS}
    report["results"] = kept
    return report


def _result(item: Entry, finding: Mapping[str, Any], rules: Mapping[str, str]) -> dict[str, Any]:
    policy = str(finding.get("policy", ""))
    action = str(finding.get("action", ""))
    outcome = "error" if policy == UNREVIEWABLE else RESULT_OF_ACTION.get(action, "error")
    result: dict[str, Any] = {
        "source": SOURCE,
        "policy": policy,
        "message": clip(str(finding.get("message", "")), MAX_MESSAGE_CHARS),
        "result": outcome,
        "severity": SEVERITY_OF_RESULT[outcome],
        # Only what /validate refuses is scored: warn and dryrun policies are advice.
        "scored": outcome == "fail",
        "timestamp": _timestamp(item.time),
        "resources": [_reference(item)],
        "properties": {"enforcementAction": action},
    }
    rule = rules.get(policy)
    if rule:
        result["rule"] = rule
    return result


def _reference(item: Entry) -> dict[str, str]:
    """A core/v1 ObjectReference, as the CRDs' `resources` items hold."""
    reference = {"apiVersion": item.api_version, "kind": item.kind, "name": item.name}
    if item.namespace:
        reference["namespace"] = item.namespace
    if item.uid:
        reference["uid"] = item.uid
    return reference


def _timestamp(when: dt.datetime) -> dict[str, int]:
    """metav1.Timestamp, the CRDs' result timestamp: whole seconds and nanoseconds since the epoch."""
    micros = round(when.timestamp() * 1_000_000)
    seconds, rest = divmod(micros, 1_000_000)
    return {"seconds": seconds, "nanos": rest * 1000}
