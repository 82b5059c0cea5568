"""Built-in DRA checks. Pure.

On pods: every resource claim must resolve (a claim that does not exist while the cluster
state is complete, or one that cannot be counted, is denied and named), so that no rule
counts a pod's GPUs as zero by mistake.

On ResourceClaims and ResourceClaimTemplates themselves, outside exempt namespaces:
- a template under a name that a mode dra policy points pods at must have that policy's spec;
- `allocationMode: All` on a GPU device class takes every GPU of a node: denied;
- `adminAccess: true` reaches devices in use by others: denied unless the namespace carries
  the label `gpuwebhook.io/dra-admin-access=true`.
How many devices a claim may ask for is the `gpu-max-per-pod` constraint's job (it reads
`input.gpu`, which counts a claim as it counts a pod holding it), and which device classes a
namespace may use is the `gpu-dra-device-classes` constraint's.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from webhook.accounting.count import claim_devices
from webhook.accounting.target import PodTarget
from webhook.decision import Finding
from webhook.dra import templates
from webhook.dra.devices import ClaimError, DeviceAsk
from webhook.dra.index import DraIndex
from webhook.dra.resolve import pod_claims
from webhook.sharing_policy import SharingPolicy

CLAIMS_RESOLVE = "gpu-builtin/dra-claims"
CLAIM_RULES = "gpu-builtin/dra-claim"
ADMIN_ACCESS_LABEL = "gpuwebhook.io/dra-admin-access"


def pod_findings(target: PodTarget, namespace: str, dra: DraIndex | None) -> list[Finding]:
    """A denial naming the first claim of the pod that cannot be resolved or counted."""
    spec = target.pod.get("spec")
    if dra is None or not isinstance(spec, dict) or not spec.get("resourceClaims"):
        return []
    try:
        pod_claims(target.pod, namespace, dra)
    except ClaimError as e:
        return [Finding(CLAIMS_RESOLVE, "deny", f"{target.describe()}: {e}")]
    return []


def claim_findings(
    obj: Mapping[str, Any],
    namespace: str,
    labels: Mapping[str, str],
    dra: DraIndex,
    policies: Sequence[SharingPolicy] = (),
) -> list[Finding]:
    """What is wrong with a ResourceClaim or ResourceClaimTemplate: one finding per problem."""
    subject = f"{obj.get('kind')} {_name(obj)}"
    squatted = _squatted(obj, namespace, labels, policies)
    if squatted:
        return [Finding(CLAIM_RULES, "deny", f"{subject}: {squatted}")]
    try:
        asks = dra.asks(claim_devices(dict(obj)))
    except ClaimError as e:
        return [Finding(CLAIM_RULES, "deny", f"{subject}: {e}")]
    admin_allowed = labels.get(ADMIN_ACCESS_LABEL) == "true"
    findings = []
    for ask in asks:
        problem = _problem(ask, namespace, admin_allowed)
        if problem:
            findings.append(Finding(CLAIM_RULES, "deny", f"{subject}: request {ask.request!r} {problem}"))
    return findings


def _squatted(
    obj: Mapping[str, Any], namespace: str, labels: Mapping[str, str], policies: Sequence[SharingPolicy]
) -> str | None:
    """A template under a name a mode dra policy points pods at must be that policy's template:
    otherwise whoever creates it first decides what those pods get."""
    if obj.get("kind") != templates.KIND or not any(p.sharing.mode == "dra" for p in policies):
        return None
    name = _name(obj)
    reserved = templates.reserved_by(policies, namespace, labels, name)
    if reserved is None or obj.get("spec") == reserved[1]:
        return None
    owner = reserved[0]
    return (
        f"the name belongs to policy {owner}'s mode dra template, whose spec this is not; "
        "create it as `gpu-webhook dra templates` prints it, or leave it to the webhook"
    )


def _problem(ask: DeviceAsk, namespace: str, admin_allowed: bool) -> str | None:
    if ask.all_devices:
        return f"asks for every {ask.device_class} device of a node (allocationMode All); ask for a count"
    if ask.admin_access and not admin_allowed:
        return (
            f"sets adminAccess on {ask.device_class}, which reaches devices other pods use; namespace "
            f"{namespace} lacks the label {ADMIN_ACCESS_LABEL}=true"
        )
    return None


def _name(obj: Mapping[str, Any]) -> str:
    meta = obj.get("metadata")
    name = meta.get("name") if isinstance(meta, dict) else None
    return name if isinstance(name, str) and name else "?"
