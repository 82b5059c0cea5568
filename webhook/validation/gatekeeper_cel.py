"""A ConstraintTemplate's K8sNativeValidation source: read, checked and compiled at load. Pure.

Gatekeeper's CEL driver (pkg/drivers/k8scel/schema/schema.go `Source`) reads a `code` entry
with `engine: K8sNativeValidation` whose `source` holds `variables` (name, expression),
`validations` (expression, message, messageExpression), `matchCondition` (name, expression:
Gatekeeper's field name is singular) and `failurePolicy` (Fail, the default, or Ignore).
The driver (pkg/drivers/k8scel/driver.go `AddTemplate`) declares two variables before the
template's own: `anyObject` (the object, or the old object on DELETE) and `params` (the
constraint's spec.parameters), from pkg/drivers/k8scel/transform/cel_snippets.go. Variables
may read `params`; validations, messages and match conditions may not. Names starting with
`gatekeeper_internal_`, and variables named `params` or `anyObject`, are reserved.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Final, Literal

from webhook.admission_cel import CelCompileError, Program, compile_program

ENGINE: Final = "K8sNativeValidation"
RESERVED_PREFIX: Final = "gatekeeper_internal_"
ANY_OBJECT: Final = "anyObject"
PARAMS: Final = "params"
# What every expression sees (apiserver admission/plugin/cel composition: no authorizer, as
# Gatekeeper's driver declares none); variables also see `params`.
NAMES: Final = frozenset({"object", "oldObject", "request", "variables", "namespaceObject"})
VARIABLE_NAMES: Final = NAMES | {PARAMS}
FAILURE_POLICIES: Final = ("Fail", "Ignore")
_IDENTIFIER: Final = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")

FailurePolicy = Literal["Fail", "Ignore"]


@dataclass(frozen=True)
class Validation:
    expression: Program
    message: str
    message_expression: Program | None
    reason: str | None


@dataclass(frozen=True)
class CelSource:
    variables: tuple[tuple[str, Program], ...]
    validations: tuple[Validation, ...]
    match_conditions: tuple[tuple[str, Program], ...]
    failure_policy: FailurePolicy
    path: str  # e.g. "spec.targets[0].code[0].source"

    @property
    def expressions(self) -> Iterator[str]:
        for _, program in (*self.variables, *self.match_conditions):
            yield program.expression
        for validation in self.validations:
            yield validation.expression.expression
            if validation.message_expression is not None:
                yield validation.message_expression.expression


Problem = tuple[str, str]  # (field path, reason)


def cel_block(target: Mapping[str, Any]) -> tuple[str, Any] | None:
    """The path and `source` of the target's first K8sNativeValidation code entry, as the driver
    takes the first (schema.go `GetSourceFromTemplate`)."""
    for i, code in enumerate(target.get("code") or []):
        if isinstance(code, Mapping) and code.get("engine") == ENGINE:
            return f"spec.targets[0].code[{i}].source", code.get("source")
    return None


def parse_source(path: str, source: Any) -> tuple[CelSource | None, list[Problem]]:
    """The compiled source, or every problem found in it (field path, reason)."""
    if not isinstance(source, Mapping):
        return None, [(path, "must be a mapping with validations, variables, matchCondition")]
    problems: list[Problem] = []
    if "matchConditions" in source:
        problems.append((f"{path}.matchConditions", "unknown field: Gatekeeper's field is matchCondition"))
    policy = source.get("failurePolicy", "Fail")
    if policy not in FAILURE_POLICIES:
        problems.append((f"{path}.failurePolicy", f"must be one of {', '.join(FAILURE_POLICIES)}"))
    variables = _variables(path, source.get("variables"), problems)
    declared = [ANY_OBJECT, PARAMS, *(name for name, _ in variables)]
    conditions = _conditions(path, source.get("matchCondition"), declared, problems)
    validations = _validations(path, source.get("validations"), declared, problems)
    if problems:
        return None, problems
    chosen: FailurePolicy = "Ignore" if policy == "Ignore" else "Fail"
    return CelSource(tuple(variables), tuple(validations), tuple(conditions), chosen, path), []


def _entries(path: str, value: Any, problems: list[Problem]) -> list[tuple[str, Mapping[str, Any]]]:
    if value is None:
        return []
    if not isinstance(value, list):
        problems.append((path, "must be a list"))
        return []
    found = []
    for i, entry in enumerate(value):
        if isinstance(entry, Mapping):
            found.append((f"{path}[{i}]", entry))
        else:
            problems.append((f"{path}[{i}]", "must be a mapping"))
    return found


def _compiled(
    path: str,
    entry: Mapping[str, Any],
    key: str,
    names: frozenset[str],
    variables: Collection[str],
    result: str | None,
    problems: list[Problem],
) -> Program | None:
    text = entry.get(key)
    if not isinstance(text, str) or not text.strip():
        problems.append((f"{path}.{key}", "must be a non-empty CEL expression"))
        return None
    try:
        return compile_program(
            text, names, variables=variables, result_types=None if result is None else {result}
        )
    except CelCompileError as e:
        problems.append((f"{path}.{key}", f"CEL: {e}"))
        return None


def _name(
    path: str, entry: Mapping[str, Any], taken: Collection[str], problems: list[Problem], *, identifier: bool
) -> str | None:
    """A variable's name is read in expressions, so it must be a CEL identifier; a match
    condition's only names it in messages."""
    name = entry.get("name")
    if not isinstance(name, str) or not name or (identifier and not _IDENTIFIER.match(name)):
        problems.append((f"{path}.name", "must be a CEL identifier" if identifier else "must be a name"))
        return None
    if name.startswith(RESERVED_PREFIX):
        problems.append((f"{path}.name", f"cannot start with {RESERVED_PREFIX!r}, which Gatekeeper reserves"))
        return None
    if name in taken:
        problems.append((f"{path}.name", f"{name!r} is already declared"))
        return None
    return name


def _variables(path: str, value: Any, problems: list[Problem]) -> list[tuple[str, Program]]:
    """In order: a variable reads only the variables declared before it (apiserver
    admission/plugin/cel/composition.go compiles and declares them one by one)."""
    found: list[tuple[str, Program]] = []
    declared = [ANY_OBJECT, PARAMS]
    for where, entry in _entries(f"{path}.variables", value, problems):
        name = _name(where, entry, declared, problems, identifier=True)
        program = _compiled(where, entry, "expression", VARIABLE_NAMES, declared, None, problems)
        if name is not None:
            declared.append(name)
            if program is not None:
                found.append((name, program))
    return found


def _conditions(
    path: str, value: Any, variables: Collection[str], problems: list[Problem]
) -> list[tuple[str, Program]]:
    found: list[tuple[str, Program]] = []
    for where, entry in _entries(f"{path}.matchCondition", value, problems):
        name = _name(where, entry, [n for n, _ in found], problems, identifier=False)
        program = _compiled(where, entry, "expression", NAMES, variables, "bool", problems)
        if name is not None and program is not None:
            found.append((name, program))
    return found


def _validations(
    path: str, value: Any, variables: Collection[str], problems: list[Problem]
) -> list[Validation]:
    found = []
    for where, entry in _entries(f"{path}.validations", value, problems):
        expression = _compiled(where, entry, "expression", NAMES, variables, "bool", problems)
        message_expression = None
        if entry.get("messageExpression") is not None:
            message_expression = _compiled(
                where, entry, "messageExpression", NAMES, variables, "string", problems
            )
        message, reason = entry.get("message", ""), entry.get("reason")
        if not isinstance(message, str):
            problems.append((f"{where}.message", "must be a string"))
        if reason is not None and not isinstance(reason, str):
            problems.append((f"{where}.reason", "must be a string"))
        if expression is not None and isinstance(message, str):
            found.append(Validation(expression, message, message_expression, reason))
    return found
