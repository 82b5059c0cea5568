"""Judge one existing object with /validate's own function. Pure: no I/O, no clock.

Each object becomes the AdmissionRequest the API server would send for it (see
kinds.ScanKind.operation for CREATE or UPDATE), from the scan's own identity, and goes
through review.validate() with every enforcement action: the built-in GPU checks,
then the Gatekeeper constraints. The constraints see the object as Gatekeeper's own
audit presents it (audit_review): templates that exempt updates judge running pods.
Quota is left out (the deps carry no quota gate): it judges admissions, not objects
that already run.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any, cast

from webhook.admission import check_request
from webhook.decision import Decision, Finding
from webhook.review import ALL_ACTIONS, ReviewDeps, validate
from webhook.scan.kinds import NAMESPACE, ScanKind
from webhook.types import AdmissionRequest, KubeObject
from webhook.validation.gatekeeper_input import review_of_object

SCAN_USER = "system:gpu-webhook:scan"
SCAN_GROUPS = ("system:authenticated",)
UNREVIEWABLE = "gpu-webhook/scan"
MALFORMED = "gpu-builtin/shape"


@dataclass(frozen=True)
class Judgement:
    kind: ScanKind
    object: KubeObject
    namespace: str
    name: str
    findings: tuple[Finding, ...]
    allowed: bool

    @property
    def denied(self) -> bool:
        return not self.allowed


def judge(obj: KubeObject, kind: ScanKind, deps: ReviewDeps) -> Judgement:
    request = scan_request(obj, kind)
    decision = validate(request, replace(deps, constraint_view=audit_review), ALL_ACTIONS)
    return _judgement(obj, kind, request, decision)


def unreviewable(obj: KubeObject, kind: ScanKind, why: str) -> Judgement:
    """An object review() could not judge counts as denied, as /validate fails closed."""
    namespace, name = identity(obj, kind)
    finding = Finding(UNREVIEWABLE, "deny", f"{kind.kind} {name} could not be reviewed: {why}")
    return Judgement(kind, obj, namespace, name, (finding,), allowed=False)


def scan_request(obj: KubeObject, kind: ScanKind) -> AdmissionRequest:
    namespace, name = identity(obj, kind)
    gvk = {"group": kind.group, "version": kind.version, "kind": kind.kind}
    gvr = {"group": kind.group, "version": kind.version, "resource": kind.resource}
    request: dict[str, Any] = {
        "uid": str(uuid.uuid4()),
        "kind": gvk,
        "resource": gvr,
        "requestKind": gvk,
        "requestResource": gvr,
        "name": name,
        "namespace": namespace,
        "operation": kind.operation,
        "userInfo": {"username": SCAN_USER, "groups": list(SCAN_GROUPS)},
        "object": obj,
        "oldObject": obj if kind.operation == "UPDATE" else None,
        "dryRun": True,
    }
    return check_request(request)


def audit_review(request: AdmissionRequest) -> AdmissionRequest:
    """What Gatekeeper's audit hands a template for a stored object. pkg/audit/manager.go reviews a
    target.AugmentedUnstructured (object, its Namespace, source Original) and sets no operation;
    pkg/target/target.go (augmentedUnstructuredToAdmissionRequest) makes of it a request holding
    only kind, name, namespace (empty for cluster-scoped objects) and object: no operation, uid,
    user, oldObject or resource. That is the review gator builds for a manifest."""
    return cast(AdmissionRequest, review_of_object(request.get("object") or {}))


def identity(obj: Mapping[str, Any], kind: ScanKind) -> tuple[str, str]:
    """(namespace, name) as the API server puts them in a request: a Namespace's namespace is its name."""
    metadata = obj.get("metadata")
    meta: Mapping[str, Any] = metadata if isinstance(metadata, dict) else {}
    name = _text(meta.get("name"))
    return (name if kind is NAMESPACE else _text(meta.get("namespace"))), name


def _judgement(obj: KubeObject, kind: ScanKind, request: AdmissionRequest, decision: Decision) -> Judgement:
    findings = decision.findings
    if not decision.allowed and not any(f.action == "deny" for f in findings):
        # A shape error denies with a message and no finding; the scan reports it as one.
        findings = (*findings, Finding(MALFORMED, "deny", decision.message))
    return Judgement(
        kind, obj, request.get("namespace", ""), request.get("name", ""), findings, decision.allowed
    )


def _text(value: Any) -> str:
    return value if isinstance(value, str) else ""
