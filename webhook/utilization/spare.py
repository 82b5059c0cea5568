"""From (GPU, pod) rows to spare capacity per node. Pure.

Only GPUs reporting now count. A GPU's idle fraction comes from its mean
utilization over the (short) window; its free memory fraction from its p95 memory
against used + free. Rows of the same GPU for several pods describe one GPU.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass

from webhook.capacity import CapacitySnapshot, NodeCapacity
from webhook.utilization.cards import product_label
from webhook.utilization.labels import Device
from webhook.utilization.usage import DeviceUsage, FleetReading

_LABEL_VALUE = re.compile(r"[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?")


@dataclass
class _Gpu:
    device: Device
    held: bool = False
    util: float = 0.0
    memory_used: float = 0.0
    memory_total: float | None = None

    @property
    def idle_fraction(self) -> float:
        compute = 1 - self.util / 100
        memory = 1 - self.memory_used / self.memory_total if self.memory_total else compute
        return max(min(compute, memory), 0.0)


def capacity_snapshot(reading: FleetReading) -> CapacitySnapshot:
    return CapacitySnapshot(reading.at, node_capacities(reading.rows)).rank_all()


def node_capacities(rows: Sequence[DeviceUsage]) -> tuple[NodeCapacity, ...]:
    """Spare capacity per node; nodes whose name could not be a label value are left out, so a
    hint built from a hostile or mangled Hostname label can never make a pod invalid."""
    gpus = _gpus(rows)
    by_node: dict[str, list[_Gpu]] = defaultdict(list)
    for found in gpus.values():
        by_node[found.device.node].append(found)
    return tuple(
        _node(node, found) for node, found in sorted(by_node.items()) if _LABEL_VALUE.fullmatch(node)
    )


def _gpus(rows: Sequence[DeviceUsage]) -> dict[tuple[str, str, str, str], _Gpu]:
    found: dict[tuple[str, str, str, str], _Gpu] = {}
    for row in rows:
        if not row.present:
            continue
        gpu = found.setdefault(row.device.key, _Gpu(row.device))
        gpu.held |= row.pod is not None
        gpu.util = max(gpu.util, row.util_mean or 0.0)
        gpu.memory_used = max(gpu.memory_used, row.memory_p95_mib or 0.0)
        gpu.memory_total = row.memory_total_mib or gpu.memory_total
    return found


def _node(node: str, gpus: list[_Gpu]) -> NodeCapacity:
    whole = [g for g in gpus if not g.device.is_mig]
    free_mig: dict[str, int] = defaultdict(int)
    for gpu in gpus:
        if gpu.device.is_mig and not gpu.held:
            free_mig[gpu.device.mig_profile] += 1
    return NodeCapacity(
        node=node,
        products=tuple(sorted({product_label(g.device.model_name) for g in gpus if g.device.model_name})),
        free_gpus=sum(1 for g in whole if not g.held),
        idle_share=round(sum(g.idle_fraction for g in whole), 3),
        free_mig=dict(sorted(free_mig.items())),
    )
