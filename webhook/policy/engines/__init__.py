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
from webhook.validation.constraint_match import MatchIndex, NamespaceUnknown, Subject
from webhook.validation.gatekeeper import Constraint, ConstraintTemplate
from webhook.validation.gatekeeper_input import (
    Inventory,
    matched_objects,
    place_of,
    review_of_request,
    subject_of,
)
from webhook.validation.prechecks import Check, PodCreate, Precheck, pod_create
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
        self._routes: dict[tuple[int, int], tuple[object, object, tuple[Route, ...]]] = {}

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
        chosen, failed = self.applicable_positions(review, inventory)
        return [self._index.items[p] for p in chosen], failed

    def applicable_positions(
        self, review: Mapping[str, Any], inventory: Inventory | None
    ) -> tuple[list[int], list[ConstraintResult]]:
        """`applicable`, as positions in `constraints`. Only a constraint whose match reads the
        object's name or labels is matched per request; the rest are known per place."""
        objects = matched_objects(review)
        if len(objects) == 1:  # a CREATE or a DELETE: one object, often settled by its place alone
            placed = self._index.at(place_of(objects[0], review))
            if placed.settled:
                return list(placed.certain), []
        chosen: set[int] = set()
        failed: dict[int, ConstraintResult] = {}
        for obj in objects:
            place = place_of(obj, review)
            subject: Subject | None = None
            for position, reads_object in self._index.at(place).candidates:
                if position in chosen:
                    continue
                if reads_object:
                    if subject is None:
                        subject = subject_of(obj, place, review, inventory)
                    if not self._matches_object(position, subject, failed):
                        continue
                chosen.add(position)
                failed.pop(position, None)
        return sorted(chosen), [failed[p] for p in sorted(failed)]

    def _matches_object(self, position: int, subject: Subject, failed: dict[int, ConstraintResult]) -> bool:
        constraint = self._index.items[position]
        try:
            return constraint.match.matches_object(subject)
        except NamespaceUnknown as e:
            reason = f"namespace {e.args[0]!r} is unknown, so namespaceSelector cannot be evaluated"
            failed.setdefault(position, ConstraintResult(constraint, error=reason))
            return False

    def routes(
        self, templates: Mapping[str, ConstraintTemplate], prechecks: Mapping[str, Precheck] | None
    ) -> tuple[Route, ...]:
        """Each constraint's Route under an engine's templates and prechecks, by position; built
        once per engine, whose templates and prechecks never change once it is built."""
        key = (id(templates), id(prechecks))
        found = self._routes.get(key)
        # The entry holds the mappings themselves, so their ids cannot be reused while it lives.
        if found is None or found[0] is not templates or found[1] is not prechecks:
            if len(self._routes) >= ROUTED_ENGINES:
                self._routes.clear()
            routes = tuple(_route(c, templates, prechecks or {}) for c in self._index.items)
            found = self._routes[key] = (templates, prechecks, routes)
        return found[2]


# Engines routed per ConstraintSet: one in service, a few more where tests compare engines.
ROUTED_ENGINES = 8


@dataclass(frozen=True)
class Route:
    """How a plan treats one constraint under one engine, the same for every request."""

    constraint: Constraint
    compiled: bool  # the engine has the constraint's template
    check: Check | None  # its template's precheck, bound to the constraint's parameters
    clean: ConstraintResult  # what the engine answers when the constraint finds nothing


def _route(
    constraint: Constraint, templates: Mapping[str, ConstraintTemplate], prechecks: Mapping[str, Precheck]
) -> Route:
    precheck = prechecks.get(constraint.kind)
    check = None if precheck is None else precheck.bind(constraint.parameters)
    return Route(constraint, constraint.kind in templates, check, ConstraintResult(constraint))


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
    matched, decided = constraints.applicable_positions(review, inventory)
    if matched and gpu is None:
        gpu = count_object(review.get("object"))
    counted = (gpu or NO_GPUS).as_input()
    routes = constraints.routes(templates, prechecks)
    pod = pod_create(review, counted) if any(routes[p].check for p in matched) else None
    by_kind: dict[str, list[Constraint]] = {}
    for position in matched:
        route = routes[position]
        constraint = route.constraint
        if not route.compiled:
            decided.append(ConstraintResult(constraint, error=f"no compiled template for {constraint.kind}"))
        elif pod is not None and route.check is not None and _cleared(route.check, pod):
            decided.append(route.clean)
        else:
            by_kind.setdefault(constraint.kind, []).append(constraint)
    if by_kind and not may_block:
        raise WouldBlock(f"Rego evaluation of {', '.join(sorted(by_kind))}")
    needs_inventory = any(templates[kind].uses_inventory for kind in by_kind)
    return Plan(review, by_kind, decided, (inventory or {}) if needs_inventory else None, counted)


def _cleared(check: Check, pod: PodCreate) -> bool:
    try:
        return check(pod)
    except Exception:  # a precheck's own bug must cost speed, never a decision: Rego decides
        return False
