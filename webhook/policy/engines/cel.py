"""Gatekeeper's K8sNativeValidation (CEL) templates, evaluated in this process.

Semantics of Gatekeeper's CEL driver (pkg/drivers/k8scel/driver.go `Query`) on Kubernetes'
validator (apiserver pkg/admission/plugin/policy/validating/validator.go `Validate`):

- `object` is null on DELETE (the driver unsets it), `oldObject` is the old object, `request`
  the AdmissionRequest without its objects, `namespaceObject` the request's namespace when the
  inventory holds it. `variables.anyObject` is the object, or the old object on DELETE;
  `variables.params` the constraint's spec.parameters; then the template's own variables,
  each evaluated lazily, once per constraint and request.
- Match conditions first: one that is false skips the constraint; an error (with none false)
  is a failure.
- Each validation that is not true is a violation. Its message is the messageExpression's
  value (trimmed; not when empty, longer than 5,120 bytes or multi-line), else `message`,
  else `failed expression: <expression>`.
- A runtime error (or a budget exceeded) under the source's failurePolicy Fail is the
  constraint's error, which denies unless the constraint's own failure policy is Ignore; under
  Ignore it is dropped, as Kubernetes admits. Nothing raises out of evaluate.

CombinedEngine runs the CEL templates here and hands the others to a Rego engine (regopy or
OPA), in one results list; `with_cel` wraps an engine factory so that every caller (policy
loading, Suites, scan, review) gets the same split.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from webhook.accounting.count import NO_GPUS, GpuCount
from webhook.admission_cel import CelEvaluationError, Program, Variables, to_cel, to_python
from webhook.policy.engines import ConstraintSet, Engine, plan
from webhook.validation.gatekeeper import Constraint, ConstraintTemplate
from webhook.validation.gatekeeper_cel import ANY_OBJECT, PARAMS, CelSource, Validation
from webhook.validation.gatekeeper_input import Inventory
from webhook.validation.results import ConstraintResult, Violation

MAX_MESSAGE_BYTES: Final = 5 * 1024  # apiserver pkg/apis/cel/config.go MaxEvaluatedMessageExpressionSizeBytes
EngineFactory = Callable[[Sequence[ConstraintTemplate], Sequence[Constraint]], Engine]


class CelEngine:
    """The templates evaluated by CEL; their expressions were compiled when they were parsed."""

    def __init__(self, templates: Sequence[ConstraintTemplate]) -> None:
        self.templates = {t.kind: t for t in templates if t.cel is not None}

    def evaluate(
        self,
        request: Mapping[str, Any],
        constraints: ConstraintSet,
        inventory: Inventory | None = None,
        *,
        may_block: bool = True,
        gpu: GpuCount | None = None,
    ) -> list[ConstraintResult]:
        # CEL does not read input.gpu: the count is not worth making.
        work = plan(request, constraints, inventory, self.templates, may_block=may_block, gpu=gpu or NO_GPUS)
        if not work.by_kind:
            return work.decided
        results = work.decided
        try:
            values = request_values(work.review, inventory)
        except CelEvaluationError as e:
            return results + [ConstraintResult(c, error=str(e)) for c in work.constraints]
        for kind, group in work.by_kind.items():
            source = self.templates[kind].cel
            assert source is not None  # only CEL templates are kept
            results += [evaluate_constraint(source, constraint, values) for constraint in group]
        return results

    def close(self) -> None:
        pass


@dataclass(frozen=True)
class RequestValues:
    """The CEL values every constraint of one request shares, converted once."""

    names: Mapping[str, Any]  # object, oldObject, request, namespaceObject
    any_object: Any  # variables.anyObject


def request_values(review: Mapping[str, Any], inventory: Inventory | None) -> RequestValues:
    deleting = review.get("operation") == "DELETE"
    request = {key: value for key, value in review.items() if key not in ("object", "oldObject")}
    names = {
        "object": None if deleting else to_cel(review.get("object")),
        "oldObject": to_cel(review.get("oldObject")),
        "request": to_cel(request),
        "namespaceObject": to_cel(_namespace(inventory, review.get("namespace"))),
    }
    any_object = names["oldObject"] if deleting else names["object"]
    return RequestValues(names, any_object)


def _namespace(inventory: Inventory | None, name: Any) -> Any:
    if not inventory or not isinstance(name, str) or not name:
        return None
    cluster = inventory.get("cluster")
    namespaces = cluster.get("v1", {}).get("Namespace", {}) if isinstance(cluster, Mapping) else {}
    found = namespaces.get(name) if isinstance(namespaces, Mapping) else None
    return found if isinstance(found, Mapping) else None


def evaluate_constraint(source: CelSource, constraint: Constraint, values: RequestValues) -> ConstraintResult:
    try:
        return _evaluate(source, constraint, values)
    except CelEvaluationError as e:
        return _failed(source, constraint, [str(e)])
    except Exception as e:  # an engine defect must not take the request down with it
        reason = f"CEL evaluation failed inside the engine: {type(e).__name__}"
        return ConstraintResult(constraint, error=reason)


def _evaluate(source: CelSource, constraint: Constraint, values: RequestValues) -> ConstraintResult:
    scope = dict(values.names)
    scope["variables"] = _variables(source, constraint, values.any_object, scope)
    matched, errors = _match(source, scope)
    if not matched:
        return ConstraintResult(constraint)
    violations = []
    if not errors:
        for validation in source.validations:
            try:
                passed = to_python(validation.expression.evaluate_cel(scope)) is True
            except CelEvaluationError as e:
                errors.append(f"expression {_trimmed(validation.expression)!r} resulted in error: {e}")
                continue
            if not passed:
                violations.append(Violation(_message(validation, scope)))
    if errors:
        return _failed(source, constraint, errors, tuple(violations))
    return ConstraintResult(constraint, tuple(violations))


def _variables(
    source: CelSource, constraint: Constraint, any_object: Any, scope: Mapping[str, Any]
) -> Variables:
    params = to_cel(dict(constraint.parameters))
    definitions: dict[str, Callable[[], Any]] = {ANY_OBJECT: lambda: any_object, PARAMS: lambda: params}
    for name, program in source.variables:
        definitions[name] = _deferred(program, scope)
    return Variables(definitions)


def _deferred(program: Program, scope: Mapping[str, Any]) -> Callable[[], Any]:
    return lambda: program.evaluate_cel(scope)


def _match(source: CelSource, scope: Mapping[str, Any]) -> tuple[bool, list[str]]:
    """apiserver admission/plugin/webhook/matchconditions/matcher.go: a false condition wins
    over errors; otherwise the errors."""
    errors = []
    for name, program in source.match_conditions:
        try:
            value = to_python(program.evaluate_cel(scope))
        except CelEvaluationError as e:
            errors.append(f"matchCondition {name!r}: {e}")
            continue
        if value is False:
            return False, []
        if value is not True:
            errors.append(f"matchCondition {name!r}: the result is not a bool")
    return True, errors


def _message(validation: Validation, scope: Mapping[str, Any]) -> str:
    if validation.message_expression is not None:
        try:
            value = to_python(validation.message_expression.evaluate_cel(scope))
        except CelEvaluationError:
            value = None  # Kubernetes logs it and falls back
        if isinstance(value, str):
            text = value.strip()
            if text and len(text.encode()) <= MAX_MESSAGE_BYTES and "\n" not in text:
                return text
    if validation.message.strip():
        return validation.message.strip()
    return f"failed expression: {_trimmed(validation.expression)}"


def _trimmed(program: Program) -> str:
    return program.expression.strip()


def _failed(
    source: CelSource, constraint: Constraint, errors: list[str], violations: tuple[Violation, ...] = ()
) -> ConstraintResult:
    if source.failure_policy == "Ignore":
        return ConstraintResult(constraint, violations)
    return ConstraintResult(constraint, violations, error="; ".join(errors)[:1000])


class CombinedEngine:
    """CEL templates here, the others on a Rego engine: one results list."""

    def __init__(self, rego: Engine, cel: CelEngine) -> None:
        self._rego, self._cel = rego, cel
        self._cel_kinds = frozenset(cel.templates)
        self.templates = {**rego.templates, **cel.templates}

    def evaluate(
        self,
        request: Mapping[str, Any],
        constraints: ConstraintSet,
        inventory: Inventory | None = None,
        *,
        may_block: bool = True,
        gpu: GpuCount | None = None,
    ) -> list[ConstraintResult]:
        by_cel, others = constraints.split(self._cel_kinds)
        results = self._rego.evaluate(request, others, inventory, may_block=may_block, gpu=gpu)
        return results + self._cel.evaluate(request, by_cel, inventory, may_block=may_block, gpu=gpu)

    def close(self) -> None:
        self._rego.close()


def with_cel(factory: EngineFactory) -> EngineFactory:
    """`factory` for the templates evaluated by Rego; CelEngine for those evaluated by CEL."""

    def build(templates: Sequence[ConstraintTemplate], constraints: Sequence[Constraint]) -> Engine:
        by_cel = [t for t in templates if t.evaluated_by_cel]
        if not by_cel:
            return factory(templates, constraints)
        cel = CelEngine(by_cel)
        by_rego = [t for t in templates if not t.evaluated_by_cel]
        return CombinedEngine(factory(by_rego, constraints), cel) if by_rego else cel

    return build
