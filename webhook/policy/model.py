"""The compiled policy set that review() reads. Immutable; a reload builds a new one."""

from __future__ import annotations

from dataclasses import dataclass, field

from webhook.errors import PolicyProblem
from webhook.gkmutation.system import MutatorSet
from webhook.native.model import NONE, NativePolicies
from webhook.policy.engines import ConstraintSet, Engine
from webhook.quota.policy import GPUQuota
from webhook.sharing_policy import SharingPolicy


@dataclass(frozen=True)
class PolicySet:
    version: str = "empty"
    files: tuple[str, ...] = ()
    # Sorted by precedence at load (highest priority first, ties by name): the first match wins.
    sharing: tuple[SharingPolicy, ...] = ()
    quotas: tuple[GPUQuota, ...] = ()
    # Gatekeeper constraints, indexed by kind and namespace, and the engine that runs their templates.
    constraints: ConstraintSet | None = field(default=None, compare=False)
    engine: Engine | None = field(default=None, compare=False)
    # Documents of other projects' kinds: not enforced, reported (webhook.policy.unsupported).
    skipped: tuple[PolicyProblem, ...] = ()
    # ValidatingAdmissionPolicies and MutatingAdmissionPolicies with their bindings.
    native: NativePolicies = field(default=NONE, compare=False)
    # Gatekeeper mutators (Assign, AssignMetadata, ModifySet, AssignImage) in Gatekeeper's order;
    # None when the set has none, so /mutate runs nothing new.
    mutators: MutatorSet | None = field(default=None, compare=False)

    @property
    def shared_names(self) -> tuple[str, ...]:
        """Resource names that time-slicing and MPS policies advertise; they mark GPU pods too."""
        return tuple({p.sharing.resource_name: None for p in self.sharing if p.sharing.resource_name})
