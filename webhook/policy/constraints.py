"""Gatekeeper constraints as findings: one per violation, with the constraint's enforcement action."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from webhook.accounting.count import GpuCount, count_object, needs_dra
from webhook.decision import Finding
from webhook.dra.index import DraIndex
from webhook.policy.model import PolicySet
from webhook.types import AdmissionRequest, EnforcementAction
from webhook.validation.results import ConstraintResult


@dataclass(frozen=True)
class ConstraintOutcome:
    findings: list[Finding]
    audit_annotations: dict[str, str]


NOTHING = ConstraintOutcome([], {})


def evaluate_constraints(
    request: AdmissionRequest,
    policies: PolicySet,
    inventory: Callable[[], Mapping[str, Any]] | None,
    actions: frozenset[EnforcementAction],
    *,
    may_block: bool = True,
    gpu: GpuCount | None = None,
    dra: DraIndex | None = None,
) -> ConstraintOutcome:
    """With `may_block` False, raise WouldBlock if any constraint needs its engine (Rego).
    `gpu` is the reviewed pod's GPU count (webhook.accounting), for templates that count; left
    out, the engine counts only if a constraint matches. `dra` resolves DRA claims: an object
    that holds or is a claim is counted here with it (objects without claims stay lazy)."""
    constraints, engine = policies.constraints, policies.engine
    if not constraints or engine is None:
        return NOTHING
    obj = request.get("object")
    if gpu is None and dra is not None and needs_dra(obj, dra):
        gpu = count_object(obj, dra, request.get("namespace") or "")
    wanted = constraints.reads_namespaces or any(t.uses_inventory for t in engine.templates.values())
    results = engine.evaluate(
        request, constraints, inventory() if wanted and inventory else None, may_block=may_block, gpu=gpu
    )
    flagged = [r for r in results if r.violations or r.error is not None]  # most find nothing
    findings = [f for result in flagged for f in _findings(result) if f.action in actions]
    violated = sorted({r.constraint.name for r in flagged if r.violations or r.error})
    annotations = {"constraints-evaluated": str(len(results))}
    if violated:
        annotations["constraints-violated"] = ",".join(violated)[:1000]
    return ConstraintOutcome(findings, annotations if results else {})


def _findings(result: ConstraintResult) -> list[Finding]:
    constraint = result.constraint
    if result.error is not None:
        # A constraint that cannot be evaluated denies unless its failure policy is Ignore:
        # never a silent allow under `deny`. Ignored failures are still recorded.
        action: EnforcementAction = "dryrun" if result.error_ignored else constraint.action
        return [Finding(constraint.name, action, f"constraint {constraint.id} failed: {result.error}")]
    return [Finding(constraint.name, constraint.action, v.msg) for v in result.violations]
