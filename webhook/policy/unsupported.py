"""Documents of kinds this engine does not run. Pure.

A security team's directory often holds more than one engine's files. A document of another
project's kind must neither be enforced by guesswork nor take the rest of the set down with
it: it is skipped, and reported as one problem with its file and line, in `policies check`, in
the server's log, on /readyz and as a metric. What is skipped is never enforced, so the report
says so in its reason.

Documents of our own API group are different: an unknown kind there is a typo in a policy the
team meant us to enforce, so it rejects the set like any other error, and the last good set
stays in force.
"""

from __future__ import annotations

from webhook.errors import PolicyProblem
from webhook.policy.schemas import GROUP_VERSION
from webhook.policy.source import Document

OWN_GROUP = GROUP_VERSION.split("/", 1)[0]
# Why a known project's kinds are not run here, and what runs in their place.
_BY_GROUP: dict[str, str] = {
    "kyverno.io": "Kyverno policies are not run here; write the rule as a ConstraintTemplate "
    "(Rego or CEL) or a ValidatingAdmissionPolicy",
    "policies.kyverno.io": "Kyverno policies are not run here; write the rule as a ConstraintTemplate "
    "(Rego or CEL) or a ValidatingAdmissionPolicy",
    "expansion.gatekeeper.sh": "Gatekeeper expansion is not needed here: /validate judges workload "
    "templates (Deployment, Job, CronJob...) directly",
    "externaldata.gatekeeper.sh": "external data providers are not called from the request path",
    "config.gatekeeper.sh": "Gatekeeper's Config (sync, exempt namespaces) is set by the server's flags "
    "and its inventory watch here",
    "status.gatekeeper.sh": "Gatekeeper status objects are written by Gatekeeper, not read as policy",
}


def is_own_group(document: Document) -> bool:
    return document.api_version.split("/", 1)[0] == OWN_GROUP


def skipped(document: Document, known: str) -> PolicyProblem:
    """The one problem that reports `document` as skipped; `known` lists the kinds that do load."""
    group = document.api_version.split("/", 1)[0] if "/" in document.api_version else ""
    why = _BY_GROUP.get(group, f"this engine loads {known}")
    kind = f"{document.kind!r} in {document.api_version!r}"
    return document.problem(("kind",), f"skipped, not enforced: unknown kind {kind}; {why}")
