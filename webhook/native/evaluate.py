"""One evaluation of a policy for a request and a param: the CEL activation, variables computed
lazily (only those an expression names, once each), and matchConditions."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from webhook.admission_cel import CelEvaluationError, Program, to_cel, to_python
from webhook.native.model import Named, Policy
from webhook.native.rules import is_namespace
from webhook.types import AdmissionRequest, KubeObject

_VARIABLE_REFERENCE = re.compile(r"\bvariables\s*\.\s*([A-Za-z_][A-Za-z0-9_]*)")
_REQUEST_FIELDS = (
    "uid",
    "kind",
    "resource",
    "subResource",
    "requestKind",
    "requestResource",
    "requestSubResource",
    "name",
    "namespace",
    "operation",
    "userInfo",
    "dryRun",
    "options",
)


class EvaluationError(Exception):
    """An expression failed at run time: the policy's failurePolicy decides."""


class Scope:
    """The names an expression of one (policy, binding, param) evaluation reads."""

    def __init__(
        self,
        policy: Policy,
        request: AdmissionRequest,
        obj: KubeObject | None,
        param: KubeObject | None,
        namespace_labels: Mapping[str, str],
    ) -> None:
        self.base: dict[str, Any] = {
            "object": obj,
            "oldObject": request.get("oldObject"),
            "request": {k: request[k] for k in _REQUEST_FIELDS if k in request},  # type: ignore[literal-required]
            "params": param,
            "namespaceObject": _namespace_object(request, namespace_labels),
        }
        self.variables = {v.name: v.program for v in policy.variables}
        self.computed: dict[str, Any] = {}
        self.computing: set[str] = set()

    def evaluate(self, program: Program) -> Any:
        """The expression's value as plain Python."""
        return to_python(self.evaluate_cel(program))

    def evaluate_cel(self, program: Program) -> Any:
        """The expression's CEL value, constructed messages (`Object{...}`) kept as such."""
        activation = {**self.base, "variables": self._variables_of(program)}
        try:
            return program.evaluate_cel({name: to_cel(value) for name, value in activation.items()})
        except CelEvaluationError as e:
            raise EvaluationError(f"expression '{program.expression.strip()}' resulted in error: {e}") from e

    def _variables_of(self, program: Program) -> dict[str, Any]:
        names = {n for n in _VARIABLE_REFERENCE.findall(program.expression) if n in self.variables}
        return {name: self._variable(name) for name in sorted(names)}

    def _variable(self, name: str) -> Any:
        if name not in self.computed:
            if name in self.computing:
                raise EvaluationError(f"variable {name!r} refers to itself")
            self.computing.add(name)
            self.computed[name] = self.evaluate(self.variables[name])
            self.computing.discard(name)
        return self.computed[name]


def conditions_met(conditions: tuple[Named, ...], scope: Scope) -> bool:
    """False as soon as one condition is false; an error counts only when none is false
    (kubernetes/kubernetes staging/src/k8s.io/apiserver/pkg/admission/plugin/webhook/
    matchconditions/matcher.go)."""
    failure: EvaluationError | None = None
    for condition in conditions:
        try:
            result = scope.evaluate(condition.program)
        except EvaluationError as e:
            failure = failure or EvaluationError(f"matchCondition '{condition.name}': {e}")
            continue
        if result is not True:
            if result is not False:
                failure = failure or EvaluationError(
                    f"matchCondition '{condition.name}' did not return a bool"
                )
                continue
            return False
    if failure is not None:
        raise failure
    return True


def _namespace_object(request: AdmissionRequest, labels: Mapping[str, str]) -> KubeObject | None:
    """What is known here of the request's Namespace: its name and labels (null for cluster-scoped
    objects, and for a Namespace itself, as kube-apiserver has it)."""
    name = request.get("namespace") or ""
    if not name or is_namespace(request):
        return None
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "labels": dict(labels)}}
