"""Placement hints: prefer the nodes with the most spare GPU capacity of the kind a pod asks for.

Opt-in per policy (`inject.preferUnderutilized`). The capacity snapshot comes in
through the mutation context, read from a cache that is refreshed elsewhere; this
module does no I/O. A hint is one preferred node-affinity term toward up to
`maxNodes` nodes by `kubernetes.io/hostname`, chosen among the nodes the pod's
own nodeSelector and required terms admit; required terms are never touched.

A pod is hinted at most once: the hint is recorded in an annotation, and a pod
that carries it is left alone, so a second pass (or a reinvocation that sees a
newer snapshot) changes nothing. Stale or missing data adds nothing. Only Pods get
hints: a workload template outlives any snapshot.
"""

from __future__ import annotations

from typing import Any

from webhook import gpu
from webhook.accounting import names
from webhook.accounting.count import count_gpus
from webhook.accounting.target import PodTarget
from webhook.capacity import MIG, SHARED, WHOLE, NodeCapacity
from webhook.fields import mapping, sequence
from webhook.mutation.context import MutationContext
from webhook.mutation.node_terms import HOSTNAME, admits, node_facts

HINTS_ANNOTATION = "gpuwebhook.io/placement-hints"
PREFERRED = "preferredDuringSchedulingIgnoredDuringExecution"


def prefer_underutilized(target: PodTarget, context: MutationContext) -> bool:
    config = context.policy.inject.prefer_underutilized
    view = context.placement
    if config is None or view is None or target.kind != "Pod" or HINTS_ANNOTATION in target.annotations:
        return False
    if not view.fresh or target.spec.get("nodeName"):  # a bound pod is never scheduled
        return False
    wanted = requested_kind(target, context.mode, context.shared_names)
    if wanted is None:
        return False
    kind, demand = wanted
    nodes = view.snapshot.best_nodes(kind, demand, config.max_nodes, lambda n: _admitted(target, n))
    if not nodes:
        return False
    _add_preference(target, config.weight, nodes)
    mapping(target.metadata, "annotations")[HINTS_ANNOTATION] = ",".join(nodes)
    return True


def requested_kind(
    target: PodTarget, mode: str, shared_names: tuple[str, ...] = ()
) -> tuple[str, int] | None:
    """What the (already rewritten) pod asks for: a MIG profile, whole GPUs, or a share."""
    demand = {name: count for name, count in pod_demand(target, shared_names).items() if count > 0}
    slices = sorted(
        (name, p) for name in demand if (p := names.mig_profile(name)) is not None and not p.shared
    )
    if slices:
        name, profile = slices[0]
        return MIG + profile.name.replace("+", "."), demand[name]
    if mode == "exclusive":
        return (WHOLE, demand[gpu.GPU]) if demand.get(gpu.GPU) else None
    kai = names.asks_kai_share(target.annotations)
    return (SHARED, 1) if demand or kai else None


def pod_demand(target: PodTarget, shared_names: tuple[str, ...] = ()) -> dict[str, int]:
    """Per accelerator resource, what the scheduler reserves: the one count every rule uses
    (native sidecars add to the init containers that start after them)."""
    count = count_gpus(target.pod)
    return {name: n for name, n in count.resources.items() if names.is_accelerator(name, shared_names)}


def _admitted(target: PodTarget, node: NodeCapacity) -> bool:
    return admits(target.spec, node.node, node_facts(node.node, node.products))


def _add_preference(target: PodTarget, weight: int, nodes: tuple[str, ...]) -> None:
    term = {
        "weight": weight,
        "preference": {"matchExpressions": [{"key": HOSTNAME, "operator": "In", "values": list(nodes)}]},
    }
    node_affinity = mapping(mapping(target.spec, "affinity"), "nodeAffinity")
    preferred: list[dict[str, Any]] = sequence(node_affinity, PREFERRED)
    if term not in preferred:
        preferred.append(term)
