"""From per-workload fits to policies: one per namespace where that is safe, else one per workload. Pure.

A namespace policy rewrites every GPU pod in the namespace, so it is proposed only
when every workload there is a candidate for the same card. Where busy workloads
share the namespace, each candidate gets a policy of its own that selects its pods
by label; without the pods' labels (an inventory) such a candidate is named in a
note and left out, because a policy that cannot tell it from its busy neighbours
would not leave them alone.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from webhook.utilization.advice import Capabilities, Fit, Need, fit, fit_mode, gpus_freed, need
from webhook.utilization.analysis import NamespaceUsage, Thresholds, WorkloadUsage
from webhook.utilization.owners import OwnerIndex, Workload
from webhook.utilization.policydoc import policy_document, policy_name

_DNS_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?")
_DNS_SUBDOMAIN = re.compile(r"(?=.{1,253}\Z)[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")


@dataclass(frozen=True)
class Recommendation:
    name: str
    namespace: str
    workloads: tuple[Workload, ...]
    fit: Fit
    gpus_reserved: float
    gpus_freed: float
    selector: dict[str, str] | None
    policy: dict[str, Any]


@dataclass(frozen=True)
class Advice:
    recommendations: tuple[Recommendation, ...]
    notes: tuple[str, ...]


def advise(
    usage: NamespaceUsage,
    index: OwnerIndex,
    thresholds: Thresholds,
    capabilities: Capabilities,
    window: str,
) -> Advice:
    fits = {w.workload: fit(w, thresholds, capabilities) for w in usage.workloads}
    candidates = [w for w in usage.workloads if fits[w.workload] is not None]
    if not candidates:
        return Advice((), ())
    # Names come from metric labels, which anyone who can run an exporter can write: a policy
    # is only ever written for names Kubernetes itself would allow.
    odd = [w.workload for w in usage.workloads if not _valid(w.workload)]
    if odd:
        return Advice((), (f"no advice for namespace {usage.namespace!r}: invalid names {odd[:3]!r}",))
    whole = _namespace_wide(usage, candidates, thresholds, capabilities, window)
    if whole is not None:
        return Advice((whole,), ())
    found: list[Recommendation] = []
    notes: list[str] = []
    for candidate in candidates:
        selector = index.selector(candidate.workload, candidate.pods)
        chosen = fits[candidate.workload]
        assert chosen is not None
        if selector is None:
            notes.append(_unselectable(candidate))
            continue
        found.append(_recommendation(usage.namespace, [candidate], chosen, selector, window))
    return Advice(tuple(found), tuple(notes))


def _namespace_wide(
    usage: NamespaceUsage,
    candidates: list[WorkloadUsage],
    thresholds: Thresholds,
    capabilities: Capabilities,
    window: str,
) -> Recommendation | None:
    """One policy for the whole namespace, if every workload is a candidate on the same card."""
    if len(candidates) != len(usage.workloads) or len({c.card for c in candidates}) != 1:
        return None
    needs = [need(c, thresholds) for c in candidates]
    merged = Need(max(n.memory_mib for n in needs if n), max(n.cores for n in needs if n))
    memories = [c.card_memory_mib for c in candidates if c.card_memory_mib is not None]
    for mode in capabilities.modes:
        chosen = fit_mode(mode, merged, candidates[0].card, min(memories, default=None), capabilities)
        if chosen is not None and sum(gpus_freed(c, chosen) for c in candidates) > 0.005:
            return _recommendation(usage.namespace, candidates, chosen, None, window)
    return None


def _recommendation(
    namespace: str,
    usages: Sequence[WorkloadUsage],
    chosen: Fit,
    selector: dict[str, str] | None,
    window: str,
) -> Recommendation:
    workload = usages[0].workload if selector else None
    name = policy_name(namespace, workload)
    reserved = sum(u.gpus_reserved for u in usages)
    freed = sum(gpus_freed(u, chosen) for u in usages)
    advice = (
        f"over {window}: {reserved:.3g} GPUs reserved, p95 utilization "
        f"{max(u.util_p95 or 0 for u in usages):.0f}%, frees {freed:.2f} GPUs with {chosen.describe()}"
    )
    return Recommendation(
        name=name,
        namespace=namespace,
        workloads=tuple(u.workload for u in usages),
        fit=chosen,
        gpus_reserved=reserved,
        gpus_freed=freed,
        selector=selector,
        policy=policy_document(name, namespace, chosen, selector, advice),
    )


def _valid(workload: Workload) -> bool:
    return bool(_DNS_LABEL.fullmatch(workload.namespace) and _DNS_SUBDOMAIN.fullmatch(workload.name))


def _unselectable(usage: WorkloadUsage) -> str:
    return (
        f"{usage.workload.namespace}/{usage.workload.describe()} could share GPUs, but busy workloads "
        "share its namespace; pass --inventory with its pods so a policy can select it by label"
    )
