"""ValidatingAdmissionPolicies as findings, audit annotations and a status code, decided as
kube-apiserver decides them (kubernetes/kubernetes staging/src/k8s.io/apiserver/pkg/admission/
plugin/policy/validating/dispatcher.go and validator.go)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

import orjson

from webhook.decision import Finding
from webhook.native.bindings import in_force
from webhook.native.evaluate import EvaluationError, Scope, conditions_met
from webhook.native.model import Binding, Bound, NativePolicies, Policy, Validation
from webhook.native.params import ParamError, ParamSource
from webhook.native.rules import matches
from webhook.types import AdmissionRequest, EnforcementAction

FAILURE_ANNOTATION = "validation.policy.admission.k8s.io/validation_failure"
MAX_MESSAGE = 5 * 1024  # celconfig.MaxEvaluatedMessageExpressionSizeBytes
MAX_ANNOTATION_VALUE = 10 * 1024
CODES = {"Unauthorized": 401, "Forbidden": 403, "Invalid": 422, "RequestEntityTooLarge": 413}
_ACTIONS: dict[str, EnforcementAction] = {"Deny": "deny", "Warn": "warn", "Audit": "dryrun"}


@dataclass
class NativeOutcome:
    findings: list[Finding] = field(default_factory=list)
    audit_annotations: dict[str, str] = field(default_factory=dict)
    code: int = 403  # of the first denial: its validation's reason

    def deny(self, policy: Policy, message: str, code: int = 403) -> None:
        if not any(f.action == "deny" for f in self.findings):
            self.code = code
        self.findings.append(Finding(policy.name, "deny", message))


def validate(
    request: AdmissionRequest,
    native: NativePolicies,
    namespace_labels: Mapping[str, str],
    params: ParamSource | None,
) -> NativeOutcome:
    outcome = NativeOutcome()
    for bound in native.validating:
        if matches(bound.policy.match, request, namespace_labels):
            _policy(bound, request, namespace_labels, params, outcome)
    return outcome


def _policy(
    bound: Bound,
    request: AdmissionRequest,
    labels: Mapping[str, str],
    params: ParamSource | None,
    outcome: NativeOutcome,
) -> None:
    policy = bound.policy
    published: dict[str, list[str]] = {}
    for binding, selected in in_force(bound, request, labels, params):
        if isinstance(selected, ParamError):
            _failed(policy, binding, f"failed to configure binding: {selected}", outcome)
            continue
        for param in selected:
            scope = Scope(policy, request, request.get("object"), param, labels)
            _evaluate(policy, binding, scope, outcome, published)
    for key, values in published.items():
        outcome.audit_annotations[f"{policy.name}/{key}"] = ", ".join(values)


def _evaluate(
    policy: Policy, binding: Binding, scope: Scope, outcome: NativeOutcome, published: dict[str, list[str]]
) -> None:
    try:
        if not conditions_met(policy.match_conditions, scope):
            return
    except EvaluationError as e:
        _failed(policy, binding, str(e), outcome)
        return
    for index, validation in enumerate(policy.validations):
        try:
            passed = scope.evaluate(validation.program) is True
        except EvaluationError as e:
            _failed(policy, binding, str(e), outcome)
            continue
        if not passed:
            _violated(policy, binding, index, validation, _message(validation, scope), outcome)
    for annotation in policy.audit_annotations:
        try:
            value = scope.evaluate(annotation.program)
        except EvaluationError as e:
            _failed(policy, binding, str(e), outcome)
            continue
        if value is not None and not isinstance(value, str):
            reason = f"valueExpression '{annotation.program.expression}' must return a string or null"
            _failed(policy, binding, reason, outcome)
        elif value and value.strip():
            values = published.setdefault(annotation.name, [])
            if value.strip()[:MAX_ANNOTATION_VALUE] not in values:
                values.append(value.strip()[:MAX_ANNOTATION_VALUE])


def _message(validation: Validation, scope: Scope) -> str:
    """messageExpression if it gives one usable line, else message, else the expression."""
    if validation.message_program is not None:
        try:
            text = scope.evaluate(validation.message_program)
        except EvaluationError:
            text = None
        if isinstance(text, str) and text.strip() and "\n" not in text and len(text.strip()) <= MAX_MESSAGE:
            return text.strip()
    return validation.message or f"failed expression: {validation.program.expression.strip()}"


def _violated(
    policy: Policy, binding: Binding, index: int, validation: Validation, message: str, outcome: NativeOutcome
) -> None:
    for action in binding.actions:
        if action == "Deny":
            text = _denied(policy, binding, message)
            outcome.deny(policy, text, CODES.get(validation.reason, 422))
        elif action == "Warn":
            # kube-apiserver's "Validation failed for ... with binding ...: MSG", shortened: a warning
            # holds 120 characters, and the policy's name comes first already.
            outcome.findings.append(Finding(policy.name, "warn", f"binding '{binding.name}': {message}"))
        else:
            outcome.findings.append(Finding(policy.name, "dryrun", _denied(policy, binding, message)))
            outcome.audit_annotations[FAILURE_ANNOTATION] = _failure_value(policy, binding, index, message)


def _failed(policy: Policy, binding: Binding | None, message: str, outcome: NativeOutcome) -> None:
    """An error: denies under failurePolicy Fail; under Ignore it is only recorded."""
    if policy.failure_policy == "Ignore":
        outcome.findings.append(Finding(policy.name, "dryrun", f"ignored (failurePolicy Ignore): {message}"))
        return
    outcome.deny(policy, _denied(policy, binding, message))


def _denied(policy: Policy, binding: Binding | None, message: str) -> str:
    if binding is None:
        return f"{policy.kind} '{policy.name}' denied request: {message}"
    return f"{policy.kind} '{policy.name}' with binding '{binding.name}' denied request: {message}"


def _failure_value(policy: Policy, binding: Binding, index: int, message: str) -> str:
    value = [
        {
            "message": message,
            "policy": policy.name,
            "binding": binding.name,
            "expressionIndex": index,
            "validationActions": list(binding.actions),
        }
    ]
    return orjson.dumps(value).decode()
