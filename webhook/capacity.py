"""Spare GPU capacity per node: the immutable snapshot placement hints read. Pure, and a leaf.

Three kinds of request, three measures of spare capacity on a node:

- `whole` (exclusive GPUs): GPUs no pod holds;
- `mig:<profile>` (a MIG instance): instances of that profile no pod holds;
- `shared` (time-slicing, MPS, HAMi, KAI): idle GPU-equivalents, the sum over its
  GPUs of the smaller of the idle compute and the free memory fractions.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

WHOLE = "whole"
SHARED = "shared"
MIG = "mig:"
# A shared request is steered only to nodes with at least this much of a GPU idle per share.
SHARED_MINIMUM = 0.25


@dataclass(frozen=True)
class NodeCapacity:
    node: str
    products: tuple[str, ...] = ()  # GPU Feature Discovery product names of its GPUs
    free_gpus: int = 0
    idle_share: float = 0.0
    free_mig: Mapping[str, int] = field(default_factory=dict)

    def spare(self, kind: str) -> float:
        if kind == WHOLE:
            return float(self.free_gpus)
        if kind.startswith(MIG):
            return float(self.free_mig.get(kind.removeprefix(MIG), 0))
        return self.idle_share


@dataclass(frozen=True)
class CapacitySnapshot:
    taken_at: float  # unix seconds
    nodes: tuple[NodeCapacity, ...] = ()
    # Rankings per kind, computed on first use: a snapshot serves many requests.
    _ranked: dict[str, tuple[tuple[float, NodeCapacity], ...]] = field(
        default_factory=dict, compare=False, repr=False
    )

    def best_nodes(
        self, kind: str, demand: int, count: int, allowed: Callable[[NodeCapacity], bool]
    ) -> tuple[str, ...]:
        """Up to `count` allowed nodes that can hold `demand` of `kind`, most spare first."""
        minimum = max(demand * SHARED_MINIMUM if kind == SHARED else demand, 1e-9)
        chosen: list[str] = []
        for spare, node in self._ranking(kind):
            if spare < minimum or len(chosen) == count:
                break
            if allowed(node):
                chosen.append(node.node)
        return tuple(chosen)

    def rank_all(self) -> CapacitySnapshot:
        """Rank every kind present now, so no request pays for sorting (call off the request path)."""
        profiles = {MIG + profile for n in self.nodes for profile in n.free_mig}
        for kind in (WHOLE, SHARED, *sorted(profiles)):
            self._ranking(kind)
        return self

    def _ranking(self, kind: str) -> tuple[tuple[float, NodeCapacity], ...]:
        ranked = self._ranked.get(kind)
        if ranked is None:
            scored = ((n.spare(kind), n) for n in self.nodes)
            ranked = self._ranked[kind] = tuple(sorted(scored, key=lambda p: (-p[0], p[1].node)))
        return ranked


@dataclass(frozen=True)
class CapacityView:
    """A snapshot as seen at `now`: usable only while younger than `max_age_seconds`."""

    snapshot: CapacitySnapshot
    now: float
    max_age_seconds: float

    @property
    def fresh(self) -> bool:
        return self.now - self.snapshot.taken_at <= self.max_age_seconds
