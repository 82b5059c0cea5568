"""A sharing policy's caps on one pod: how many GPUs, and how much memory per GPU. Pure.

Where GPUs are shared and opting out is not allowed, a pod that asks for a whole card's memory
(or a MIG slice as large as the card) takes the card all the same; `maxMemory` and
`maxGpusPerPod` bound that. The GPU count is the one every rule uses (webhook.accounting).
"""

from __future__ import annotations

from webhook.accounting import names
from webhook.accounting.count import GpuCount, count_gpus
from webhook.accounting.needs import PodNeeds
from webhook.accounting.target import PodTarget
from webhook.decision import Finding
from webhook.mutation import resources
from webhook.sharing_policy import SharingPolicy

LIMITS = "gpu-builtin/sharing-limits"


def sharing_limits(
    target: PodTarget, policy: SharingPolicy, needs: PodNeeds, count: GpuCount | None = None
) -> list[Finding]:
    """`count`: the pod's GPUs when the caller has them (DRA claims included); else counted here."""
    sharing = policy.sharing
    if needs.opt_out and sharing.allow_opt_out:
        return []
    problems = [
        *_too_many(target, sharing.max_gpus_per_pod, count),
        *_too_much(target, needs, sharing.max_memory_mib),
    ]
    return [Finding(LIMITS, "deny", f"{target.describe()}: {p} (policy {policy.name})") for p in problems]


def _too_many(target: PodTarget, limit: int | None, count: GpuCount | None) -> list[str]:
    if limit is None:
        return []
    count = count or count_gpus(target.pod)
    if count.error is not None:
        return [f"its GPUs cannot be counted: {count.error}"]
    return [f"asks for {count.devices} GPUs; at most {limit} per pod"] if count.devices > limit else []


def _too_much(target: PodTarget, needs: PodNeeds, limit: int | None) -> list[str]:
    if limit is None:
        return []
    asked = max([needs.memory_mib or 0, *_slice_memory(target)])
    return [f"asks for {asked} MiB per GPU; at most {limit} MiB"] if asked > limit else []


def _slice_memory(target: PodTarget) -> list[int]:
    """The nominal memory of every MIG slice the pod asks for by name."""
    found = []
    for _, container in target.containers():
        for section in resources.sections(container).values():
            found += [p.memory_gib * 1024 for n in section if (p := names.mig_profile(n)) is not None]
    return found
