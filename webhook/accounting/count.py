"""One GPU count for every rule: the GPU devices a pod gets, in every form. Pure.

Quota and max-per-pod must never disagree on how many GPUs a pod holds, so both count
through `webhook.accounting.demand`: whole GPUs, time-sliced and MPS shares, MIG slices (each
a device of its own), KAI's `gpu-fraction-num-devices`, native sidecars added to the app
containers, init containers by their peak, and every spelling of a quantity. Policies
written in Rego read the result as `input.gpu` (see `GpuCount.as_input`), so a template
never counts for itself.

A pod whose counts cannot be read is not a pod without GPUs: `error` says why, and the
rules that count deny it.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from fractions import Fraction
from typing import Any

from webhook.accounting.demand import (
    DEFAULT_SETTINGS,
    PodShape,
    QuotaInputError,
    claim_demand,
    pod_shape,
    shape_demand,
)
from webhook.accounting.target import pod_target
from webhook.dra.devices import ClaimError
from webhook.dra.index import EMPTY, GROUP, DraIndex
from webhook.dra.requests import gpu_requests
from webhook.dra.resolve import ClaimShape
from webhook.dra.versions import as_v1
from webhook.types import KubeObject


@dataclass(frozen=True)
class GpuCount:
    devices: int = 0
    # The pod's effective request of each extended resource, as the scheduler reserves it.
    resources: Mapping[str, int] = field(default_factory=dict)
    error: str | None = None
    # GPU-equivalents under the default accounting (docs/quota.md), for the audit record.
    equivalents: Fraction = Fraction(0)
    # The accelerator resources the pod asks for, from every vendor (webhook/vendors.py).
    names: tuple[str, ...] = ()
    # What the count was read from, for the quota to reuse rather than read the pod again.
    shape: PodShape | None = field(default=None, compare=False, repr=False)
    # DRA claims judged without published devices: by the largest device their class could select.
    estimated: bool = False
    # The pod's resolved claims by their pod-level name: the requests of each that get GPU devices
    # (none: another driver's devices only). Claims that cannot be resolved are left out.
    claims: Mapping[str, tuple[str, ...]] = field(default_factory=dict, compare=False)

    def as_input(self) -> dict[str, Any]:
        """`input.gpu` for Rego: {"devices": N, "resources": {...}, "names": [...]} and, for a pod
        with resolved claims, {"claims": {name: [request, ...]}}; or {"error": "..."}."""
        if self.error is not None:
            return {"error": self.error}
        found = {"devices": self.devices, "resources": dict(self.resources), "names": list(self.names)}
        if self.claims:
            found["claims"] = {name: list(requests) for name, requests in self.claims.items()}
        return found


NO_GPUS = GpuCount()
ESTIMATED = (
    "DRA claims counted as the largest device their class could select: no ResourceSlices are published"
)
CLAIM_KINDS = frozenset({"ResourceClaim", "ResourceClaimTemplate"})


def count_gpus(pod: KubeObject, dra: DraIndex | None = None, namespace: str = "") -> GpuCount:
    """The devices of a pod-shaped object (a Pod, or a workload's pod template); with `dra`, its
    resource claims too, resolved in `namespace`."""
    try:
        shape = pod_shape(pod, dra, namespace)
    except QuotaInputError as e:
        return GpuCount(error=str(e))
    count = NO_GPUS if shape is None else count_shape(shape)
    claims = _resolved_claims(pod, dra, namespace)
    return replace(count, claims=claims) if claims else count


def _resolved_claims(pod: KubeObject, dra: DraIndex | None, namespace: str) -> dict[str, tuple[str, ...]]:
    """Which claims' requests get GPUs, for rules that judge containers (gpu-no-device-environment)."""
    spec = pod.get("spec")
    if dra is None or not isinstance(spec, dict) or not spec.get("resourceClaims"):
        return {}
    found = gpu_requests(pod, namespace, dra).items()
    return {name: tuple(sorted(requests)) for name, requests in found if requests is not None}


@functools.lru_cache(maxsize=1024)  # pods of one workload share a shape; a shape's count never changes
def count_shape(shape: PodShape) -> GpuCount:
    usage = shape_demand(shape, DEFAULT_SETTINGS)
    return GpuCount(
        devices=_whole(usage.devices),
        resources={name: _whole(amount) for name, amount in sorted(usage.resources.items())},
        equivalents=usage.gpus,
        names=shape.accelerators(),
        shape=shape,
        estimated=any(a.estimated for claim in shape.claims for a in claim.asks),
    )


def _whole(amount: Fraction) -> int:
    # Counts are sums of whole container counts, so always integral; round up if ever not.
    return int(-(-amount.numerator // amount.denominator))


def count_object(obj: object, dra: DraIndex | None = None, namespace: str = "") -> GpuCount:
    """The devices of any reviewed object: a Pod, a workload's template, a ResourceClaim or
    ResourceClaimTemplate (the devices one pod holding it gets), or no pod at all."""
    if not isinstance(obj, dict):
        return NO_GPUS
    if obj.get("kind") in CLAIM_KINDS and str(obj.get("apiVersion", "")).startswith(GROUP + "/"):
        return count_claim(obj, dra or EMPTY)
    target = pod_target(obj)
    return NO_GPUS if target is None else count_gpus(target.pod, dra, namespace)


def needs_dra(obj: object, dra: DraIndex) -> bool:
    """True when counting `obj` may depend on DRA objects: it is a claim, holds claims, or some
    DeviceClass serves an extended resource. Other objects count the same without a snapshot."""
    if not isinstance(obj, dict):
        return False
    if obj.get("kind") in CLAIM_KINDS or dra.backed:
        return True
    target = pod_target(obj)
    spec = target.pod.get("spec") if target is not None else None
    return isinstance(spec, dict) and bool(spec.get("resourceClaims"))


def count_claim(obj: KubeObject, dra: DraIndex) -> GpuCount:
    """A ResourceClaim's or ResourceClaimTemplate's own GPU devices, counted as a pod's claim is."""
    try:
        asks = dra.asks(claim_devices(obj))
    except ClaimError as e:
        return GpuCount(error=str(e))
    if any(a.takes_node for a in asks):
        return GpuCount(error="a request takes every matching device of a node (allocationMode All)")
    usage = claim_demand(ClaimShape("", "", asks), DEFAULT_SETTINGS)
    return GpuCount(
        devices=_whole(usage.devices),
        resources={name: _whole(amount) for name, amount in sorted(usage.resources.items())},
        estimated=any(a.estimated for a in asks),
    )


def claim_devices(obj: KubeObject) -> object:
    """`spec.devices` of a ResourceClaim, `spec.spec.devices` of a ResourceClaimTemplate, read as
    resource.k8s.io/v1 whatever version the object was sent in."""
    spec = as_v1(obj).get("spec")
    if obj.get("kind") == "ResourceClaimTemplate":
        spec = spec.get("spec") if isinstance(spec, dict) else None
    return spec.get("devices") if isinstance(spec, dict) else None
