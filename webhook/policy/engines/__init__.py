"""Rego engines for Gatekeeper constraints: in-process (regopy) and remote (an OPA server).

Both take the same compiled templates and the same ConstraintSet, and return one
ConstraintResult per constraint that applies to the request. Matching happens here,
before any Rego runs.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, Protocol

from webhook.validation.constraint_match import MatchIndex, NamespaceUnknown
from webhook.validation.gatekeeper import Constraint, ConstraintResult
from webhook.validation.gatekeeper_input import Inventory, review_of_request, subjects


class Engine(Protocol):
    def evaluate(
        self, request: Mapping[str, Any], constraints: ConstraintSet, inventory: Inventory | None = None
    ) -> list[ConstraintResult]:
        """Evaluate every applicable constraint; never raises for a policy's own failure."""
        ...

    def close(self) -> None: ...


class ConstraintSet:
    """Constraints indexed by kind and namespace; built once per policy load."""

    def __init__(self, constraints: Iterable[Constraint]) -> None:
        self._index = MatchIndex(constraints, lambda c: c.match)

    @property
    def constraints(self) -> tuple[Constraint, ...]:
        return tuple(self._index.items)

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


__all__ = ["ConstraintSet", "Engine", "review_of_request"]
