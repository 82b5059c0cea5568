"""Offline review: what kube-apiserver would do with manifests, through the same review().

Mutate, apply the patch as the apiserver would, then validate the result. Used by
`gpu-webhook review` and by PolicyTest cases, so both see what the cluster would.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any, cast

import jsonpatch

from webhook import kubeversion
from webhook.admission import check_request
from webhook.decision import Decision
from webhook.inventory import Inventory, cache_from
from webhook.native.params import from_objects
from webhook.policy.model import PolicySet
from webhook.policy.sources import PolicySources, load_policies
from webhook.quota.gate import LocalGate, LookOnlyGate
from webhook.review import ReviewDeps, review
from webhook.types import ADMISSION_API_VERSION, ADMISSION_KIND, AdmissionRequest, KubeObject, PatchOperation

_PLURAL_EXCEPTIONS = {"Endpoints": "endpoints"}
# Kinds that live outside any namespace, among those a user may hand `review` or a suite.
CLUSTER_SCOPED = frozenset(
    {
        "Namespace",
        "Node",
        "PersistentVolume",
        "StorageClass",
        "PriorityClass",
        "RuntimeClass",
        "ClusterRole",
        "ClusterRoleBinding",
        "CustomResourceDefinition",
        "MutatingWebhookConfiguration",
        "ValidatingWebhookConfiguration",
        "DeviceClass",
        "ResourceSlice",
    }
)


@dataclass(frozen=True)
class Identity:
    username: str = "offline-review"
    groups: tuple[str, ...] = ("system:authenticated",)


@dataclass(frozen=True)
class Outcome:
    """One object's result: the JSON shape of `gpu-webhook review -o json`."""

    kind: str
    namespace: str
    name: str
    allowed: bool
    status: dict[str, Any] | None
    warnings: tuple[str, ...]
    patch: tuple[PatchOperation, ...]
    object: KubeObject
    submitted: KubeObject
    mutation: Decision
    validation: Decision | None

    def as_json(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "namespace": self.namespace,
            "name": self.name,
            "allowed": self.allowed,
            "status": self.status,
            "warnings": list(self.warnings),
            "patch": list(self.patch),
            "object": self.object,
        }


def request_for(document: KubeObject, *, namespace: str | None, identity: Identity) -> AdmissionRequest:
    """The AdmissionRequest inside an AdmissionReview document, or one built for a plain manifest."""
    if document.get("kind") == ADMISSION_KIND and document.get("apiVersion") == ADMISSION_API_VERSION:
        request = document.get("request")
        return check_request(request)
    return check_request(_synthesize(document, namespace, identity))


def _synthesize(obj: KubeObject, namespace: str | None, identity: Identity) -> dict[str, Any]:
    api_version = str(obj.get("apiVersion", "v1"))
    group, _, version = api_version.rpartition("/")
    kind = str(obj.get("kind", ""))
    metadata = obj.get("metadata") if isinstance(obj.get("metadata"), dict) else {}
    assert isinstance(metadata, dict)
    if namespace and kind not in CLUSTER_SCOPED:
        # The object itself moves too: every rule (a constraint's excludedNamespaces reads the
        # object's metadata) must judge the namespace the output names.
        metadata = {**metadata, "namespace": namespace}
        obj = {**obj, "metadata": metadata}
    gvk = {"group": group, "version": version, "kind": kind}
    gvr = {"group": group, "version": version, "resource": _plural(kind)}
    return {
        "uid": str(uuid.uuid4()),
        "kind": gvk,
        "resource": gvr,
        "requestKind": gvk,
        "requestResource": gvr,
        "name": str(metadata.get("name", "")),
        "namespace": _namespace(kind, metadata, namespace),
        "operation": "CREATE",
        "userInfo": {"username": identity.username, "groups": list(identity.groups)},
        "object": obj,
        "oldObject": None,
        "dryRun": True,
    }


def _namespace(kind: str, metadata: dict[str, Any], given: str | None) -> str:
    """As kube-apiserver fills request.namespace: empty for cluster-scoped objects."""
    if kind in CLUSTER_SCOPED:
        return ""
    return given or str(metadata.get("namespace") or "default")


def _plural(kind: str) -> str:
    lower = kind.lower()
    return _PLURAL_EXCEPTIONS.get(kind) or (lower + "es" if lower.endswith("s") else lower + "s")


def run(request: AdmissionRequest, deps: ReviewDeps) -> Outcome:
    original = request["object"] or {}
    mutation = review(request, "mutate", deps)
    if not mutation.allowed:
        return _outcome(request, original, mutation, None, original)
    mutated = _apply(original, mutation.patch)
    validation = review(cast(AdmissionRequest, {**request, "object": mutated}), "validate", deps)
    return _outcome(request, original, mutation, validation, mutated)


def _apply(obj: KubeObject, patch: tuple[PatchOperation, ...]) -> KubeObject:
    """Apply the patch as the apiserver does, so a patch that does not apply is caught here."""
    if not patch:
        return obj
    result = jsonpatch.apply_patch(obj, list(patch), in_place=False)
    assert isinstance(result, dict)
    return result


def _outcome(
    request: AdmissionRequest,
    original: KubeObject,
    mutation: Decision,
    validation: Decision | None,
    final: KubeObject,
) -> Outcome:
    verdict = validation if validation is not None and not validation.allowed else mutation
    allowed = mutation.allowed and (validation is None or validation.allowed)
    status = None if allowed else {"code": verdict.code, "reason": verdict.reason, "message": verdict.message}
    warnings = mutation.warnings + (validation.warnings if validation else ())
    metadata = original.get("metadata") if isinstance(original.get("metadata"), dict) else {}
    assert isinstance(metadata, dict)
    return Outcome(
        kind=request["kind"]["kind"],
        namespace=request.get("namespace", ""),
        name=request.get("name") or str(metadata.get("name") or metadata.get("generateName") or ""),
        allowed=allowed,
        status=status,
        warnings=tuple(dict.fromkeys(warnings)),
        patch=mutation.patch,
        object=final,
        submitted=original,
        mutation=mutation,
        validation=validation,
    )


def offline_deps(
    policies: PolicySet | PolicySources,
    inventory: Inventory,
    kubernetes_version: kubeversion.Version | None = None,
    gpu_classes: tuple[str, ...] = (),
) -> ReviewDeps:
    """What review() reads offline: the policies, and the inventory as the cluster's state;
    `gpu_classes`: DRA device classes counted as GPUs besides NVIDIA's."""
    cache = cache_from(inventory, gpu_classes=gpu_classes)
    return ReviewDeps(
        policies=policies if isinstance(policies, PolicySet) else load_policies(policies),
        namespace_labels=cache.namespace_labels,
        quota_gate=LookOnlyGate(LocalGate(cache)),
        kubernetes_version=kubernetes_version,
        dra=cache.dra(),
        allocatable=cache.allocatable,
        native_params=from_objects(inventory.objects),
    )
