"""The compiled native policies: what loading a ValidatingAdmissionPolicy, a
MutatingAdmissionPolicy and their bindings produces. Immutable."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from webhook.admission_cel import Program
from webhook.match import LabelSelector

GROUP = "admissionregistration.k8s.io"
VALIDATING = "ValidatingAdmissionPolicy"
MUTATING = "MutatingAdmissionPolicy"
BINDING_SUFFIX = "Binding"
# kubernetes/kubernetes staging/src/k8s.io/api/admissionregistration/{v1,v1beta1,v1alpha1}/types.go
VERSIONS = {VALIDATING: ("v1", "v1beta1", "v1alpha1"), MUTATING: ("v1", "v1beta1", "v1alpha1")}

FailurePolicy = Literal["Fail", "Ignore"]
ValidationAction = Literal["Deny", "Warn", "Audit"]
PatchType = Literal["ApplyConfiguration", "JSONPatch"]


@dataclass(frozen=True)
class ResourceRule:
    """A NamedRuleWithOperations; every list holds '*' or names."""

    operations: tuple[str, ...]
    api_groups: tuple[str, ...]
    api_versions: tuple[str, ...]
    resources: tuple[str, ...]
    scope: str = "*"
    resource_names: tuple[str, ...] = ()


@dataclass(frozen=True)
class MatchResources:
    namespace_selector: LabelSelector = field(default_factory=LabelSelector)
    object_selector: LabelSelector = field(default_factory=LabelSelector)
    resource_rules: tuple[ResourceRule, ...] = ()
    exclude_resource_rules: tuple[ResourceRule, ...] = ()
    equivalent: bool = True  # matchPolicy: Equivalent (the API's default) or Exact


@dataclass(frozen=True)
class ParamKind:
    api_version: str
    kind: str


@dataclass(frozen=True)
class ParamRef:
    name: str = ""
    namespace: str = ""
    selector: LabelSelector | None = None
    deny_when_missing: bool = False  # parameterNotFoundAction: Deny


@dataclass(frozen=True)
class Named:
    name: str
    program: Program


@dataclass(frozen=True)
class Validation:
    program: Program
    message: str = ""
    message_program: Program | None = None
    reason: str = "Invalid"


@dataclass(frozen=True)
class Mutation:
    patch_type: PatchType
    program: Program


@dataclass(frozen=True)
class Policy:
    """Either kind: a validating policy has validations, a mutating one mutations."""

    kind: str
    name: str
    match: MatchResources
    param_kind: ParamKind | None = None
    failure_policy: FailurePolicy = "Fail"
    match_conditions: tuple[Named, ...] = ()
    variables: tuple[Named, ...] = ()
    validations: tuple[Validation, ...] = ()
    audit_annotations: tuple[Named, ...] = ()
    mutations: tuple[Mutation, ...] = ()
    reinvoke: bool = False  # reinvocationPolicy: IfNeeded


@dataclass(frozen=True)
class Binding:
    kind: str
    name: str
    policy_name: str
    param_ref: ParamRef | None = None
    match: MatchResources | None = None
    actions: tuple[ValidationAction, ...] = ()


@dataclass(frozen=True)
class Bound:
    """A policy with the bindings that name it, in name order; a policy without one does nothing."""

    policy: Policy
    bindings: tuple[Binding, ...]


@dataclass(frozen=True)
class NativePolicies:
    validating: tuple[Bound, ...] = ()
    mutating: tuple[Bound, ...] = ()

    def __bool__(self) -> bool:
        return bool(self.validating or self.mutating)


NONE = NativePolicies()
