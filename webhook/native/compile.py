"""A ValidatingAdmissionPolicy, MutatingAdmissionPolicy or one of their bindings, compiled from
its document, or the problems that stop it (file, line, field, reason).

The checks are kube-apiserver's own (kubernetes/kubernetes pkg/apis/admissionregistration/
validation/validation.go): what the API server would refuse to store is refused here too, and
every CEL expression is compiled now, never per request.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import Any, Protocol, cast

from webhook.admission_cel import CelCompileError, Program, compile_program
from webhook.errors import PolicyProblem
from webhook.match import LabelSelector, SelectorError
from webhook.native.model import (
    BINDING_SUFFIX,
    GROUP,
    MUTATING,
    VALIDATING,
    VERSIONS,
    Binding,
    Bound,
    FailurePolicy,
    MatchResources,
    Mutation,
    Named,
    NativePolicies,
    ParamKind,
    ParamRef,
    PatchType,
    Policy,
    ResourceRule,
    Validation,
    ValidationAction,
)

Where = tuple[str | int, ...]


class Document(Protocol):
    """A policy document that knows where its fields are (webhook.policy.source.Document)."""

    @property
    def data(self) -> Any: ...
    @property
    def kind(self) -> str: ...
    @property
    def name(self) -> str: ...
    def problem(self, path: Sequence[str | int], reason: str) -> PolicyProblem: ...


# The variables every admission policy expression may read (validating/typechecking.go);
# `authorizer` needs kube-apiserver's authorizer, which a webhook cannot ask.
CEL_NAMES = ("object", "oldObject", "request", "params", "namespaceObject", "variables")
REASONS = ("Unauthorized", "Forbidden", "Invalid", "RequestEntityTooLarge")
MAX_MATCH_CONDITIONS = 64
_AUTHORIZER = re.compile(r"\bauthorizer\b")
_ANNOTATION_KEY = re.compile(r"^[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$")
_VARIABLE_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


class Problems:
    """Collects a document's problems while its fields are read."""

    def __init__(self, document: Document) -> None:
        self.document = document
        self.found: list[PolicyProblem] = []

    def add(self, where: Where, reason: str) -> None:
        self.found.append(self.document.problem(where, reason))

    def mapping(self, value: Any, where: Where) -> dict[str, Any]:
        if value is None:
            return {}
        if not isinstance(value, dict):
            self.add(where, "must be a mapping")
            return {}
        return value

    def items(self, value: Any, where: Where) -> list[Any]:
        if value is None:
            return []
        if not isinstance(value, list):
            self.add(where, "must be a list")
            return []
        return value

    def text(self, value: Any, where: Where, *, required: bool = False) -> str:
        if value is None or value == "":
            if required:
                self.add(where, "is required")
            return ""
        if not isinstance(value, str):
            self.add(where, "must be a string")
            return ""
        return value

    def choice(self, value: Any, where: Where, allowed: Sequence[str], default: str) -> str:
        if value is None:
            return default
        if value not in allowed:
            self.add(where, f"must be one of {', '.join(allowed)}, got {value!r}")
            return default
        return cast(str, value)

    def program(self, value: Any, where: Where, *, result: str | None = None) -> Program | None:
        """The compiled expression; `result`, for a mutation, is the type it must evaluate to,
        and makes `Object{...}` and `JSONPatch{...}` constructible, as kube-apiserver does."""
        expression = self.text(value, where, required=True)
        if not expression:
            return None
        if _AUTHORIZER.search(expression):
            self.add(where, "reads `authorizer`, which only kube-apiserver can answer; not supported here")
            return None
        try:
            if result is None:
                return compile_program(expression, CEL_NAMES)
            return compile_program(expression, CEL_NAMES, result_types=(result,), patch_types=True)
        except CelCompileError as e:
            self.add(where, f"CEL expression does not compile: {e}")
            return None

    def selector(self, value: Any, where: Where) -> LabelSelector | None:
        raw = self.mapping(value, where)
        try:
            return LabelSelector.parse(raw)
        except SelectorError as e:
            self.add((*where, *e.path.split(".")) if e.path else where, e.reason)
            return None


def native_kinds() -> dict[tuple[str, str], Callable[[Document], tuple[Any, list[PolicyProblem]]]]:
    """The loader's compilers for every served version of the four kinds."""
    compilers: dict[tuple[str, str], Callable[[Document], tuple[Any, list[PolicyProblem]]]] = {}
    for kind, versions in VERSIONS.items():
        for version in versions:
            compilers[(f"{GROUP}/{version}", kind)] = compile_policy
            compilers[(f"{GROUP}/{version}", kind + BINDING_SUFFIX)] = compile_binding
    return compilers


def compile_policy(document: Document) -> tuple[Policy | None, list[PolicyProblem]]:
    problems = Problems(document)
    data = problems.mapping(document.data, ())
    spec = problems.mapping(data.get("spec"), ("spec",))
    if "spec" not in data:
        problems.add(("spec",), "is required")
    kind = document.kind
    match = _match(problems, spec.get("matchConstraints"), ("spec", "matchConstraints"), policy=True)
    policy = Policy(
        kind=kind,
        name=document.name,
        match=match or MatchResources(),
        param_kind=_param_kind(problems, spec.get("paramKind")),
        failure_policy=cast(
            FailurePolicy,
            problems.choice(spec.get("failurePolicy"), ("spec", "failurePolicy"), ("Fail", "Ignore"), "Fail"),
        ),
        match_conditions=_named(
            problems, spec.get("matchConditions"), ("spec", "matchConditions"), "expression"
        ),
        variables=_named(problems, spec.get("variables"), ("spec", "variables"), "expression"),
    )
    if len(policy.match_conditions) > MAX_MATCH_CONDITIONS:
        problems.add(("spec", "matchConditions"), f"at most {MAX_MATCH_CONDITIONS} match conditions")
    for i, variable in enumerate(policy.variables):
        if not _VARIABLE_NAME.fullmatch(variable.name):
            problems.add(("spec", "variables", i, "name"), "must be a CEL identifier")
    if kind == VALIDATING:
        policy = _validating(problems, spec, policy)
    else:
        policy = _mutating(problems, spec, policy)
    return (None if problems.found else policy), problems.found


def _validating(problems: Problems, spec: dict[str, Any], policy: Policy) -> Policy:
    validations = tuple(
        v
        for i, raw in enumerate(problems.items(spec.get("validations"), ("spec", "validations")))
        if (v := _validation(problems, raw, ("spec", "validations", i))) is not None
    )
    annotations = _named(
        problems, spec.get("auditAnnotations"), ("spec", "auditAnnotations"), "valueExpression", "key"
    )
    for i, annotation in enumerate(annotations):
        if not _ANNOTATION_KEY.fullmatch(annotation.name):
            problems.add(
                ("spec", "auditAnnotations", i, "key"), "must be a qualified name of at most 63 characters"
            )
    if not spec.get("validations") and not spec.get("auditAnnotations"):
        problems.add(("spec", "validations"), "validations or auditAnnotations must hold at least one entry")
    if spec.get("mutations") is not None:
        problems.add(("spec", "mutations"), f"belongs to a {MUTATING}, not a {VALIDATING}")
    return Policy(**{**policy.__dict__, "validations": validations, "audit_annotations": annotations})


def _validation(problems: Problems, raw: Any, where: Where) -> Validation | None:
    entry = problems.mapping(raw, where)
    program = problems.program(entry.get("expression"), (*where, "expression"))
    message = problems.text(entry.get("message"), (*where, "message"))
    if "\n" in message:
        problems.add((*where, "message"), "must be a single line")
    message_program = None
    if entry.get("messageExpression") is not None:
        message_program = problems.program(entry.get("messageExpression"), (*where, "messageExpression"))
    reason = problems.choice(entry.get("reason"), (*where, "reason"), REASONS, "Invalid")
    if program is None:
        return None
    return Validation(program, message.strip(), message_program, reason)


def _mutating(problems: Problems, spec: dict[str, Any], policy: Policy) -> Policy:
    mutations = tuple(
        m
        for i, raw in enumerate(problems.items(spec.get("mutations"), ("spec", "mutations")))
        if (m := _mutation(problems, raw, ("spec", "mutations", i))) is not None
    )
    if not spec.get("mutations"):
        problems.add(("spec", "mutations"), "must hold at least one mutation")
    reinvoke = problems.choice(
        spec.get("reinvocationPolicy"), ("spec", "reinvocationPolicy"), ("Never", "IfNeeded"), "Never"
    )
    for field_name in ("validations", "auditAnnotations"):
        if spec.get(field_name) is not None:
            problems.add(("spec", field_name), f"belongs to a {VALIDATING}, not a {MUTATING}")
    return Policy(**{**policy.__dict__, "mutations": mutations, "reinvoke": reinvoke == "IfNeeded"})


_PATCH_FIELDS: dict[str, str] = {"ApplyConfiguration": "applyConfiguration", "JSONPatch": "jsonPatch"}
# What each patch type's expression evaluates to: an Object{...}, a list of JSONPatch{...}
# (kubernetes/kubernetes staging/src/k8s.io/apiserver/pkg/admission/plugin/policy/mutating/
# patch/smd.go and json_patch.go ReturnTypes).
_PATCH_RESULTS: dict[str, str] = {"ApplyConfiguration": "Object", "JSONPatch": "list"}


def _mutation(problems: Problems, raw: Any, where: Where) -> Mutation | None:
    entry = problems.mapping(raw, where)
    patch_type = problems.choice(entry.get("patchType"), (*where, "patchType"), tuple(_PATCH_FIELDS), "")
    if not patch_type:
        if entry.get("patchType") is None:
            problems.add((*where, "patchType"), "is required (ApplyConfiguration or JSONPatch)")
        return None
    field_name = _PATCH_FIELDS[patch_type]
    for other in _PATCH_FIELDS.values():
        if other != field_name and entry.get(other) is not None:
            problems.add((*where, other), f"is not used with patchType {patch_type}")
    body = problems.mapping(entry.get(field_name), (*where, field_name))
    expression_at = (*where, field_name, "expression")
    program = problems.program(body.get("expression"), expression_at, result=_PATCH_RESULTS[patch_type])
    return Mutation(cast(PatchType, patch_type), program) if program is not None else None


def _named(
    problems: Problems, raw: Any, where: Where, expression_field: str, name_field: str = "name"
) -> tuple[Named, ...]:
    """matchConditions, variables and auditAnnotations: a unique name and an expression each."""
    named: list[Named] = []
    seen: set[str] = set()
    for i, entry in enumerate(problems.items(raw, where)):
        entry = problems.mapping(entry, (*where, i))
        name = problems.text(entry.get(name_field), (*where, i, name_field), required=True)
        if name in seen:
            problems.add((*where, i, name_field), f"{name!r} is used twice")
        seen.add(name)
        program = problems.program(entry.get(expression_field), (*where, i, expression_field))
        if name and program is not None:
            named.append(Named(name, program))
    return tuple(named)


def _param_kind(problems: Problems, raw: Any) -> ParamKind | None:
    if raw is None:
        return None
    entry = problems.mapping(raw, ("spec", "paramKind"))
    api_version = problems.text(entry.get("apiVersion"), ("spec", "paramKind", "apiVersion"), required=True)
    kind = problems.text(entry.get("kind"), ("spec", "paramKind", "kind"), required=True)
    return ParamKind(api_version, kind)


def _match(problems: Problems, raw: Any, where: Where, *, policy: bool) -> MatchResources | None:
    if raw is None:
        if policy:
            problems.add(where, "is required")
        return None
    entry = problems.mapping(raw, where)
    rules = _rules(problems, entry.get("resourceRules"), (*where, "resourceRules"))
    if policy and not rules:
        problems.add((*where, "resourceRules"), "must hold at least one rule")
    return MatchResources(
        namespace_selector=problems.selector(entry.get("namespaceSelector"), (*where, "namespaceSelector"))
        or LabelSelector(),
        object_selector=problems.selector(entry.get("objectSelector"), (*where, "objectSelector"))
        or LabelSelector(),
        resource_rules=rules,
        exclude_resource_rules=_rules(
            problems, entry.get("excludeResourceRules"), (*where, "excludeResourceRules")
        ),
        equivalent=problems.choice(
            entry.get("matchPolicy"), (*where, "matchPolicy"), ("Equivalent", "Exact"), "Equivalent"
        )
        == "Equivalent",
    )


_OPERATIONS = ("*", "CREATE", "UPDATE", "DELETE", "CONNECT")


def _rules(problems: Problems, raw: Any, where: Where) -> tuple[ResourceRule, ...]:
    rules = []
    for i, entry in enumerate(problems.items(raw, where)):
        at = (*where, i)
        entry = problems.mapping(entry, at)
        operations = _strings(problems, entry.get("operations"), (*at, "operations"))
        for operation in operations:
            if operation not in _OPERATIONS:
                problems.add((*at, "operations"), f"{operation!r} is not one of {', '.join(_OPERATIONS)}")
        resources = _strings(problems, entry.get("resources"), (*at, "resources"))
        for resource in resources:
            if resource.count("/") > 1 or resource.startswith("/") or resource.endswith("/"):
                problems.add((*at, "resources"), f"{resource!r} is not RESOURCE or RESOURCE/SUBRESOURCE")
        rules.append(
            ResourceRule(
                operations=tuple(operations),
                api_groups=tuple(_strings(problems, entry.get("apiGroups"), (*at, "apiGroups"))),
                api_versions=tuple(_strings(problems, entry.get("apiVersions"), (*at, "apiVersions"))),
                resources=tuple(resources),
                scope=problems.choice(
                    entry.get("scope"), (*at, "scope"), ("*", "Cluster", "Namespaced"), "*"
                ),
                resource_names=tuple(_strings(problems, entry.get("resourceNames"), (*at, "resourceNames"))),
            )
        )
    return tuple(rules)


def _strings(problems: Problems, raw: Any, where: Where) -> list[str]:
    values = problems.items(raw, where)
    if not all(isinstance(v, str) for v in values):
        problems.add(where, "must be a list of strings")
        return []
    return values


def compile_binding(document: Document) -> tuple[Binding | None, list[PolicyProblem]]:
    problems = Problems(document)
    data = problems.mapping(document.data, ())
    spec = problems.mapping(data.get("spec"), ("spec",))
    binding = Binding(
        kind=document.kind,
        name=document.name,
        policy_name=problems.text(spec.get("policyName"), ("spec", "policyName"), required=True),
        param_ref=_param_ref(problems, spec.get("paramRef")),
        match=_match(problems, spec.get("matchResources"), ("spec", "matchResources"), policy=False),
        actions=_actions(problems, spec, document.kind == VALIDATING + BINDING_SUFFIX),
    )
    return (None if problems.found else binding), problems.found


def _actions(problems: Problems, spec: dict[str, Any], validating: bool) -> tuple[ValidationAction, ...]:
    where = ("spec", "validationActions")
    if not validating:
        if spec.get("validationActions") is not None:
            problems.add(where, f"belongs to a {VALIDATING}{BINDING_SUFFIX}")
        return ()
    actions = _strings(problems, spec.get("validationActions"), where)
    if not actions:
        problems.add(where, "is required: one or more of Deny, Warn, Audit")
    for action in actions:
        if action not in ("Deny", "Warn", "Audit"):
            problems.add(where, f"{action!r} is not one of Deny, Warn, Audit")
    if len(set(actions)) != len(actions):
        problems.add(where, "holds an action twice")
    if "Deny" in actions and "Warn" in actions:
        problems.add(where, "Deny and Warn together are refused: a denied request has no warnings to show")
    return tuple(cast(ValidationAction, a) for a in actions)


def _param_ref(problems: Problems, raw: Any) -> ParamRef | None:
    if raw is None:
        return None
    where = ("spec", "paramRef")
    entry = problems.mapping(raw, where)
    name = problems.text(entry.get("name"), (*where, "name"))
    selector = None
    if entry.get("selector") is not None:
        selector = problems.selector(entry.get("selector"), (*where, "selector"))
    if bool(name) == (entry.get("selector") is not None):
        problems.add(where, "needs exactly one of name and selector")
    action = problems.choice(
        entry.get("parameterNotFoundAction"), (*where, "parameterNotFoundAction"), ("Allow", "Deny"), ""
    )
    if entry.get("parameterNotFoundAction") is None:
        problems.add((*where, "parameterNotFoundAction"), "is required (Allow or Deny)")
    return ParamRef(
        name=name,
        namespace=problems.text(entry.get("namespace"), (*where, "namespace")),
        selector=selector,
        deny_when_missing=action == "Deny",
    )


def assemble(
    compiled: Sequence[tuple[Document, Policy | Binding]],
) -> tuple[NativePolicies, list[PolicyProblem]]:
    """Policies with their bindings, in name order. A binding naming no policy of its kind can
    never act (kube-apiserver keeps it, idle); in a policy directory that is a mistake, so it is
    reported."""
    policies = {(p.kind, p.name): p for _, p in compiled if isinstance(p, Policy)}
    bindings: dict[tuple[str, str], list[Binding]] = {}
    problems = []
    for document, item in compiled:
        if not isinstance(item, Binding):
            continue
        kind = item.kind.removesuffix(BINDING_SUFFIX)
        if (kind, item.policy_name) not in policies:
            reason = f"no {kind} named {item.policy_name!r} is defined"
            problems.append(document.problem(("spec", "policyName"), reason))
        bindings.setdefault((kind, item.policy_name), []).append(item)
    bound = [
        Bound(policy, tuple(sorted(bindings.get(key, []), key=lambda b: b.name)))
        for key, policy in sorted(policies.items())
    ]
    return (
        NativePolicies(
            validating=tuple(b for b in bound if b.policy.kind == VALIDATING and b.bindings),
            mutating=tuple(b for b in bound if b.policy.kind == MUTATING and b.bindings),
        ),
        problems,
    )
