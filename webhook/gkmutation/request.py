"""Where Gatekeeper's mutators meet an admission request: what they see, and the answer. Pure.

Gatekeeper's mutating webhook (pkg/webhook/mutation.go) skips its own resources, reads the
object's own group, version and kind, gives the object the request's namespace while the
mutators run, and refuses the request when mutation fails.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Any

from webhook.decision import Decision, Finding, deny
from webhook.gkmutation.mutators import Target
from webhook.gkmutation.system import NotConverging, Outcome
from webhook.gkmutation.walk import MutationError
from webhook.mutation.diff import diff
from webhook.types import AdmissionRequest, KubeObject

RULE = "gatekeeper-mutation"
# pkg/webhook/common.go isGatekeeperResource: requests for these are never mutated.
GATEKEEPER_GROUPS = frozenset(
    {
        "templates.gatekeeper.sh",
        "constraints.gatekeeper.sh",
        "mutations.gatekeeper.sh",
        "config.gatekeeper.sh",
        "externaldata.gatekeeper.sh",
        "expansion.gatekeeper.sh",
        "status.gatekeeper.sh",
    }
)
NAMESPACE_NAME_LABEL = "kubernetes.io/metadata.name"


def target(
    request: AdmissionRequest, obj: Mapping[str, Any], namespace_labels: Callable[[str], Mapping[str, str]]
) -> Target:
    requested = request.get("kind") or {}
    api_version = obj.get("apiVersion")
    if isinstance(api_version, str) and isinstance(obj.get("kind"), str):
        group, _, version = api_version.rpartition("/")
        kind = str(obj["kind"])
    else:
        group, version = str(requested.get("group", "")), str(requested.get("version", ""))
        kind = str(requested.get("kind", ""))
    is_namespace = kind == "Namespace" and not group
    namespace = "" if is_namespace else str(request.get("namespace") or _own_namespace(obj))
    # The apiserver gives every namespace this label; caches and inventories may omit it.
    labels = {NAMESPACE_NAME_LABEL: namespace, **namespace_labels(namespace)} if namespace else {}
    return Target(group, version, kind, request["operation"], namespace, labels)


def _own_namespace(obj: Mapping[str, Any]) -> str:
    metadata = obj.get("metadata")
    namespace = metadata.get("namespace") if isinstance(metadata, dict) else None
    return namespace if isinstance(namespace, str) else ""


def refused(error: MutationError) -> Decision:
    """A mutation that fails refuses the request, as Gatekeeper's does: the object cannot be
    admitted as the policies require. 409 when the mutators disagree, 400 when the object does
    not have the shape a location implies."""
    code = 409 if isinstance(error, NotConverging) else 400
    message = str(error)
    return deny(f"[{RULE}] {message}", code=code, findings=(Finding(RULE, "deny", message),))


def combined(original: KubeObject, outcome: Outcome, gpu: Decision) -> Decision:
    """Gatekeeper's patch, then the GPU mutators' (computed on the object Gatekeeper's made)."""
    if not gpu.allowed:
        return gpu
    first = tuple(diff(original, outcome.object))
    audit = {**gpu.audit_annotations, "gatekeeper-mutators": _listed(outcome.applied)}
    # The GPU path returns its object only when a sharing policy rewrote it; a device-variable
    # patch alone comes without one, and the caller applies the whole patch.
    final = gpu.object if gpu.object is not None or gpu.patch else outcome.object
    return replace(gpu, patch=first + gpu.patch, audit_annotations=audit, object=final)


def _listed(ids: tuple[str, ...], most: int = 16) -> str:
    shown = ",".join(ids[:most])
    return f"{shown},+{len(ids) - most} more" if len(ids) > most else shown
