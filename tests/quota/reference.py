"""The straightforward quota computation, in exact Fractions: the reference the fast path must equal.

This is the obvious code the request path used before it kept integer tallies and a running
usage counter: usage summed from scratch over every counted pod, limits compared as Fractions,
figures rendered from Fractions. Kept here, not in webhook/, so that it only ever judges.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from webhook.accounting.demand import PodShape, QuotaSettings, claim_demand, shape_demand
from webhook.accounting.usage import GPU_MEMORY, GPUS, NOTHING, Usage, format_dimension
from webhook.dra.resolve import ClaimShape
from webhook.quota.policy import GPUQuota

NAMESPACE_NAME_LABEL = "kubernetes.io/metadata.name"


def usage_from_scratch(shapes: Iterable[tuple[PodShape, int]], settings: QuotaSettings) -> Usage:
    """Every shape times its pods, each shared ResourceClaim once."""
    result = NOTHING
    shared: dict[str, ClaimShape] = {}
    for shape, count in shapes:
        result = result + shape_demand(shape.own(), settings).times(count)
        shared.update((claim.key, claim) for claim in shape.shared_claims())
    for claim in shared.values():
        result = result + claim_demand(claim, settings)
    return result


def usage_json(usage: Usage) -> dict[str, Any]:
    return {
        "gpus": str(usage.gpus),
        "gpuMemoryMiB": str(usage.gpu_memory_mib),
        "resources": {name: str(amount) for name, amount in sorted(usage.resources.items())},
    }


@dataclass(frozen=True)
class Limit:
    dimension: str
    limit: Fraction
    used: Fraction
    asked: Fraction

    @property
    def exceeded(self) -> bool:
        return self.asked > 0 and self.used + self.asked > self.limit

    def need(self) -> str:
        asked, used, limit = (
            format_dimension(self.dimension, v) for v in (self.asked, self.used, self.limit)
        )
        verb = "is" if self.used == 1 else "are"
        return f"needs {asked} {_unit(self.dimension, self.asked)}, {used} of {limit} {verb} in use"

    def summary(self) -> str:
        asked, used, limit = (
            format_dimension(self.dimension, v) for v in (self.asked, self.used, self.limit)
        )
        return f"{self.dimension} used {used}, asked {asked}, limit {limit}"


@dataclass(frozen=True)
class Verdict:
    """What the reference says of one request: the fields the fast path's QuotaOutcome renders."""

    allowed: bool
    messages: tuple[str, ...]
    audit: dict[str, Any]


def reference_check(
    namespace: str,
    pod: str,
    shape: PodShape,
    quotas: Sequence[GPUQuota],
    labels: Mapping[str, str],
    usage_of: Callable[[QuotaSettings], Usage],
    default: QuotaSettings,
    dry_run: bool = False,
) -> Verdict:
    """check_quota() for a readable, unfinished pod without shared claims already held."""
    found: list[tuple[GPUQuota, list[Limit], Usage, Usage]] = []
    every_label = {NAMESPACE_NAME_LABEL: namespace, **labels}
    for quota in quotas:
        if not quota.match.matches(namespace, every_label, {}):
            continue
        settings = quota.settings or default
        demand = shape_demand(shape, settings)
        before = usage_of(settings)
        limits = [
            Limit(dimension, limit, before.amount(dimension), demand.amount(dimension))
            for dimension, limit in quota.limits.items()
            if demand.amount(dimension) > 0
        ]
        if limits:
            found.append((quota, limits, before, before + demand))
    messages = tuple(
        _message(quota.name, namespace, limits) for quota, limits, _, _ in found if _exceeded(limits)
    )
    denied = any(_exceeded(limits) and quota.action == "deny" for quota, limits, _, _ in found)
    checks = [
        {
            "quota": quota.name,
            "action": quota.action,
            "exceeded": _exceeded(limits),
            "limits": {
                limit.dimension: {
                    "limit": str(limit.limit),
                    "used": str(limit.used),
                    "asked": str(limit.asked),
                }
                for limit in limits
            },
            "before": usage_json(before),
            "after": usage_json(after),
        }
        for quota, limits, before, after in found
    ]
    audit = {
        "namespace": namespace,
        "pod": pod,
        "dryRun": dry_run,
        "demand": usage_json(shape_demand(shape, default)),
        "checks": checks,
    }
    return Verdict(not denied, messages, audit)


def _exceeded(limits: Sequence[Limit]) -> bool:
    return any(limit.exceeded for limit in limits)


def _message(quota: str, namespace: str, limits: Sequence[Limit]) -> str:
    needs = "; it ".join(limit.need() for limit in limits if limit.exceeded)
    listing = "; ".join(limit.summary() for limit in limits)
    return f'GPU quota "{quota}" exceeded in namespace {namespace}: this pod {needs} (limits: {listing})'


def _unit(dimension: str, amount: Fraction) -> str:
    if dimension == GPUS:
        return "GPU" if amount <= 1 else "GPUs"
    if dimension == GPU_MEMORY:
        return "of GPU memory"
    return dimension
