"""MutatingAdmissionPolicies applied to a request's object, in policy name order and, within a
policy, binding by binding and mutation by mutation, each seeing the object the previous left
(kubernetes/kubernetes staging/src/k8s.io/apiserver/pkg/admission/plugin/policy/mutating/
dispatcher.go). Errors follow the policy's failurePolicy."""

from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import jsonpatch

from webhook.admission_cel import CelEvaluationError
from webhook.admission_cel.patch_types import apply_configuration, json_patch
from webhook.decision import Finding
from webhook.native.apply import ApplyError, merge
from webhook.native.bindings import in_force
from webhook.native.evaluate import EvaluationError, Scope, conditions_met
from webhook.native.model import Binding, Bound, Mutation, NativePolicies, Policy
from webhook.native.params import ParamError, ParamSource
from webhook.native.rules import matches
from webhook.types import AdmissionRequest, KubeObject

MAX_PATCH_OPERATIONS = 1024


@dataclass
class MutationOutcome:
    object: KubeObject | None
    findings: list[Finding] = field(default_factory=list)
    denial: str | None = None
    # The policies that changed the object and asked to be run again when later mutations change it.
    reinvoke: tuple[str, ...] = ()


def mutate(
    request: AdmissionRequest,
    native: NativePolicies,
    namespace_labels: Mapping[str, str],
    params: ParamSource | None,
    *,
    only: frozenset[str] | None = None,
) -> MutationOutcome:
    """`only`: the names of the policies to run (a reinvocation runs those that asked for one)."""
    obj = request.get("object")
    outcome = MutationOutcome(copy.deepcopy(obj) if isinstance(obj, dict) else None)
    if outcome.object is None:
        return outcome
    reinvoke: list[str] = []
    for bound in native.mutating:
        if only is not None and bound.policy.name not in only:
            continue
        if not matches(bound.policy.match, request, namespace_labels):
            continue
        before = outcome.object
        _policy(bound, request, namespace_labels, params, outcome)
        if outcome.denial is not None:
            return outcome
        if bound.policy.reinvoke and outcome.object != before:
            reinvoke.append(bound.policy.name)
    outcome.reinvoke = tuple(reinvoke)
    return outcome


def _policy(
    bound: Bound,
    request: AdmissionRequest,
    labels: Mapping[str, str],
    params: ParamSource | None,
    outcome: MutationOutcome,
) -> None:
    policy = bound.policy
    for binding, selected in in_force(bound, request, labels, params):
        if isinstance(selected, ParamError):
            _failed(policy, binding, f"failed to configure binding: {selected}", outcome)
            continue
        for param in selected:
            scope = Scope(policy, request, outcome.object, param, labels)
            try:
                if conditions_met(policy.match_conditions, scope):
                    outcome.object = _mutations(policy, scope, outcome.object)
                    outcome.findings.append(
                        Finding(policy.name, "dryrun", f"applied by binding '{binding.name}'")
                    )
            except (
                EvaluationError,
                ApplyError,
                jsonpatch.JsonPatchException,
                jsonpatch.JsonPointerException,
            ) as e:
                _failed(policy, binding, str(e), outcome)
            if outcome.denial is not None:
                return


def _mutations(policy: Policy, scope: Scope, obj: KubeObject | None) -> KubeObject | None:
    for mutation in policy.mutations:
        scope.base["object"] = obj
        obj = _apply(mutation, scope.evaluate_cel(mutation.program), obj)
    return obj


def _apply(mutation: Mutation, result: Any, obj: KubeObject | None) -> KubeObject:
    try:
        if mutation.patch_type == "ApplyConfiguration":
            merged: KubeObject = merge(obj, apply_configuration(result))
            return merged
        operations = json_patch(result)
    except CelEvaluationError as e:
        raise EvaluationError(f"expression '{mutation.program.expression.strip()}': {e}") from e
    if len(operations) > MAX_PATCH_OPERATIONS:
        raise EvaluationError(f"the JSON patch holds more than {MAX_PATCH_OPERATIONS} operations")
    patched: KubeObject = jsonpatch.apply_patch(obj, operations)
    return patched


def _failed(policy: Policy, binding: Binding, message: str, outcome: MutationOutcome) -> None:
    text = f"policy '{policy.name}' with binding '{binding.name}' denied request: {message}"
    if policy.failure_policy == "Ignore":
        outcome.findings.append(Finding(policy.name, "dryrun", f"ignored (failurePolicy Ignore): {text}"))
        return
    outcome.denial = text
    outcome.findings.append(Finding(policy.name, "deny", text))
