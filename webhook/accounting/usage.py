"""What a pod or a namespace uses: GPU-equivalents, GPU memory and plain resource counts. Pure.

Amounts are exact Fractions: a MIG 1g slice is 1/7 of a GPU, and seven of them must
add up to exactly one GPU, never to 0.9999999.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from fractions import Fraction

ZERO = Fraction(0)
GPUS = "gpus"
GPU_MEMORY = "gpuMemory"


@dataclass(frozen=True)
class Usage:
    """An amount along every dimension a quota can limit. Treated as immutable."""

    gpus: Fraction = ZERO
    gpu_memory_mib: Fraction = ZERO
    resources: Mapping[str, Fraction] = field(default_factory=dict)
    # GPU devices a process can open: whole GPUs, shares, MIG slices, KAI devices. Not a quota
    # dimension: max-per-pod reads it, so that it counts what quota counts.
    devices: Fraction = ZERO

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            self.gpus + other.gpus,
            self.gpu_memory_mib + other.gpu_memory_mib,
            _merge(self.resources, other.resources, lambda a, b: a + b),
            self.devices + other.devices,
        )

    def times(self, count: int) -> Usage:
        return Usage(
            self.gpus * count,
            self.gpu_memory_mib * count,
            {name: amount * count for name, amount in self.resources.items()},
            self.devices * count,
        )

    def maximum(self, other: Usage) -> Usage:
        """Elementwise maximum, as Kubernetes takes it per resource for init containers."""
        return Usage(
            max(self.gpus, other.gpus),
            max(self.gpu_memory_mib, other.gpu_memory_mib),
            _merge(self.resources, other.resources, max),
            max(self.devices, other.devices),
        )

    def amount(self, dimension: str) -> Fraction:
        """The amount of `gpus`, `gpuMemory` (MiB) or a resource name."""
        if dimension == GPUS:
            return self.gpus
        if dimension == GPU_MEMORY:
            return self.gpu_memory_mib
        return self.resources.get(dimension, ZERO)

    @property
    def is_zero(self) -> bool:
        amounts = (self.gpus, self.gpu_memory_mib, self.devices, *self.resources.values())
        return not any(amounts)


NOTHING = Usage()


def total(usages: Iterable[Usage]) -> Usage:
    result = NOTHING
    for usage in usages:
        result = result + usage
    return result


def _merge(
    a: Mapping[str, Fraction], b: Mapping[str, Fraction], combine: Callable[[Fraction, Fraction], Fraction]
) -> dict[str, Fraction]:
    merged = dict(a)
    for name, amount in b.items():
        merged[name] = combine(merged[name], amount) if name in merged else amount
    return merged


def format_amount(value: Fraction, places: int = 2) -> str:
    """A readable decimal: 8 -> "8", 1/2 -> "0.5", 2/7 -> "0.29"."""
    if value.denominator == 1:
        return str(value.numerator)
    rounded = round(value, places)
    text = f"{float(rounded):.{places}f}".rstrip("0").rstrip(".")
    return text if rounded != 0 else f"<{10**-places:.{places}f}"


def format_mib(mib: Fraction) -> str:
    """GPU memory with the largest binary suffix that keeps it readable: 40960 -> "40Gi"."""
    for suffix, size in (("Ti", 1024 * 1024), ("Gi", 1024)):
        if mib >= size:
            return format_amount(mib / size) + suffix
    return format_amount(mib) + "Mi"


def format_dimension(dimension: str, value: Fraction) -> str:
    return format_mib(value) if dimension == GPU_MEMORY else format_amount(value)
