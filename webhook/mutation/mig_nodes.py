"""Node requirements that pin a MIG pod to nodes whose slices hold its ask. Pure data.

They read GPU Feature Discovery's labels (k8s-device-plugin `internal/lm/mig-strategy.go`,
`internal/lm/resource.go`; the expected labels are in `internal/lm/mig-strategy_test.go`):

- single strategy: a node advertises one profile as `nvidia.com/gpu` and labels
  `nvidia.com/mig.strategy=single`, `nvidia.com/gpu.slices.gi=<g>` and `nvidia.com/gpu.memory`
  with the slice's real MiB (0 when the node's MIG layout is invalid). Whole GPUs carry no
  `gpu.slices.gi` label.
- mixed strategy: the resource name already names the profile; the node labels
  `nvidia.com/mig-<profile>.memory` with its real MiB. The pod is pinned on it only for models
  whose table is nominal (webhook/migtable.py), where the node's own measure must decide.
"""

from __future__ import annotations

from typing import Any

from webhook import gpu

STRATEGY = "nvidia.com/mig.strategy"
SLICES = "nvidia.com/gpu.slices.gi"
MEMORY = "nvidia.com/gpu.memory"

Requirement = dict[str, Any]


def _at_least(key: str, mib: int) -> Requirement:
    return {"key": key, "operator": "Gt", "values": [str(mib - 1)]}


def single_strategy(profile: gpu.MigProfile, memory_mib: int) -> list[Requirement]:
    return [
        {"key": STRATEGY, "operator": "In", "values": ["single"]},
        {"key": SLICES, "operator": "In", "values": [str(profile.slices)]},
        _at_least(MEMORY, memory_mib),
    ]


def mixed_strategy(profile: gpu.MigProfile, memory_mib: int, measured: bool) -> list[Requirement]:
    if measured:
        return []
    return [_at_least(profile.resource + ".memory", memory_mib)]


def whole_gpus() -> list[Requirement]:
    """Single strategy, for a pod whose GPUs stay whole: nodes without MIG slices."""
    return [{"key": SLICES, "operator": "DoesNotExist"}]
