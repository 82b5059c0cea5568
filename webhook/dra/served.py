"""Which extended resource names something in the cluster serves. Pure.

A sharing policy rewrites GPU requests to a resource name (`nvidia.com/gpu.shared`, a MIG
slice). A name that no node advertises in its allocatable and that no DeviceClass serves
through `extendedResourceName` (Kubernetes 1.34) leaves every rewritten pod Pending. Node
allocatable is known only when the cluster state lists nodes (an inventory with Node
objects); without it nothing is claimed to be unserved.
"""

from __future__ import annotations

from collections.abc import Iterable

from webhook.dra.index import DraIndex
from webhook.types import KubeObject


def allocatable_names(nodes: Iterable[KubeObject]) -> frozenset[str] | None:
    """Extended resource names any node advertises; None when no node is known at all."""
    found: set[str] = set()
    seen = False
    for node in nodes:
        seen = True
        status = node.get("status")
        for field in ("allocatable", "capacity"):
            amounts = status.get(field) if isinstance(status, dict) else None
            if isinstance(amounts, dict):
                found.update(name for name in amounts if isinstance(name, str) and "/" in name)
    return frozenset(found) if seen else None


def unserved(names: Iterable[str], allocatable: frozenset[str] | None, dra: DraIndex | None) -> list[str]:
    """The names nothing serves: no node's allocatable, no DeviceClass. Empty when nodes are unknown."""
    if allocatable is None:
        return []
    return sorted({n for n in names if n not in allocatable and not (dra is not None and dra.serves(n))})
