"""One GPU count for every rule: the GPU devices a pod gets, in every form. Pure.

Quota and max-per-pod must never disagree on how many GPUs a pod holds, so both count
through `webhook.quota.demand`: whole GPUs, time-sliced and MPS shares, MIG slices (each
a device of its own), KAI's `gpu-fraction-num-devices`, native sidecars added to the app
containers, init containers by their peak, and every spelling of a quantity. Policies
written in Rego read the result as `input.gpu` (see `GpuCount.as_input`), so a template
never counts for itself.

A pod whose counts cannot be read is not a pod without GPUs: `error` says why, and the
rules that count deny it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

from webhook.mutation.target import pod_target
from webhook.quota.demand import DEFAULT_SETTINGS, QuotaInputError, pod_shape, shape_demand
from webhook.types import KubeObject


@dataclass(frozen=True)
class GpuCount:
    devices: int = 0
    # The pod's effective request of each extended resource, as the scheduler reserves it.
    resources: Mapping[str, int] = field(default_factory=dict)
    error: str | None = None

    def as_input(self) -> dict[str, Any]:
        """`input.gpu` for Rego: {"devices": N, "resources": {...}} or {"error": "..."}."""
        if self.error is not None:
            return {"error": self.error}
        return {"devices": self.devices, "resources": dict(self.resources)}


NO_GPUS = GpuCount()


def count_gpus(pod: KubeObject) -> GpuCount:
    """The devices of a pod-shaped object (a Pod, or a workload's pod template)."""
    try:
        shape = pod_shape(pod)
    except QuotaInputError as e:
        return GpuCount(error=str(e))
    if shape is None:
        return NO_GPUS
    usage = shape_demand(shape, DEFAULT_SETTINGS)
    return GpuCount(
        devices=_whole(usage.devices),
        resources={name: _whole(amount) for name, amount in sorted(usage.resources.items())},
    )


def _whole(amount: Fraction) -> int:
    # Counts are sums of whole container counts, so always integral; round up if ever not.
    return int(-(-amount.numerator // amount.denominator))


def count_object(obj: object) -> GpuCount:
    """The devices of any reviewed object: a Pod, a workload's template, or no pod at all."""
    target = pod_target(obj) if isinstance(obj, dict) else None
    return NO_GPUS if target is None else count_gpus(target.pod)
