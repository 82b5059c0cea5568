"""The Gatekeeper model: ConstraintTemplates and their Constraints, read from loaded YAML. Pure.

The caller (the policy loader, or the Suite runner) reads the files; this module checks
the documents and names the file, line and field of every problem. `line_of(path)`
gives the 1-based line of a field such as `spec.targets[0].rego` (0 when unknown).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

import jsonschema

from webhook.errors import PolicyError, PolicyProblem
from webhook.match import SelectorError
from webhook.types import EnforcementAction
from webhook.validation.constraint_match import ConstraintMatch, parse_match
from webhook.validation.gatekeeper_cel import CelSource, cel_block, parse_source

TARGET = "admission.k8s.gatekeeper.sh"
TEMPLATE_API_VERSIONS = ("templates.gatekeeper.sh/v1", "templates.gatekeeper.sh/v1beta1")
CONSTRAINT_GROUP = "constraints.gatekeeper.sh"
CONSTRAINT_API_VERSIONS = tuple(f"{CONSTRAINT_GROUP}/{v}" for v in ("v1beta1", "v1alpha1", "v1"))
ACTIONS: tuple[EnforcementAction, ...] = ("deny", "warn", "dryrun")
# A constraint whose evaluation fails refuses the request (Fail) unless annotated Ignore.
FAILURE_POLICY_ANNOTATION = "gpu-webhook.io/failure-policy"
FAILURE_POLICIES = ("Fail", "Ignore")
_KIND = re.compile(r"^[A-Za-z][A-Za-z0-9]*$")

LineOf = Callable[[str], int]


def no_lines(path: str) -> int:
    return 0


@dataclass(frozen=True)
class Where:
    """The file a document came from, and how to find the line of one of its fields."""

    file: str
    line_of: LineOf = no_lines

    def problem(self, path: str, reason: str) -> PolicyProblem:
        return PolicyProblem(self.file, self.line_of(path) or self.line_of(""), path, reason)


@dataclass(frozen=True)
class RegoSource:
    """One Rego module of a template, with where its first line sits in the YAML file."""

    text: str
    path: str  # e.g. "spec.targets[0].libs[1]"
    file: str
    first_line: int  # 0 when unknown
    v1: bool  # declared `version: "v1"`; otherwise Gatekeeper reads it as v0

    def file_line(self, rego_line: int) -> int:
        return self.first_line + rego_line - 1 if self.first_line else 0


@dataclass(frozen=True)
class ConstraintTemplate:
    """A template with a Rego source, a K8sNativeValidation (CEL) source, or both. With both,
    CEL is evaluated: Gatekeeper gives its K8sNativeValidation driver priority over Rego
    (website/docs/validating-admission-policy.md; main.go registers that driver first)."""

    name: str
    kind: str
    rego: RegoSource | None
    libs: tuple[RegoSource, ...]
    schema: Mapping[str, Any] | None
    where: Where = field(compare=False)
    cel: CelSource | None = None

    @property
    def evaluated_by_cel(self) -> bool:
        return self.cel is not None

    @property
    def sources(self) -> tuple[RegoSource, ...]:
        """The Rego modules; none for a template that only has CEL."""
        return () if self.rego is None else (self.rego, *self.libs)

    @cached_property  # asked on every review
    def uses_inventory(self) -> bool:
        """Whether evaluating needs data.inventory: Rego that reads it, or CEL's namespaceObject."""
        if self.cel is not None:
            return any("namespaceObject" in text for text in self.cel.expressions)
        return any("inventory" in s.text for s in self.sources)


@dataclass(frozen=True)
class Constraint:
    kind: str
    name: str
    action: EnforcementAction
    match: ConstraintMatch
    parameters: Mapping[str, Any]
    where: Where = field(compare=False)
    failure_policy: str = "Fail"

    @property
    def id(self) -> str:
        return f"{self.kind}/{self.name}"


@dataclass(frozen=True)
class GatekeeperPolicies:
    templates: tuple[ConstraintTemplate, ...] = ()
    constraints: tuple[Constraint, ...] = ()


def parse_documents(documents: Iterable[tuple[Mapping[str, Any], Where]]) -> GatekeeperPolicies:
    """Every ConstraintTemplate, then every Constraint, among loaded documents (others are
    ignored); raise PolicyError with every problem, duplicates included."""
    chosen = list(documents)
    problems: list[PolicyProblem] = []
    templates: dict[str, ConstraintTemplate] = {}
    for doc, where in (d for d in chosen if is_template(d[0])):
        try:
            template = parse_template(doc, where)
        except PolicyError as e:
            problems += e.problems
            continue
        if template.kind in templates:
            other = templates[template.kind].where.file
            problems.append(
                where.problem("spec.crd.spec.names.kind", f"{template.kind} is also defined in {other}")
            )
        templates[template.kind] = template
    constraints: dict[str, Constraint] = {}
    for doc, where in (d for d in chosen if is_constraint(d[0])):
        try:
            constraint = parse_constraint(doc, where, templates)
        except PolicyError as e:
            problems += e.problems
            continue
        if constraint.id in constraints:
            other = constraints[constraint.id].where.file
            problems.append(where.problem("metadata.name", f"{constraint.id} is also defined in {other}"))
        constraints[constraint.id] = constraint
    if problems:
        raise PolicyError(problems)
    return GatekeeperPolicies(tuple(templates.values()), tuple(constraints.values()))


def is_template(doc: Mapping[str, Any]) -> bool:
    return doc.get("kind") == "ConstraintTemplate" and str(doc.get("apiVersion", "")).startswith("templates.")


def is_constraint(doc: Mapping[str, Any]) -> bool:
    return str(doc.get("apiVersion", "")).split("/")[0] == CONSTRAINT_GROUP


# -- ConstraintTemplate -------------------------------------------------------------


def parse_template(doc: Mapping[str, Any], where: Where) -> ConstraintTemplate:
    problems = list(_template_problems(doc, where))
    if problems:
        raise PolicyError(problems)
    spec = doc["spec"]
    kind = spec["crd"]["spec"]["names"]["kind"]
    target = spec["targets"][0]
    rego, libs = _rego_sources(target, where) if _rego_block(target) is not None else (None, ())
    cel = _cel_source(target, where)
    validation = (spec["crd"]["spec"].get("validation") or {}).get("openAPIV3Schema")
    return ConstraintTemplate(doc["metadata"]["name"], kind, rego, libs, validation, where, cel)


def _cel_source(target: Mapping[str, Any], where: Where) -> CelSource | None:
    """Every CEL expression compiled now: one that does not compile is a problem at load."""
    block = cel_block(target)
    if block is None:
        return None
    source, problems = parse_source(*block)
    if problems:
        raise PolicyError([where.problem(path, reason) for path, reason in problems])
    return source


def _template_problems(doc: Mapping[str, Any], where: Where) -> Iterator[PolicyProblem]:
    if doc.get("apiVersion") not in TEMPLATE_API_VERSIONS:
        yield where.problem("apiVersion", f"must be one of {', '.join(TEMPLATE_API_VERSIONS)}")
    kind = _get(doc, "spec", "crd", "spec", "names", "kind")
    name = _get(doc, "metadata", "name")
    if not isinstance(kind, str) or not _KIND.match(kind):
        yield where.problem(
            "spec.crd.spec.names.kind", "must name the constraint kind, e.g. K8sRequiredLabels"
        )
    elif name != kind.lower():
        yield where.problem("metadata.name", f"must be {kind.lower()!r}, the lower-case constraint kind")
    targets = _get(doc, "spec", "targets")
    if not isinstance(targets, list) or len(targets) != 1 or not isinstance(targets[0], Mapping):
        yield where.problem("spec.targets", f"must hold exactly one target, {TARGET}")
        return
    if targets[0].get("target") != TARGET:
        yield where.problem("spec.targets[0].target", f"must be {TARGET}")
    if _rego_block(targets[0]) is None and cel_block(targets[0]) is None:
        yield where.problem(
            "spec.targets[0]",
            "has neither a Rego source (rego, or code with engine: Rego)"
            " nor a CEL source (code with engine: K8sNativeValidation)",
        )
    schema = _get(doc, "spec", "crd", "spec", "validation", "openAPIV3Schema")
    if schema is not None:
        try:
            jsonschema.Draft4Validator.check_schema(json_schema(schema))
        except jsonschema.SchemaError as e:
            path = "spec.crd.spec.validation.openAPIV3Schema" + _format_path(e.absolute_path)
            yield where.problem(path, f"invalid schema: {e.message}")


def _rego_block(target: Mapping[str, Any]) -> tuple[str, Mapping[str, Any]] | None:
    """The path and mapping that hold `rego` and `libs`: a `code` entry for Rego, or the target."""
    for i, code in enumerate(target.get("code") or []):
        if (
            isinstance(code, Mapping)
            and code.get("engine") == "Rego"
            and isinstance(code.get("source"), Mapping)
        ):
            return f"spec.targets[0].code[{i}].source", code["source"]
    if isinstance(target.get("rego"), str):
        return "spec.targets[0]", target
    return None


def _rego_sources(target: Mapping[str, Any], where: Where) -> tuple[RegoSource, tuple[RegoSource, ...]]:
    block = _rego_block(target)
    assert block is not None
    path, holder = block
    v1 = str(holder.get("version", "")) == "v1"

    def source(sub: str, text: str) -> RegoSource:
        line = where.line_of(f"{path}.{sub}")
        # A block scalar (`rego: |`) starts on the line after its indicator.
        first = line + 1 if line and "\n" in text.rstrip("\n") else line
        return RegoSource(text, f"{path}.{sub}", where.file, first, v1)

    libs = tuple(source(f"libs[{i}]", str(lib)) for i, lib in enumerate(holder.get("libs") or []))
    return source("rego", str(holder.get("rego", ""))), libs


# -- Constraints --------------------------------------------------------------------


def parse_constraint(
    doc: Mapping[str, Any], where: Where, templates: Mapping[str, ConstraintTemplate]
) -> Constraint:
    """Check one constraint against its template; raise PolicyError naming every problem."""
    kind, name = str(doc.get("kind", "")), _get(doc, "metadata", "name")
    label = f"{kind}/{name}"
    problems: list[PolicyProblem] = []
    if doc.get("apiVersion") not in CONSTRAINT_API_VERSIONS:
        problems.append(where.problem("apiVersion", f"must be {CONSTRAINT_API_VERSIONS[0]}"))
    if not isinstance(name, str) or not name:
        problems.append(where.problem("metadata.name", "is required"))
    spec = doc.get("spec") or {}
    template = templates.get(kind)
    if template is None:
        problems.append(where.problem("kind", f"no ConstraintTemplate defines kind {kind!r}"))
    action: EnforcementAction = "deny"
    raw_action = spec.get("enforcementAction") or "deny"
    if raw_action in ACTIONS:
        action = raw_action
    else:
        problems.append(where.problem("spec.enforcementAction", f"must be one of {', '.join(ACTIONS)}"))
    annotations = _get(doc, "metadata", "annotations") or {}
    failure_policy = annotations.get(FAILURE_POLICY_ANNOTATION, "Fail")
    if failure_policy not in FAILURE_POLICIES:
        path = f"metadata.annotations.{FAILURE_POLICY_ANNOTATION}"
        problems.append(where.problem(path, f"must be one of {', '.join(FAILURE_POLICIES)}"))
    match = ConstraintMatch()
    try:
        match = parse_match(spec.get("match"))
    except SelectorError as e:
        path = "spec.match" + (f".{e.path}" if e.path else "")
        problems.append(where.problem(path, f"constraint {label}: {e.reason}"))
    parameters = spec.get("parameters")
    if template is not None:
        problems += parameter_problems(label, parameters, template.schema, where)
    if problems:
        raise PolicyError(problems)
    return Constraint(kind, str(name), action, match, parameters or {}, where, failure_policy)


def parameter_problems(
    label: str, parameters: Any, schema: Mapping[str, Any] | None, where: Where
) -> list[PolicyProblem]:
    if schema is None or parameters is None:
        return []
    validator = jsonschema.Draft4Validator(json_schema(schema))
    problems = []
    for error in sorted(validator.iter_errors(parameters), key=lambda e: list(map(str, e.absolute_path))):
        path = "spec.parameters" + _format_path(error.absolute_path)
        problems.append(where.problem(path, f"constraint {label}: {path}: {error.message}"))
    return problems


_SUBSCHEMA_MAPS = ("properties", "patternProperties", "definitions")
_SUBSCHEMA_LISTS = ("allOf", "anyOf", "oneOf")


def json_schema(schema: Any) -> Any:
    """An OpenAPI v3 (Kubernetes structural) schema as JSON Schema draft 4."""
    if not isinstance(schema, Mapping):
        return schema
    converted: dict[str, Any] = {}
    for key, value in schema.items():
        if key.startswith("x-kubernetes-") or key == "nullable":
            continue
        if key in _SUBSCHEMA_MAPS and isinstance(value, Mapping):
            converted[key] = {name: json_schema(sub) for name, sub in value.items()}
        elif key in _SUBSCHEMA_LISTS and isinstance(value, list):
            converted[key] = [json_schema(sub) for sub in value]
        elif key in ("items", "additionalProperties", "not"):
            converted[key] = (
                [json_schema(v) for v in value] if isinstance(value, list) else json_schema(value)
            )
        else:
            converted[key] = value
    if schema.get("x-kubernetes-int-or-string") and "type" not in schema:
        converted["type"] = ["integer", "string"]
    if schema.get("nullable") is True and isinstance(schema.get("type"), str):
        converted["type"] = [schema["type"], "null"]
    return converted


def _format_path(parts: Any) -> str:
    return "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in parts)


def _get(doc: Any, *keys: str) -> Any:
    for key in keys:
        if not isinstance(doc, Mapping):
            return None
        doc = doc.get(key)
    return doc
