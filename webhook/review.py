"""review(): one admission request in, one decision out. No HTTP, no I/O.

The server and the offline CLI both call this function, so what a user checks
offline is what the cluster gets. The fast path comes first: requests from our own
service account, objects without a pod, excluded namespaces, and pods without GPUs.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any, cast

import jsonpatch

from webhook.accounting import names
from webhook.accounting.asks import same_asks
from webhook.accounting.count import CLAIM_KINDS, ESTIMATED, GpuCount, count_gpus
from webhook.accounting.target import PodTarget, pod_target
from webhook.capacity import CapacityView
from webhook.config import EXEMPT_NAMESPACES, Enforcement, FailureMode
from webhook.decision import ALLOW, Decision, Finding, clamp_warnings, deny
from webhook.dra import templates
from webhook.dra.devices import ClaimError
from webhook.dra.index import GROUP as DRA_GROUP
from webhook.dra.index import DraIndex
from webhook.dra.resolve import pod_claims, unseen_claims
from webhook.dra.served import unserved
from webhook.errors import AdmissionDenied, ClusterError
from webhook.gkmutation import request as gkrequest
from webhook.gkmutation.mutators import OPERATIONS
from webhook.gkmutation.system import MutatorSet
from webhook.gkmutation.walk import MutationError
from webhook.kubeversion import Version
from webhook.match import glob_matches
from webhook.mutation import resources, void
from webhook.mutation.engine import mutate_object, select_policy
from webhook.mutation.shape import ShapeError, check_pod_shape
from webhook.native import mutating as native_mutating
from webhook.native import validating as native_validating
from webhook.native.params import ParamSource
from webhook.policy.constraints import evaluate_constraints
from webhook.policy.engines import ConstraintSet
from webhook.policy.model import PolicySet
from webhook.quota.gate import QuotaGate
from webhook.sharing_policy import SharingPolicy
from webhook.types import AdmissionRequest, Endpoint, EnforcementAction, KubeObject, PatchOperation
from webhook.validation import bounds, builtin, dra
from webhook.validation.gatekeeper import Constraint
from webhook.validation.prechecks import fingerprint


def _no_labels(_: str) -> Mapping[str, str]:
    return {}


MALFORMED = "gpu-builtin/shape"
BINDING = "binding"
EPHEMERAL = "ephemeralcontainers"
NODES_GROUP = "system:nodes"
MIRROR_ANNOTATION = "kubernetes.io/config.mirror"
ALL_ACTIONS: frozenset[EnforcementAction] = frozenset({"deny", "warn", "dryrun"})
ADVISORY_ACTIONS: frozenset[EnforcementAction] = frozenset({"warn", "dryrun"})


@dataclass(frozen=True)
class ReviewSettings:
    excluded_namespaces: tuple[str, ...] = EXEMPT_NAMESPACES
    own_username: str | None = None
    # With a separate advisory webhook deployed, /validate leaves warn and dryrun policies to it.
    advisory_webhook: bool = False
    # What quota answers when it cannot trust the cluster state (the API has been out of reach).
    quota_failure_mode: FailureMode = "closed"
    # "warn": every constraint that would deny warns instead, so a cluster sees what enforcing would
    # refuse before it does (built-in GPU checks, quota and malformed objects still deny).
    enforcement: Enforcement = "policy"

    def actions(self, endpoint: Endpoint) -> frozenset[EnforcementAction]:
        if endpoint == "advisory":
            return ADVISORY_ACTIONS
        return frozenset({"deny"}) if self.advisory_webhook else ALL_ACTIONS


@dataclass(frozen=True)
class ReviewDeps:
    """Everything a review may read: immutable snapshots, swapped whole between requests."""

    policies: PolicySet
    settings: ReviewSettings = field(default_factory=ReviewSettings)
    namespace_labels: Callable[[str], Mapping[str, str]] = _no_labels
    # Counts admitted pods against GPU quotas (and reserves them); None: quotas are not enforced.
    quota_gate: QuotaGate | None = None
    # Set when the cluster state is too stale for quota to trust: the reason, for the message.
    quota_unavailable: str | None = None
    # data.inventory for Gatekeeper templates, in Gatekeeper's layout; read only when needed.
    gatekeeper_inventory: Callable[[], Mapping[str, Any]] | None = None
    # The request as Gatekeeper's templates see it; None: as sent. The scan gives them the review
    # Gatekeeper's audit builds for a stored object (webhook.scan.judge.audit_review).
    constraint_view: Callable[[AdmissionRequest], AdmissionRequest] | None = None
    placement: CapacityView | None = None  # spare GPU capacity, for policies with placement hints
    kubernetes_version: Version | None = None  # the cluster's (discovery or a flag); None: unknown
    # False: raise WouldBlock, before anything is reserved, rather than run Rego (the server
    # tries reviews on its event loop first, and moves only those that need Rego to a thread).
    may_block: bool = True
    # The cluster's ResourceClaims, templates and DeviceClasses; None: DRA claims are not counted.
    dra: DraIndex | None = None
    # Extended resource names nodes advertise; None: unknown (then no name is called unserved).
    allocatable: frozenset[str] | None = None
    # The param objects of native admission policies, by apiVersion and kind; None: none known.
    native_params: ParamSource | None = None
    # The request's objects as the server already found them within every size bound (by
    # identity: an object the review makes is measured); None: measure here.
    within_bounds: bounds.Checked | None = None


@dataclass(frozen=True)
class Subject:
    """The pod under review, where it lives, and the sharing policy that applies to it."""

    target: PodTarget
    namespace: str
    policy: SharingPolicy | None


def review(request: AdmissionRequest, endpoint: Endpoint, deps: ReviewDeps) -> Decision:
    if endpoint == "mutate":
        return mutate(request, deps)
    return validate(request, deps, deps.settings.actions(endpoint))


def mutate(request: AdmissionRequest, deps: ReviewDeps) -> Decision:
    """MutatingAdmissionPolicies first, as kube-apiserver runs them before any webhook; then
    Gatekeeper's mutators and the GPU mutators on their result (`_webhooks`); the patch goes from
    the request's object to the end result."""
    native = deps.policies.native
    if not native.mutating or skipped(request, deps.settings):
        return _webhooks(request, deps)
    too_large = _oversize(request, deps)
    if too_large is not None:  # before CEL, whose cost grows with the object
        return oversized(too_large)
    outcome = _native_mutation(request, deps)
    if outcome.denial is not None:
        return deny(outcome.denial, findings=tuple(outcome.findings))
    if outcome.object is None or outcome.object == request.get("object"):
        return _webhooks(request, deps)
    decision = _webhooks(cast(AdmissionRequest, {**request, "object": outcome.object}), deps)
    if not decision.allowed:
        return decision
    final = jsonpatch.apply_patch(outcome.object, list(decision.patch)) if decision.patch else outcome.object
    if outcome.reinvoke and final != outcome.object:  # IfNeeded policies see what the GPU mutators wrote
        again = _native_mutation(
            cast(AdmissionRequest, {**request, "object": final}), deps, frozenset(outcome.reinvoke)
        )
        if again.denial is not None:
            return deny(again.denial, findings=tuple(outcome.findings + again.findings))
        final = again.object if again.object is not None else final
    patch = cast(tuple[PatchOperation, ...], tuple(jsonpatch.make_patch(request.get("object"), final).patch))
    findings = (*outcome.findings, *decision.findings)
    return replace(decision, patch=patch, object=final, findings=findings)


def _native_mutation(
    request: AdmissionRequest, deps: ReviewDeps, only: frozenset[str] | None = None
) -> native_mutating.MutationOutcome:
    labels = _namespace_labels(request, deps)
    return native_mutating.mutate(request, deps.policies.native, labels, deps.native_params, only=only)


def _namespace_labels(request: AdmissionRequest, deps: ReviewDeps) -> Mapping[str, str]:
    namespace = request.get("namespace") or ""
    if not namespace:
        return {}
    return {"kubernetes.io/metadata.name": namespace, **deps.namespace_labels(namespace)}


def _native_validation(
    request: AdmissionRequest, deps: ReviewDeps, actions: frozenset[EnforcementAction]
) -> native_validating.NativeOutcome:
    native = deps.policies.native
    if not native.validating:
        return native_validating.NativeOutcome()
    outcome = native_validating.validate(
        request, native, _namespace_labels(request, deps), deps.native_params
    )
    outcome.findings = [f for f in outcome.findings if f.action in actions]
    return outcome


def _webhooks(request: AdmissionRequest, deps: ReviewDeps) -> Decision:
    """What the two mutating webhooks of a cluster running both would do: Gatekeeper's, then ours."""
    mutators = deps.policies.mutators
    if mutators is None:
        return _gpu_mutate(request, deps)
    return _gatekeeper_then_gpu(request, deps, mutators)


def _gatekeeper_then_gpu(request: AdmissionRequest, deps: ReviewDeps, mutators: MutatorSet) -> Decision:
    """Gatekeeper's mutators first, then ours on the object they leave; one patch for both.

    kube-apiserver calls mutating webhook configurations in name order (apiserver
    pkg/admission/configuration/mutating_webhook_manager.go), so where both webhooks are
    deployed Gatekeeper's (gatekeeper-mutating-webhook-configuration) runs before ours: the GPU
    rules judge what the user's mutators made, and our device variable and stamp have the last
    word. The two patches apply one after the other, as the two webhooks' would."""
    obj = request.get("object")
    gatekeeper_own = ((request.get("kind") or {}).get("group") or "") in gkrequest.GATEKEEPER_GROUPS
    if (
        request["operation"] not in OPERATIONS
        or not isinstance(obj, dict)
        or gatekeeper_own
        or skipped(request, deps.settings)
    ):
        return _gpu_mutate(request, deps)
    too_large = _oversize(request, deps)
    if too_large is not None:  # before the walk and the convergence copies, whose cost grows with it
        return oversized(too_large)
    try:
        outcome = mutators.run(obj, gkrequest.target(request, obj, deps.namespace_labels))
    except MutationError as e:
        return gkrequest.refused(e)
    if not outcome.changed:
        return _gpu_mutate(request, deps)
    decision = _gpu_mutate(cast(AdmissionRequest, {**request, "object": outcome.object}), deps)
    return gkrequest.combined(obj, outcome, decision)


def _gpu_mutate(request: AdmissionRequest, deps: ReviewDeps) -> Decision:
    operation = request["operation"]
    ephemeral = operation == "UPDATE" and request.get("subResource") == EPHEMERAL
    if (operation != "CREATE" and not ephemeral) or skipped(request, deps.settings):
        return ALLOW
    scoped = scoped_pod(request, deps)
    if scoped is None:
        return ALLOW
    target = scoped[0]
    if ephemeral:  # `kubectl debug` adds a container to a running pod
        return _void_only(target, deps, scoped[1], ("ephemeralContainers",))
    # Every pod comes here, so pods without GPUs skip the shape check and the size bounds: the
    # void patch reads defensively and costs one look at each container, and /validate refuses a
    # malformed or oversized pod whatever /mutate did.
    if not is_gpu_pod(target, deps.policies.shared_names, deps.dra, scoped[1]):
        return _void_only(target, deps, scoped[1], gpu_pod=False)
    too_large = _oversize(request, deps)
    if too_large is not None:  # before the copy and diff, whose cost grows with the object
        return oversized(too_large)
    try:
        shape_checked(target)
    except ShapeError as e:
        return malformed(e)
    subject = policy_subject(target, scoped[1], deps)  # a GPU pod, as asked above
    if subject.policy is None:
        return _void_only(target, deps, scoped[1])
    try:
        result = mutate_object(
            request["object"] or {},
            subject.policy,
            deps.policies.shared_names,
            placement=deps.placement,
            shape_checked=True,  # by reviewed_pod
            kubernetes_version=deps.kubernetes_version,
            dra=deps.dra,
            namespace=scoped[1],
        )
    except AdmissionDenied as e:
        return deny(str(e), findings=(Finding(subject.policy.name, "deny", str(e)),))
    stamp = subject.policy.stamp
    warnings = clamp_warnings([*result.warnings, *_unserved(subject, result.object, deps)])
    return Decision(
        allowed=True,
        patch=result.patch,
        warnings=warnings,
        own_warnings=frozenset(warnings),  # the mutators' explanations: texts of ours
        audit_annotations={"sharing-policy": stamp, "sharing-mode": result.mode},
        object=result.object,
        sharing_mode=result.mode,
    )


def _unserved(subject: Subject, mutated: KubeObject, deps: ReviewDeps) -> list[str]:
    """A warning for each resource name the policy wrote that no node and no DeviceClass serves."""
    if deps.allocatable is None or subject.policy is None:
        return []
    written = _resource_names(pod_target(mutated)) - _resource_names(subject.target)
    return [
        f"sharing policy {subject.policy.name} asks for {name}, which no node and no DeviceClass serves"
        for name in unserved(written, deps.allocatable, deps.dra)
    ]


def _resource_names(target: PodTarget | None) -> set[str]:
    if target is None:
        return set()
    names: set[str] = set()
    for _, container in target.containers():
        for section in resources.sections(container).values():
            names.update(name for name in section if "/" in name)
    return names


def _void_only(
    target: PodTarget,
    deps: ReviewDeps,
    namespace: str,
    lists: tuple[str, ...] = void.ALL_LISTS,
    *,
    gpu_pod: bool = True,
) -> Decision:
    """A Pod no sharing policy rewrites: only the device variable, as a patch built directly."""
    if target.kind != "Pod":
        return ALLOW
    claims = void.claim_gpus(target.pod, deps.dra, namespace)
    patch = void.void_patch(target.pod, deps.policies.shared_names, lists, gpu_pod=gpu_pod, claims=claims)
    return Decision(allowed=True, patch=tuple(patch)) if patch else ALLOW


def validate(
    request: AdmissionRequest, deps: ReviewDeps, actions: frozenset[EnforcementAction] = ALL_ACTIONS
) -> Decision:
    """Built-in GPU checks, then Gatekeeper constraints (any kind), then quota, which comes last so
    that a pod is counted only once nothing else refuses it."""
    if request["operation"] not in ("CREATE", "UPDATE"):
        return ALLOW
    if skipped(request, deps.settings):
        return _unjudged(request, deps)
    too_large = _oversize(request, deps)
    if too_large is not None:  # before Rego, whose cost grows with the object
        return oversized(too_large, actions)
    native = _native_validation(request, deps, actions)
    if is_binding(request):
        request = binding_view(request)
    try:
        reviewed = reviewed_pod(request, deps)
    except ShapeError as e:
        return malformed(e)
    deps, unseen = _pod_dra(request, reviewed, deps)
    subject, count = gpu_subject(reviewed, deps, waits=unseen.waits)
    old = _updated_pod(request)
    rejudge = old is None or not same_asks(request.get("object"), old)
    findings = (
        _updated_asks(request, reviewed, old, actions)
        + _builtin(subject, deps, actions, count, unseen, rejudge=rejudge)
        + _dra_builtin(request, reviewed, deps, actions, unseen)
    )
    if any(f.action == "deny" for f in findings):
        return decide(findings)
    constraints = evaluate_constraints(
        deps.constraint_view(request) if deps.constraint_view else request,
        deps.policies,
        deps.gatekeeper_inventory,
        actions,
        may_block=deps.may_block,
        gpu=count,
        dra=deps.dra,
    )
    served = _served_class_findings(request, reviewed, deps, actions)
    findings += _as_enforced(constraints.findings + served + native.findings, deps.settings.enforcement)
    if subject is None or any(f.action == "deny" for f in findings):
        decision = decide(findings)
    else:
        decision = _with_quota(request, deps, actions, findings, count)
    # Gathered and applied at once: every replace() copies the whole decision.
    changes: dict[str, Any] = {}
    annotations = {**constraints.audit_annotations, **native.audit_annotations}
    if annotations:
        changes["audit_annotations"] = {**decision.audit_annotations, **annotations}
    if not decision.allowed and decision.code == 403 and _native_denied_first(findings, native):
        changes["code"] = native.code
    if count is not None and decision.allowed:
        changes["gpus"] = count.equivalents
        if count.estimated:
            warnings = clamp_warnings([*decision.warnings, ESTIMATED])
            changes["warnings"] = warnings
            added = {w for w in warnings if w not in decision.warnings}
            changes["own_warnings"] = decision.own_warnings | added
    return replace(decision, **changes) if changes else decision


def _native_denied_first(findings: list[Finding], native: native_validating.NativeOutcome) -> bool:
    """The first denial is a native policy's: its validation's reason gives the status code."""
    first = next((f for f in findings if f.action == "deny"), None)
    return first is not None and first in native.findings


def is_binding(request: AdmissionRequest) -> bool:
    """A pods/binding CREATE: its object is a v1 Binding, not the pod."""
    kind = request.get("kind") or {}
    return request.get("subResource") == BINDING and kind.get("kind") == "Binding" and not kind.get("group")


def binding_view(request: AdmissionRequest) -> AdmissionRequest:
    """A pods/binding CREATE as the pod UPDATE it amounts to: kube-apiserver merges the Binding's
    annotations into the stored pod's, and nothing else of it but the node (kubernetes/kubernetes
    pkg/registry/core/pod/storage/storage.go, setPodHostAndAnnotations). Only those annotations
    are known here, so the view's pod holds nothing else and every key written counts as a
    change: the scheduler-owned keys and CDI rules judge them as on a pod UPDATE. The node is
    left out: gpu-node-name refuses a nodeName a user presets, never one a scheduler binds."""
    binding = request.get("object")
    metadata = binding.get("metadata") if isinstance(binding, dict) else None
    metadata = metadata if isinstance(metadata, dict) else {}
    name = request.get("name") or metadata.get("name") or ""
    namespace = request.get("namespace") or metadata.get("namespace") or ""

    def pod(annotations: Any) -> KubeObject:
        meta = {"name": name, "namespace": namespace, "annotations": annotations}
        return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": {"containers": []}}

    written = metadata.get("annotations")
    view: dict[str, Any] = {
        **request,
        "kind": {"group": "", "version": "v1", "kind": "Pod"},
        "operation": "UPDATE",
        "object": pod(written if written is not None else {}),
        "oldObject": pod({}),
    }
    return cast(AdmissionRequest, view)


def _updated_pod(request: AdmissionRequest) -> KubeObject | None:
    """The stored pod of a Pod UPDATE (pods/status and the binding view included), else None."""
    old = request.get("oldObject")
    kind = request.get("kind") or {}
    if request["operation"] != "UPDATE" or kind.get("kind") != "Pod" or not isinstance(old, dict):
        return None
    return old


_VIA = {"status": "pods/status", BINDING: "pods/binding"}


def _updated_asks(
    request: AdmissionRequest,
    reviewed: tuple[PodTarget, str] | None,
    old: KubeObject | None,
    actions: frozenset[EnforcementAction],
) -> list[Finding]:
    """KAI's GPU asks changed on a running pod: refused whatever the pod asked before (a pod that
    asked for nothing and is given a fraction would escape quota)."""
    old_target = pod_target(old)
    if reviewed is None or old_target is None or "deny" not in actions:
        return []
    via = _VIA.get(request.get("subResource") or "", "UPDATE")
    return builtin.kai_updated(reviewed[0], old_target.annotations, via)


def _asks_device_class(target: PodTarget) -> bool:
    return any(resources.asks_device_class(container) for _, container in target.containers())


def _unjudged(request: AdmissionRequest, deps: ReviewDeps) -> Decision:
    """A request no rule judges (an exempt namespace, our own, a mirror pod) is allowed; a GPU pod
    it creates still tells the audit record what it holds, so reports count every GPU admitted."""
    target = pod_target(request.get("object")) if request["operation"] == "CREATE" else None
    if target is None or target.kind != "Pod" or not _asks_by_name(target, deps.policies.shared_names):
        return ALLOW
    count = count_gpus(target.pod, deps.dra, request.get("namespace") or "")
    return replace(ALLOW, gpus=count.equivalents) if count.error is None else ALLOW


def _is_claim(request: AdmissionRequest) -> bool:
    kind = request.get("kind") or {}
    return kind.get("group") == DRA_GROUP and kind.get("kind") in CLAIM_KINDS


def _dra_builtin(
    request: AdmissionRequest,
    reviewed: tuple[PodTarget, str] | None,
    deps: ReviewDeps,
    actions: frozenset[EnforcementAction],
    unseen: dra.Unseen = dra.NOTHING_UNSEEN,
) -> list[Finding]:
    """Claims a pod holds must resolve; claim objects themselves are judged (validation.dra)."""
    if "deny" not in actions:
        return []
    if reviewed is not None:
        return dra.pod_findings(reviewed[0], reviewed[1], deps.dra, unseen)
    obj = request.get("object")
    if not _is_claim(request) or not isinstance(obj, dict):  # validate() has asked skipped()
        return []
    namespace = request.get("namespace") or "default"
    labels = {"kubernetes.io/metadata.name": namespace, **deps.namespace_labels(namespace)}
    return dra.claim_findings(obj, namespace, labels, deps.dra or _NO_DRA, deps.policies.sharing)


_NO_DRA = DraIndex()


def _pod_dra(
    request: AdmissionRequest, reviewed: tuple[PodTarget, str] | None, deps: ReviewDeps
) -> tuple[ReviewDeps, dra.Unseen]:
    """The DRA snapshot a pod's checks read, and the claims it names that do not exist yet.

    Under a mode dra policy, the policy's own templates count as they will exist (the server
    creates them, and /mutate points pods at them), whatever the cache holds yet. A pod that may
    wait for an unseen claim (validation.dra.judge_unseen) is counted without it."""
    index = deps.dra
    spec = reviewed[0].pod.get("spec") if reviewed is not None and index is not None else None
    if reviewed is None or index is None or not isinstance(spec, dict) or not spec.get("resourceClaims"):
        return deps, dra.NOTHING_UNSEEN
    target, namespace = reviewed
    policy = _dra_policy(target, namespace, deps)
    if policy is not None:
        index = _expecting(index, policy)
    claims = unseen_claims(target.pod, namespace, index)
    if not claims:
        return (deps if index is deps.dra else replace(deps, dra=index)), dra.NOTHING_UNSEEN
    lenient = replace(index, synced=False)
    count = count_gpus(target.pod, lenient, namespace)
    unseen = dra.judge_unseen(
        target,
        claims,
        creating=request["operation"] == "CREATE",
        other_devices=count.devices,
        quota=_counting_quota(namespace, deps),
    )
    return replace(deps, dra=lenient if unseen.waits else index), unseen


def _dra_policy(target: PodTarget, namespace: str, deps: ReviewDeps) -> SharingPolicy | None:
    if not any(p.sharing.mode == "dra" for p in deps.policies.sharing):
        return None
    policy = policy_subject(target, namespace, deps).policy
    return policy if policy is not None and policy.sharing.mode == "dra" else None


# Snapshots and policies are immutable: the index that expects a policy's templates is made once
# per (snapshot, policy), each entry keeping both alive so that their ids are not reused.
_EXPECTING: dict[tuple[int, int], tuple[DraIndex, SharingPolicy, DraIndex]] = {}
_EXPECTING_REMEMBERED = 32


def _expecting(index: DraIndex, policy: SharingPolicy) -> DraIndex:
    key = (id(index), id(policy))
    found = _EXPECTING.get(key)
    if found is not None and found[0] is index and found[1] is policy:
        return found[2]
    expecting = replace(index, expected_templates=templates.expected_devices(policy))
    if len(_EXPECTING) >= _EXPECTING_REMEMBERED:
        _EXPECTING.clear()
    _EXPECTING[key] = (index, policy, expecting)
    return expecting


def _counting_quota(namespace: str, deps: ReviewDeps) -> str | None:
    """The GPU quota that counts pods of the namespace at admission, if any."""
    if deps.quota_gate is None:
        return None
    labels = {"kubernetes.io/metadata.name": namespace, **deps.namespace_labels(namespace)}
    return next((q.name for q in deps.policies.quotas if q.applies_to(namespace, labels)), None)


CLASS_RULE = "GpuDraDeviceClasses"
# policies/security/gpu-dra-device-classes: for this exact text, classes_allowed() reads
# allowedClasses as the Rego does (tests/dra/test_no_wrong_denials.py pins it).
CLASS_RULE_FINGERPRINT = "e2a2e9c3372bb464baedbaeafe117d4f295d31233111d9f8a2b0ba81b8c87c51"


def _served_class_findings(
    request: AdmissionRequest,
    reviewed: tuple[PodTarget, str] | None,
    deps: ReviewDeps,
    actions: frozenset[EnforcementAction],
) -> list[Finding]:
    """The device-class constraints on the claims kube-scheduler will make for the pod's extended
    resources that DeviceClasses serve: judged now, naming the pod, rather than on a claim the
    user never sees refused while the pod stays unbound."""
    rules = _class_rules(deps.policies)
    if reviewed is None or rules is None or rules.allow_all:
        return []
    target, namespace = reviewed
    served = dra.served_classes(target, deps.dra)
    findings = []
    for device_class, asked_for in served.items():
        if rules.clears and dra.classes_allowed(rules.parameters, device_class):
            continue
        claim = dra.scheduler_claim(target, namespace, device_class, asked_for)
        outcome = evaluate_constraints(
            _claim_request(request, claim, namespace),
            rules.policies,
            deps.gatekeeper_inventory,
            actions,
            may_block=deps.may_block,
            dra=deps.dra,
        )
        asked = ", ".join(asked_for)
        findings += [
            replace(
                f,
                message=f"{target.describe()} asks for {asked}, which DeviceClass {device_class} serves: "
                f"kube-scheduler would claim it for the pod, and {f.policy} refuses that claim ({f.message})",
            )
            for f in outcome.findings
        ]
    return findings


@dataclass(frozen=True)
class _ClassRules:
    """The policy set's gpu-dra-device-classes constraints alone, to judge a claim not yet made."""

    policies: PolicySet
    parameters: tuple[Mapping[str, Any], ...]
    clears: bool  # the template is the bundled text, which classes_allowed() models
    allow_all: bool  # ... and every constraint allows `*`, as the shipped one does: nothing to judge


_CLASS_RULES: dict[int, tuple[ConstraintSet, _ClassRules | None]] = {}


def _class_rules(policies: PolicySet) -> _ClassRules | None:
    """Built once per policy load (remembered by the constraint set, kept alive with its entry)."""
    constraints, engine = policies.constraints, policies.engine
    if constraints is None or engine is None:
        return None
    found = _CLASS_RULES.get(id(constraints))
    if found is not None and found[0] is constraints:
        return found[1]
    chosen: list[Constraint] = [c for c in constraints.constraints if c.kind == CLASS_RULE]
    template = engine.templates.get(CLASS_RULE)
    rules = None
    if chosen:
        clears = template is not None and fingerprint(template) == CLASS_RULE_FINGERPRINT
        parameters = tuple(c.parameters for c in chosen)
        everything = all(dra.allows_every_class(p) for p in parameters)
        subset = replace(policies, constraints=ConstraintSet(chosen))
        rules = _ClassRules(subset, parameters, clears, clears and everything)
    _CLASS_RULES.clear()  # one policy load is in force at a time
    _CLASS_RULES[id(constraints)] = (constraints, rules)
    return rules


def _claim_request(request: AdmissionRequest, claim: KubeObject, namespace: str) -> AdmissionRequest:
    """The claim's CREATE, as if asked by whoever asked for the pod (not the scheduler)."""
    gvk = {"group": DRA_GROUP, "version": "v1", "kind": "ResourceClaim"}
    gvr = {"group": DRA_GROUP, "version": "v1", "resource": "resourceclaims"}
    made: dict[str, Any] = {
        "uid": request.get("uid", ""),
        "kind": gvk,
        "resource": gvr,
        "requestKind": gvk,
        "requestResource": gvr,
        "name": claim["metadata"]["name"],
        "namespace": namespace,
        "operation": "CREATE",
        "userInfo": request.get("userInfo", {}),
        "object": claim,
        "oldObject": None,
        "dryRun": request.get("dryRun", False),
    }
    return cast(AdmissionRequest, made)


def _as_enforced(findings: list[Finding], enforcement: Enforcement) -> list[Finding]:
    if enforcement == "policy":
        return findings
    return [replace(f, action="warn") if f.action == "deny" else f for f in findings]


def _builtin(
    subject: Subject | None,
    deps: ReviewDeps,
    actions: frozenset[EnforcementAction],
    count: GpuCount | None,
    unseen: dra.Unseen = dra.NOTHING_UNSEEN,
    *,
    rejudge: bool = True,
) -> list[Finding]:
    if subject is None:
        return []
    policy = subject.policy
    # A claim the pod waits for may bring GPUs: it sidesteps a sharing policy as any claim would.
    claimed = (*_claim_sources(subject, deps.dra), *unseen.sources()) if policy is not None else ()
    if claimed and policy is not None and policy.sharing.mode == "dra":  # its own templates are no escape
        own = templates.own_sources(policy, subject.namespace, deps.dra or _NO_DRA)
        claimed = tuple(source for source in claimed if source not in own)
    found = builtin.check(subject.target, policy, deps.policies.shared_names, claimed, count, rejudge=rejudge)
    return [f for f in found if f.action in actions]


def _claim_sources(subject: Subject, dra_index: DraIndex | None) -> tuple[str, ...]:
    """The DRA claims that give the pod GPUs (none when it has no claims or they do not resolve:
    gpu-builtin/dra-claims names those)."""
    spec = subject.target.pod.get("spec")
    if dra_index is None or not isinstance(spec, dict) or not spec.get("resourceClaims"):
        return ()
    try:
        return tuple(claim.source for claim in pod_claims(subject.target.pod, subject.namespace, dra_index))
    except ClaimError:
        return ()


def _with_quota(
    request: AdmissionRequest,
    deps: ReviewDeps,
    actions: frozenset[EnforcementAction],
    findings: list[Finding],
    count: GpuCount | None = None,
) -> Decision:
    gate, quotas = deps.quota_gate, deps.policies.quotas
    if gate is None or not quotas:
        return decide(findings)
    if deps.quota_unavailable and gate.peek(request, quotas, count).applies:
        return _quota_unavailable(deps, findings, actions)
    try:
        # Only the enforcing review admits, and so reserves; the advisory one only looks.
        admit = gate.admit if "deny" in actions else gate.peek
        outcome = admit(request, quotas, count)
    except ClusterError as e:
        return deny(f"GPU quota cannot be checked right now: {e}", code=503)
    if not outcome.applies:
        return decide(findings)
    decision = decide(findings + [f for f in outcome.findings() if f.action in actions])
    if not decision.allowed:
        gate.release(outcome)
    return replace(decision, quota=outcome.audit())


def _quota_unavailable(
    deps: ReviewDeps, findings: list[Finding], actions: frozenset[EnforcementAction]
) -> Decision:
    mode = deps.settings.quota_failure_mode
    action: EnforcementAction = "deny" if mode == "closed" else "warn"
    finding = Finding("GPUQuota", action, f"GPU quota cannot be checked: {deps.quota_unavailable}")
    decision = decide(findings + ([finding] if action in actions else []))
    return replace(decision, code=503) if not decision.allowed else decision


def decide(findings: list[Finding]) -> Decision:
    """Deny if any finding denies; warn for warn findings; dryrun findings are only recorded."""
    denials = [f for f in findings if f.action == "deny"]
    warnings = clamp_warnings(f"{f.policy}: {f.message}" for f in findings if f.action == "warn")
    if denials:
        decision = deny("\n".join(f"[{f.policy}] {f.message}" for f in denials), findings=tuple(findings))
        return replace(decision, warnings=warnings)
    return Decision(allowed=True, warnings=warnings, findings=tuple(findings))


def skipped(request: AdmissionRequest, settings: ReviewSettings) -> bool:
    """Requests we never review: our own, those in excluded namespaces (no deadlocks, and the
    GPU stack's own pods), and the kubelet's mirror pods."""
    user = request.get("userInfo", {})
    if settings.own_username and user.get("username") == settings.own_username:
        return True
    namespace = request.get("namespace") or ""
    # A Namespace's own requests name it as their namespace: creating an exempt one is judged.
    judged_namespace = request.get("kind", {}).get("kind") == "Namespace"
    if namespace and not judged_namespace and glob_matches(settings.excluded_namespaces, namespace):
        return True
    return is_mirror_pod(request)


def is_mirror_pod(request: AdmissionRequest) -> bool:
    """A kubelet reflecting a static pod: it runs whether or not we admit its mirror, and only a
    node's own identity may create one (the NodeRestriction plugin), so denying it protects nothing."""
    groups = request.get("userInfo", {}).get("groups") or ()
    if NODES_GROUP not in groups or request["operation"] != "CREATE":
        return False
    obj = request.get("object")
    metadata = obj.get("metadata") if isinstance(obj, dict) else None
    annotations = metadata.get("annotations") if isinstance(metadata, dict) else None
    return isinstance(annotations, dict) and MIRROR_ANNOTATION in annotations


def _oversize(request: AdmissionRequest, deps: ReviewDeps) -> bounds.Oversize | None:
    obj, old = request.get("object"), request.get("oldObject")
    if deps.within_bounds is not None and deps.within_bounds.covers(obj, old):
        return None
    return bounds.oversize(obj, old)


def oversized(problem: bounds.Oversize, actions: frozenset[EnforcementAction] = ALL_ACTIONS) -> Decision:
    """An object past a size bound is refused unreviewed; the advisory webhook, which never
    denies, only says so."""
    finding = Finding(bounds.SIZE, "deny" if "deny" in actions else "warn", problem.message)
    if "deny" not in actions:
        warning = clamp_warnings([f"{bounds.SIZE}: {problem.message}"])
        return Decision(allowed=True, warnings=warning, findings=(finding,))
    return deny(f"[{bounds.SIZE}] {problem.message}", code=413, findings=(finding,))


def malformed(error: ShapeError) -> Decision:
    """An object whose fields have the wrong types is refused, and recorded as a finding."""
    # Named like every other denial, so that users see which rule refused it.
    return deny(f"[{MALFORMED}] {error}", code=400, findings=(Finding(MALFORMED, "deny", str(error)),))


def shape_checked(target: PodTarget) -> PodTarget:
    try:
        check_pod_shape(target)
    except ShapeError as e:
        raise ShapeError(f"{target.describe()}: {e}") from e
    return target


def scoped_pod(request: AdmissionRequest, deps: ReviewDeps) -> tuple[PodTarget, str] | None:
    """The pod of a request that skipped() lets through, and its namespace; None for other objects."""
    target = pod_target(request.get("object"))
    if target is None:
        return None
    namespace = request.get("namespace")
    if not namespace:  # else skipped() has judged it already
        namespace = _own_namespace(target) or "default"
        if glob_matches(deps.settings.excluded_namespaces, namespace):
            return None
    return target, namespace


def reviewed_pod(request: AdmissionRequest, deps: ReviewDeps) -> tuple[PodTarget, str] | None:
    """scoped_pod(), shape-checked: every pod is, GPUs or not, since the security rules read
    them all."""
    scoped = scoped_pod(request, deps)
    if scoped is not None:
        shape_checked(scoped[0])
    return scoped


def gpu_subject(
    reviewed: tuple[PodTarget, str] | None, deps: ReviewDeps, *, waits: bool = False
) -> tuple[Subject | None, GpuCount | None]:
    """(None, None) unless the reviewed pod asks for GPUs; then its sharing policy, if one applies,
    and its GPUs: read once, for every rule that counts (DRA claims included). `waits`: the pod
    names a claim that does not exist yet, which may bring GPUs, so it is a GPU pod whatever it
    asks for now."""
    if reviewed is None:
        return None, None
    target, namespace = reviewed
    count = gpu_reading(target, deps.policies.shared_names, deps.dra, namespace)
    if count is None and waits:
        count = count_gpus(target.pod, deps.dra, namespace)
    if count is None:
        return None, None
    return policy_subject(target, namespace, deps), count


def policy_subject(target: PodTarget, namespace: str, deps: ReviewDeps) -> Subject:
    """A GPU pod and the sharing policy that applies to it, if any."""
    # The apiserver gives every namespace this label; inventories and caches may omit it.
    labels = {"kubernetes.io/metadata.name": namespace, **deps.namespace_labels(namespace)}
    policy = select_policy(deps.policies.sharing, namespace, labels, target.labels)
    return Subject(target, namespace, policy)


def _own_namespace(target: PodTarget) -> str | None:
    metadata = target.pod.get("metadata")
    namespace = metadata.get("namespace") if isinstance(metadata, dict) else None
    return namespace if isinstance(namespace, str) else None


def is_gpu_pod(
    target: PodTarget, shared_names: tuple[str, ...], dra_index: DraIndex | None = None, namespace: str = ""
) -> bool:
    """Accelerators by resource name from any vendor, KAI's annotations, or (with a DRA snapshot)
    claims on GPU device classes and extended resources that GPU device classes serve. A claim
    that cannot be resolved makes a GPU pod too: the rules that count then deny it."""
    if _asks_by_name(target, shared_names):
        return True
    count = _dra_reading(target, dra_index, namespace)
    return count is not None


def gpu_reading(
    target: PodTarget, shared_names: tuple[str, ...], dra_index: DraIndex | None = None, namespace: str = ""
) -> GpuCount | None:
    """What the pod gets, read once; None for a pod that gets no accelerator (is_gpu_pod)."""
    if _asks_by_name(target, shared_names):
        return count_gpus(target.pod, dra_index, namespace)
    return _dra_reading(target, dra_index, namespace)


def _asks_by_name(target: PodTarget, shared_names: tuple[str, ...]) -> bool:
    return names.asks_kai(target.annotations) or any(
        resources.uses_gpu(c, shared_names) for _, c in target.containers()
    )


def _dra_reading(target: PodTarget, dra_index: DraIndex | None, namespace: str) -> GpuCount | None:
    if dra_index is None:
        return None
    spec = target.pod.get("spec")
    # Pods without claims pay nothing more unless some DeviceClass serves an extended resource
    # (its extendedResourceName, or the name Kubernetes gives every class).
    if not (isinstance(spec, dict) and spec.get("resourceClaims")) and not (
        dra_index.backed or (dra_index.may_serve_implicit and _asks_device_class(target))
    ):
        return None
    count = count_gpus(target.pod, dra_index, namespace)
    return count if count.error is not None or count.devices > 0 else None
