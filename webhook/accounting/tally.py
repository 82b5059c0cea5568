"""Usage in whole units, for the request path: integer arithmetic where a Fraction would do. Pure.

A quota decision adds the pod's demand to its namespace's usage and compares the sum
with each limit. With Fractions every one of those steps is Python code and a gcd; with
integers it is one operation in C. So a Tally holds each dimension scaled to a unit
that makes the common amounts whole:

- GPUs in GPU_UNIT parts of a GPU: lcm(1..16) x 1000, so MIG sevenths and quarters,
  time-slicing and MPS shares of up to 16 replicas, their products, and KAI fractions
  written with up to three decimals are all whole;
- GPU memory in bytes (MEMORY_UNIT bytes a MiB);
- resource counts as they are (devices are whole).

An amount the unit cannot make whole (a KAI fraction such as 0.3333333 or a float's
binary fraction, a HAMi percentage of an odd card size) stays an exact Fraction of the unit.
Python adds and compares int and Fraction exactly, so a Tally holding one is still
exact, only slower; nothing is ever rounded. A figure is rendered as the text of the
Fraction it stands for, so every message and audit string is what Fraction code prints.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from fractions import Fraction
from math import gcd
from typing import Any

from webhook.accounting.demand import PodShape, QuotaSettings, shape_demand
from webhook.accounting.usage import GPU_MEMORY, GPUS, Usage

GPU_UNIT = 720_720_000
MEMORY_UNIT = 1 << 20
Amount = int | Fraction
"""A scaled amount: an int in the common case, an exact Fraction of the unit otherwise."""


def unit_of(dimension: str) -> int:
    if dimension == GPUS:
        return GPU_UNIT
    return MEMORY_UNIT if dimension == GPU_MEMORY else 1


def scaled(value: Fraction, unit: int) -> Amount:
    """`value` in `unit`ths: an int when that is exact."""
    numerator = value.numerator * unit
    if numerator % value.denominator:
        return Fraction(numerator, value.denominator)
    return numerator // value.denominator


def unscaled(amount: Amount, unit: int) -> Fraction:
    return Fraction(amount, unit)


# Usage moves in steps of the same few demands, so the same figures recur: a C-level cache.
@functools.lru_cache(maxsize=8192)
def exact_text(amount: Amount, unit: int) -> str:
    """str() of the Fraction `amount / unit` ("1/7", "20480"), without building it for an int."""
    if isinstance(amount, int):
        whole, part = divmod(amount, unit)
        if not part:
            return str(whole)
        common = gcd(part, unit)  # = gcd(amount, unit)
        return f"{amount // common}/{unit // common}"
    return str(amount / unit)


class Tally:
    """What a namespace uses or a pod asks, by quota dimension, in units. Treated as immutable.

    Unlike Usage it has no device count: that is not a quota dimension."""

    __slots__ = ("gpus", "memory", "resources")

    def __init__(self, gpus: Amount = 0, memory: Amount = 0, resources: Mapping[str, Amount] | None = None):
        self.gpus = gpus
        self.memory = memory
        self.resources: Mapping[str, Amount] = resources or {}

    @classmethod
    def of(cls, usage: Usage) -> Tally:
        resources = {name: scaled(amount, 1) for name, amount in usage.resources.items()}
        return cls(scaled(usage.gpus, GPU_UNIT), scaled(usage.gpu_memory_mib, MEMORY_UNIT), resources)

    def usage(self) -> Usage:
        """The same amounts as exact Fractions."""
        resources = {name: unscaled(amount, 1) for name, amount in self.resources.items()}
        return Usage(unscaled(self.gpus, GPU_UNIT), unscaled(self.memory, MEMORY_UNIT), resources)

    def __add__(self, other: Tally) -> Tally:
        return Tally(self.gpus + other.gpus, self.memory + other.memory, _combine(self.resources, other, 1))

    def __sub__(self, other: Tally) -> Tally:
        return Tally(self.gpus - other.gpus, self.memory - other.memory, _combine(self.resources, other, -1))

    def times(self, count: int) -> Tally:
        resources = {name: amount * count for name, amount in self.resources.items()}
        return Tally(self.gpus * count, self.memory * count, resources)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Tally):
            return NotImplemented
        return (self.gpus, self.memory, dict(self.resources)) == (
            other.gpus,
            other.memory,
            dict(other.resources),
        )

    def __hash__(self) -> int:
        return hash((self.gpus, self.memory, tuple(sorted(self.resources.items()))))

    def __repr__(self) -> str:
        return f"Tally(gpus={self.gpus!r}, memory={self.memory!r}, resources={dict(self.resources)!r})"

    def amount(self, dimension: str) -> Amount:
        """The scaled amount of `gpus`, `gpuMemory` or a resource name (see unit_of)."""
        if dimension == GPUS:
            return self.gpus
        if dimension == GPU_MEMORY:
            return self.memory
        return self.resources.get(dimension, 0)

    def as_json(self) -> dict[str, Any]:
        """Exact amounts as strings ("2/7"), GPU memory in MiB: str() of each amount as a Fraction."""
        return {
            "gpus": exact_text(self.gpus, GPU_UNIT),
            "gpuMemoryMiB": exact_text(self.memory, MEMORY_UNIT),
            "resources": {name: exact_text(amount, 1) for name, amount in sorted(self.resources.items())},
        }


NONE = Tally()


def _combine(mine: Mapping[str, Amount], other: Tally, sign: int) -> Mapping[str, Amount]:
    """Resource counts added (sign 1) or taken away (-1); a count that reaches 0 is dropped, as a
    Usage summed from the pods left would not hold it."""
    if not other.resources:
        return mine
    merged = dict(mine)
    for name, amount in other.resources.items():
        value = merged.get(name, 0) + sign * amount
        if value:
            merged[name] = value
        else:
            merged.pop(name, None)
    return merged


def demand_tally(shape: PodShape, settings: QuotaSettings) -> Tally:
    """shape_demand() in units; pods of one template share a shape, so this is a lookup."""
    return _demands(settings).of(shape)[1]


def demand(shape: PodShape, settings: QuotaSettings) -> tuple[Usage, Tally]:
    """shape_demand() and its Tally, from the same table as demand_tally()."""
    return _demands(settings).of(shape)


def own_tally(shape: PodShape, settings: QuotaSettings) -> Tally:
    """What the pod adds to its namespace on its own: its demand without shared claims."""
    return demand_tally(shape.own() if shape.claims else shape, settings)


def canonical(shape: PodShape) -> PodShape:
    """The one object of all shapes equal to `shape`. A dict finds a key that is the very object it
    holds without comparing fields (a PodShape's __eq__ is Python code), so a request that looks its
    shape up in several tables pays for one comparison, here."""
    found = _CANONICAL.get(shape)
    if found is None:
        if len(_CANONICAL) >= MAX_SHAPES:
            _CANONICAL.clear()
        found = _CANONICAL[shape] = shape
    return found


class _Demands:
    """One accounting's demand per shape. Keyed by the settings object itself: hashing a
    QuotaSettings (a dataclass holding a Fraction) would cost more than the lookup saves."""

    def __init__(self, settings: QuotaSettings) -> None:
        self.settings = settings  # held, so that its id is not reused while this table lives
        self._found: dict[PodShape, tuple[Usage, Tally]] = {}

    def of(self, shape: PodShape) -> tuple[Usage, Tally]:
        found = self._found.get(shape)
        if found is None:
            if len(self._found) >= MAX_SHAPES:
                self._found.clear()
            usage = shape_demand(shape, self.settings)
            found = self._found[shape] = (usage, Tally.of(usage))
        return found


MAX_SHAPES = 4096
MAX_ACCOUNTINGS = 64
_TABLES: dict[int, _Demands] = {}
_CANONICAL: dict[PodShape, PodShape] = {}


def _demands(settings: QuotaSettings) -> _Demands:
    table = _TABLES.get(id(settings))
    if table is None or table.settings is not settings:
        if len(_TABLES) >= MAX_ACCOUNTINGS:
            _TABLES.clear()
        table = _TABLES[id(settings)] = _Demands(settings)
    return table
