"""Rego engines for Gatekeeper constraints: in-process (regopy) and remote (an OPA server).

Both take the same compiled templates and the same ConstraintSet, and return one
ConstraintResult per constraint that applies to the request. Matching happens here,
before any Rego runs.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from webhook.accounting.count import NO_GPUS, GpuCount, count_object
from webhook.errors import WouldBlock
from webhook.policy.engines.layout import ParameterTable, input_document
from webhook.validation.constraint_match import MatchIndex, NamespaceUnknown
from webhook.validation.gatekeeper import Constraint, ConstraintTemplate
from webhook.validation.gatekeeper_input import Inventory, review_of_request, subjects
from webhook.validation.prechecks import PodCreate, Precheck, pod_create
from webhook.validation.results import ConstraintResult


class Engine(Protocol):
    @property
    def templates(self) -> Mapping[str, ConstraintTemplate]: ...

    def evaluate(
        self,
        request: Mapping[str, Any],
        constraints: ConstraintSet,
        inventory: Inventory | None = None,
        *,
        may_block: bool = True,
        gpu: GpuCount | None = None,
    ) -> list[ConstraintResult]:
        """Evaluate every applicable constraint; never raises for a policy's own failure.

        With `may_block` False, raise WouldBlock rather than run Rego: only what matching and
        prechecks settle is answered. `gpu` is the object's GPU count when the caller knows
        more than the object shows (claims resolved from the cluster); otherwise it is counted
        from the object.
        """
        ...

    def close(self) -> None: ...


class ConstraintSet:
    """Constraints indexed by kind and namespace; built once per policy load."""

    def __init__(self, constraints: Iterable[Constraint]) -> None:
        self._index = MatchIndex(constraints, lambda c: c.match)
        self.parameters = ParameterTable(self._index.items)
        self._reads_namespaces = any(c.match.namespace_selector is not None for c in self._index.items)
        self._splits: dict[frozenset[str], tuple[ConstraintSet, ConstraintSet]] = {}

    def split(self, kinds: frozenset[str]) -> tuple[ConstraintSet, ConstraintSet]:
        """(the constraints of `kinds`, the others), built once per set of kinds: an engine that
        runs some templates here and the rest elsewhere asks on every request."""
        found = self._splits.get(kinds)
        if found is None:
            chosen = [c for c in self._index.items if c.kind in kinds]
            others = [c for c in self._index.items if c.kind not in kinds]
            found = self._splits[kinds] = (ConstraintSet(chosen), ConstraintSet(others))
        return found

    @property
    def constraints(self) -> tuple[Constraint, ...]:
        return tuple(self._index.items)

    @property
    def reads_namespaces(self) -> bool:
        """Whether matching needs namespace labels from data.inventory (a namespaceSelector)."""
        return self._reads_namespaces

    def __len__(self) -> int:
        return len(self._index.items)

    def applicable(
        self, review: Mapping[str, Any], inventory: Inventory | None
    ) -> tuple[list[Constraint], list[ConstraintResult]]:
        """Constraints whose match applies, and failures for those whose match cannot be decided."""
        chosen: set[int] = set()
        failed: dict[int, ConstraintResult] = {}
        for subject in subjects(review, inventory):
            for position in self._index.candidates(subject.kind, subject.namespace):
                if position in chosen:
                    continue
                constraint = self._index.items[position]
                try:
                    if constraint.match.matches(subject):
                        chosen.add(position)
                        failed.pop(position, None)
                except NamespaceUnknown as e:
                    reason = f"namespace {e.args[0]!r} is unknown, so namespaceSelector cannot be evaluated"
                    failed.setdefault(position, ConstraintResult(constraint, error=reason))
        matched = [self._index.items[p] for p in sorted(chosen)]
        return matched, [failed[p] for p in sorted(failed)]


@dataclass
class Plan:
    """What one request needs from an engine, decided before any Rego runs."""

    review: dict[str, Any]
    by_kind: dict[str, list[Constraint]]
    decided: list[ConstraintResult]  # failures found without Rego: undecidable match, missing template
    inventory: Inventory | None  # only when an applicable template reads data.inventory
    gpu: dict[str, Any]  # input.gpu: the object's GPU count (webhook.accounting)

    @property
    def constraints(self) -> list[Constraint]:
        return [c for group in self.by_kind.values() for c in group]

    def input(self, asked: Mapping[str, Any]) -> dict[str, Any]:
        """The input document for the constraints in `asked` (see layout.input_document)."""
        return input_document(self.review, asked, self.inventory, self.gpu)


def plan(
    request: Mapping[str, Any],
    constraints: ConstraintSet,
    inventory: Inventory | None,
    templates: Mapping[str, ConstraintTemplate],
    prechecks: Mapping[str, Precheck] | None = None,
    *,
    may_block: bool = True,
    gpu: GpuCount | None = None,
) -> Plan:
    """`prechecks` (kind to precheck) clear constraints that certainly find nothing, without Rego.

    With `may_block` False, raise WouldBlock if any constraint is left for the engine.
    """
    review = review_of_request(request)
    matched, decided = constraints.applicable(review, inventory)
    if matched and gpu is None:
        gpu = count_object(review.get("object"))
    counted = (gpu or NO_GPUS).as_input()
    wanted = prechecks and any(c.kind in prechecks for c in matched)
    pod = pod_create(review, counted) if wanted else None
    by_kind: dict[str, list[Constraint]] = {}
    for constraint in matched:
        if constraint.kind not in templates:
            decided.append(ConstraintResult(constraint, error=f"no compiled template for {constraint.kind}"))
        elif pod is not None and prechecks and _cleared(prechecks.get(constraint.kind), pod, constraint):
            decided.append(ConstraintResult(constraint))
        else:
            by_kind.setdefault(constraint.kind, []).append(constraint)
    if by_kind and not may_block:
        raise WouldBlock(f"Rego evaluation of {', '.join(sorted(by_kind))}")
    needs_inventory = any(templates[kind].uses_inventory for kind in by_kind)
    return Plan(review, by_kind, decided, (inventory or {}) if needs_inventory else None, counted)


def _cleared(check: Precheck | None, pod: PodCreate, constraint: Constraint) -> bool:
    if check is None:
        return False
    try:
        return check(pod, constraint.parameters)
    except Exception:  # a precheck's own bug must cost speed, never a decision: Rego decides
        return False
