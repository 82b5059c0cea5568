"""Run a policy set's Gatekeeper mutators over one object until it stops changing. Pure.

As Gatekeeper's System.Mutate (pkg/mutation/system.go): mutators run in the order of
their IDs (group, kind, namespace, name: pkg/mutation/ordered_ids.go; every mutator here is
in one group and cluster-scoped, so by kind, then name), each whose applyTo and match fit
the object as it stands. The pass repeats until a pass leaves the object unchanged, at most
one pass more than there are mutators; a set that still changes the object then does not
converge, which is an error, as is any mutator that fails.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import orjson

from webhook.gkmutation.mutators import Mutator, Target
from webhook.gkmutation.walk import MutationError, same_json


class NotConverging(MutationError):
    """The mutators keep changing the object: two of them disagree about a field."""


@dataclass(frozen=True)
class Outcome:
    object: dict[str, Any]
    changed: bool
    applied: tuple[str, ...]  # the ids of the mutators that ran, first pass first


class MutatorSet:
    def __init__(self, mutators: Iterable[Mutator]) -> None:
        self.mutators = tuple(sorted(mutators, key=lambda m: (m.kind, m.name)))

    def __len__(self) -> int:
        return len(self.mutators)

    def run(self, obj: dict[str, Any], target: Target) -> Outcome:
        """The mutated copy of `obj`; `obj` itself is never written. MutationError names the mutator."""
        current = clone(obj)
        applied: list[str] = []
        for _ in range(len(self.mutators) + 1):
            before = clone(current)
            ran = self._pass(current, target)
            if not ran or same_json(before, current):
                return Outcome(current, bool(applied), tuple(dict.fromkeys(applied)))
            applied += ran
        names = ", ".join(dict.fromkeys(applied))
        raise NotConverging(f"mutation does not converge: {names} keep changing {_describe(target)}")

    def _pass(self, current: dict[str, Any], target: Target) -> list[str]:
        ran = []
        for mutator in self.mutators:
            try:
                if mutator.applies(current, target) and mutator.mutate(current, target):
                    ran.append(mutator.id)
            except MutationError as e:
                raise MutationError(f"{mutator.describe()} failed on {_describe(target)}: {e}") from e
        return ran


def clone(obj: dict[str, Any]) -> dict[str, Any]:
    copied: dict[str, Any] = orjson.loads(orjson.dumps(obj))
    return copied


def _describe(target: Target) -> str:
    kind = f"{target.group}/{target.kind}" if target.group else target.kind
    return f"{kind} in namespace {target.namespace}" if target.namespace else kind
