"""Usage per workload and per namespace, from (GPU, pod) rows. Pure.

A GPU is reserved by whoever holds it now (it reports at the end of the window);
the statistics cover every pod of the workload across the window, so a Deployment
whose pods were replaced is judged on its whole history. A whole GPU counts as 1,
a MIG instance as its compute slices over the card's (webhook/accounting/shares.py, as
quotas count it), a GPU held by k pods at once (time-slicing) as 1/k to each.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Literal

from webhook import gpu
from webhook.accounting import shares
from webhook.utilization import cards
from webhook.utilization.labels import Device
from webhook.utilization.owners import OwnerIndex, Workload
from webhook.utilization.usage import DeviceUsage

State = Literal["idle", "underused", "busy", "no data"]


@dataclass(frozen=True)
class Thresholds:
    idle_percent: float = 5.0
    busy_percent: float = 50.0
    headroom: float = 1.25


@dataclass(frozen=True)
class WorkloadUsage:
    workload: Workload
    pods: tuple[str, ...]
    devices: tuple[Device, ...]
    gpus_reserved: float
    util_mean: float | None
    util_p95: float | None  # the highest p95 among its GPUs
    memory_peak_mib: float | None
    memory_p95_mib: float | None  # the highest p95 among its GPUs
    model_name: str
    card: str | None  # a GPU_MODELS entry, when the card is one of the MIG-capable models
    card_memory_mib: float | None
    current: str  # exclusive, shared, or "mig <profile>"
    state: State

    @property
    def mig_profile(self) -> gpu.MigProfile | None:
        names = {d.mig_profile for d in self.devices if d.is_mig}
        if len(names) != 1 or self.card is None:
            return None
        return cards.mig_profile(self.card, names.pop())


@dataclass(frozen=True)
class NamespaceUsage:
    namespace: str
    workloads: tuple[WorkloadUsage, ...]
    gpus_reserved: float
    util_mean: float | None
    util_p95: float | None
    memory_peak_mib: float | None
    idle: bool


def workloads(rows: Sequence[DeviceUsage], index: OwnerIndex, thresholds: Thresholds) -> list[WorkloadUsage]:
    """Every workload that holds a GPU now, sorted by namespace and name."""
    holders = _holders(rows)
    grouped: dict[Workload, list[DeviceUsage]] = defaultdict(list)
    for row in rows:
        if row.pod is not None:
            grouped[index.owner(row.pod.namespace, row.pod.pod)].append(row)
    found = [_workload(w, group, holders, thresholds) for w, group in grouped.items()]
    return sorted((w for w in found if w.devices), key=lambda w: w.workload)


def namespaces(usages: Iterable[WorkloadUsage], thresholds: Thresholds) -> list[NamespaceUsage]:
    grouped: dict[str, list[WorkloadUsage]] = defaultdict(list)
    for usage in usages:
        grouped[usage.workload.namespace].append(usage)
    return [_namespace(ns, tuple(group), thresholds) for ns, group in sorted(grouped.items())]


def unallocated(rows: Sequence[DeviceUsage]) -> list[Device]:
    """GPUs (and MIG instances) reporting now that no pod holds."""
    held = {r.device.key for r in rows if r.present and r.pod is not None}
    free = {r.device.key: r.device for r in rows if r.present and r.pod is None and r.device.key not in held}
    return sorted(free.values())


def _holders(rows: Sequence[DeviceUsage]) -> dict[tuple[str, str, str, str], int]:
    counts: dict[tuple[str, str, str, str], int] = defaultdict(int)
    for row in rows:
        if row.present and row.pod is not None:
            counts[row.device.key] += 1
    return counts


def _workload(
    workload: Workload,
    rows: list[DeviceUsage],
    holders: dict[tuple[str, str, str, str], int],
    thresholds: Thresholds,
) -> WorkloadUsage:
    held = [r for r in rows if r.present]
    devices = tuple(sorted({r.device for r in held}))
    card, card_memory = _card(held or rows)
    means = [r.util_mean for r in rows if r.util_mean is not None]
    mean = sum(means) / len(means) if means else None
    p95 = _max(r.util_p95 for r in rows)
    return WorkloadUsage(
        workload=workload,
        pods=tuple(sorted({r.pod.pod for r in rows if r.pod is not None})),
        devices=devices,
        gpus_reserved=sum(_reserved(r.device, card, holders[r.device.key]) for r in held),
        util_mean=mean,
        util_p95=p95,
        memory_peak_mib=_max(r.memory_peak_mib for r in rows),
        memory_p95_mib=_max(r.memory_p95_mib for r in rows),
        model_name=rows[0].device.model_name,
        card=card,
        card_memory_mib=card_memory,
        current=_current(devices, holders),
        state=_state(mean, p95, thresholds),
    )


def _card(rows: list[DeviceUsage]) -> tuple[str | None, float | None]:
    """The card model and a whole card's memory, from the first row that tells."""
    for row in rows:
        device = row.device
        if device.is_mig:
            card = cards.mig_card_model(device.model_name, device.mig_profile)
            if card is not None:
                return card, float(gpu.model_memory_mib(card))
        elif row.memory_total_mib:
            return cards.card_model(device.model_name, row.memory_total_mib), row.memory_total_mib
    return None, None


def _reserved(device: Device, card: str | None, holders: int) -> float:
    if device.is_mig:
        profile = cards.mig_profile(card, device.mig_profile) if card else None
        if profile is not None:
            return float(shares.mig_share(profile.slices, card))
        slices = device.mig_profile.split("g.", 1)[0]
        return float(shares.mig_share(int(slices))) if slices.isdigit() else 1.0
    return 1 / max(holders, 1)


def _current(devices: tuple[Device, ...], holders: dict[tuple[str, str, str, str], int]) -> str:
    profiles = sorted({d.mig_profile for d in devices if d.is_mig})
    if profiles:
        return "mig " + ",".join(profiles)
    return "shared" if any(holders[d.key] > 1 for d in devices) else "exclusive"


def _state(mean: float | None, p95: float | None, thresholds: Thresholds) -> State:
    if mean is None or p95 is None:
        return "no data"
    if mean < thresholds.idle_percent:
        return "idle"
    return "busy" if p95 >= thresholds.busy_percent else "underused"


def _namespace(namespace: str, usages: tuple[WorkloadUsage, ...], thresholds: Thresholds) -> NamespaceUsage:
    reserved = sum(u.gpus_reserved for u in usages)
    weighted = [(u.util_mean, u.gpus_reserved) for u in usages if u.util_mean is not None]
    weight = sum(w for _, w in weighted)
    mean = sum(m * w for m, w in weighted) / weight if weight else None
    return NamespaceUsage(
        namespace=namespace,
        workloads=usages,
        gpus_reserved=reserved,
        util_mean=mean,
        util_p95=_max(u.util_p95 for u in usages),
        memory_peak_mib=_max(u.memory_peak_mib for u in usages),
        idle=mean is not None and reserved > 0 and mean < thresholds.idle_percent,
    )


def _max(values: Iterable[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return max(present) if present else None
