"""The sharing that would fit a workload, and what it would free. Pure.

A workload needs its p95 GPU memory and its p95 utilization, each with headroom,
per GPU. Sharing modes are tried in the order the cluster supports them; the first
that holds the need and frees part of a GPU wins:

- `mig`: the smallest profile of the card that holds the need (webhook/gpu.py's
  tables, the same choice the mig mutator makes); a slice is its compute slices over the
  card's, as quotas count it (webhook/accounting/shares.py).
- `hami`: memory and compute caps; the larger fraction of the card is what is used.
- `kai`: a memory share of the card.
- `timeslice`, `mps`: `replicas` shares of a card, each fitting only if the need
  is within 1/replicas of memory and compute (time-slicing isolates neither).

Busy workloads (p95 at or above the busy threshold) get nothing.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from webhook import gpu
from webhook.accounting import shares
from webhook.sharing_policy import SharingMode
from webhook.utilization.analysis import Thresholds, WorkloadUsage

GIB = 1024
DEFAULT_MODES: tuple[SharingMode, ...] = ("mig", "timeslice")
SHAREABLE_MODES: tuple[SharingMode, ...] = ("mig", "hami", "kai", "timeslice", "mps")


@dataclass(frozen=True)
class Capabilities:
    """What the cluster can do: the sharing modes it runs, in order of preference."""

    modes: tuple[SharingMode, ...] = DEFAULT_MODES
    replicas: int = 4  # time-slicing and MPS replicas per GPU in the device plugin's config


@dataclass(frozen=True)
class Need:
    memory_mib: int  # whole GiB, so a policy's defaultMemory states it exactly
    cores: int  # percent of a whole card


@dataclass(frozen=True)
class Fit:
    mode: SharingMode
    share: float  # the fraction of one card each GPU of the workload would use
    gpu_model: str | None = None
    profile: str | None = None
    memory_mib: int | None = None
    cores: int | None = None

    def describe(self) -> str:
        if self.profile:
            return f"mig {self.profile}"
        parts: list[str] = [self.mode]
        if self.memory_mib is not None:
            parts.append(f"{self.memory_mib // GIB}Gi")
        if self.cores is not None and self.mode == "hami":
            parts.append(f"{self.cores}%")
        return " ".join(parts)


def need(usage: WorkloadUsage, thresholds: Thresholds) -> Need | None:
    """Memory and compute per GPU with headroom; None when the data does not say or it is busy."""
    if usage.util_p95 is None or usage.memory_p95_mib is None or usage.util_p95 >= thresholds.busy_percent:
        return None
    profile = usage.mig_profile
    # A MIG instance's engine-active ratio is of the instance; scale it to the whole card.
    card_share = float(shares.mig_share(profile.slices, usage.card)) if profile else 1.0
    memory = max(usage.memory_p95_mib * thresholds.headroom, 1.0)
    cores = usage.util_p95 * card_share * thresholds.headroom
    return Need(math.ceil(memory / GIB) * GIB, min(max(math.ceil(cores), 1), 100))


def fit(usage: WorkloadUsage, thresholds: Thresholds, capabilities: Capabilities) -> Fit | None:
    """The first supported mode that holds the need and frees something; None leaves it alone."""
    wanted = need(usage, thresholds)
    if wanted is None or usage.current == "shared":
        return None
    for mode in capabilities.modes:
        candidate = fit_mode(mode, wanted, usage.card, usage.card_memory_mib, capabilities)
        if candidate is not None and gpus_freed(usage, candidate) > 0.005:
            return candidate
    return None


def fit_mode(
    mode: SharingMode,
    wanted: Need,
    card: str | None,
    card_memory_mib: float | None,
    capabilities: Capabilities,
) -> Fit | None:
    if mode == "mig":
        return _mig(wanted, card)
    if card_memory_mib is None or wanted.memory_mib >= card_memory_mib:
        return None
    if mode == "hami":
        share = max(wanted.memory_mib / card_memory_mib, wanted.cores / 100)
        return Fit("hami", share, memory_mib=wanted.memory_mib, cores=wanted.cores)
    if mode == "kai":
        return Fit("kai", wanted.memory_mib / card_memory_mib, gpu_model=card, memory_mib=wanted.memory_mib)
    if mode in ("timeslice", "mps"):
        replicas = capabilities.replicas
        fits = wanted.memory_mib <= card_memory_mib / replicas and wanted.cores <= 100 / replicas
        return Fit(mode, 1 / replicas) if fits and replicas > 1 else None
    return None


def gpus_freed(usage: WorkloadUsage, found: Fit) -> float:
    return usage.gpus_reserved - len(usage.devices) * found.share


def _mig(wanted: Need, card: str | None) -> Fit | None:
    if card is None:
        return None
    profile = gpu.fitting_profile(card, wanted.memory_mib, wanted.cores)
    if profile is None or profile.slices >= gpu.model_slices(card):
        return None
    share = float(shares.mig_share(profile.slices, card))
    return Fit("mig", share, card, profile.name, wanted.memory_mib, wanted.cores)
