"""Which extended resource names something in the cluster serves. Pure.

A sharing policy rewrites GPU requests to a resource name (`nvidia.com/gpu.shared`, a MIG
slice). A name that no node advertises in its allocatable and that no DeviceClass serves
through `extendedResourceName` (Kubernetes 1.34) leaves every rewritten pod Pending. Node
allocatable is known when the cluster state lists nodes: the live watch of nodes, or an
inventory with Node objects. Without it nothing is claimed to be unserved.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping

from webhook.dra.index import DraIndex
from webhook.types import KubeObject


def extended_names(node: KubeObject) -> frozenset[str]:
    """The extended resource names (those with a domain) in a node's allocatable or capacity."""
    status = node.get("status")
    found: set[str] = set()
    for field in ("allocatable", "capacity"):
        amounts = status.get(field) if isinstance(status, dict) else None
        if isinstance(amounts, dict):
            found.update(name for name in amounts if isinstance(name, str) and "/" in name)
    return frozenset(found)


def allocatable_names(nodes: Iterable[KubeObject]) -> frozenset[str] | None:
    """Extended resource names any node advertises; None when no node is known at all."""
    index = NodeNames()
    index.replace({str(i): extended_names(node) for i, node in enumerate(nodes)})
    return index.union()


class NodeNames:
    """Per node only its set of extended resource names, never the Node: nodes of one pool
    advertise the same set, so they share one frozenset and 10,000 nodes cost a dict entry each.
    Not thread-safe: the cluster cache holds its lock around every call."""

    def __init__(self) -> None:
        self.listed = False
        self._by_node: dict[str, frozenset[str]] = {}
        self._interned: dict[frozenset[str], frozenset[str]] = {}
        self._refs: Counter[frozenset[str]] = Counter()

    def __len__(self) -> int:
        return len(self._by_node)

    @property
    def distinct_sets(self) -> int:
        """How many different name sets the nodes share between them (about one per node pool)."""
        return len(self._interned)

    def replace(self, nodes: Mapping[str, frozenset[str]]) -> bool:
        """A full list; True, as `put`: the union may have changed."""
        self._by_node.clear()
        self._interned.clear()
        self._refs.clear()
        for node, names in nodes.items():
            self.put(node, names)
        self.listed = True
        return True

    def put(self, node: str, names: frozenset[str]) -> bool:
        """Record a node's names; True when the union may have changed."""
        if self._by_node.get(node) == names:
            return False  # a status heartbeat: the names are unchanged
        self.remove(node)
        shared = self._interned.setdefault(names, names)
        self._refs[shared] += 1
        self._by_node[node] = shared
        return True

    def remove(self, node: str) -> bool:
        names = self._by_node.pop(node, None)
        if names is None:
            return False
        self._refs[names] -= 1
        if self._refs[names] <= 0:
            del self._refs[names]
            del self._interned[names]
        return True

    def union(self) -> frozenset[str] | None:
        """Every name some node advertises; None before the first list, or while no node is known."""
        if not self.listed or not self._by_node:
            return None
        return frozenset().union(*self._interned)


def unserved(names: Iterable[str], allocatable: frozenset[str] | None, dra: DraIndex | None) -> list[str]:
    """The names nothing serves: no node's allocatable, no DeviceClass. Empty when nodes are unknown."""
    if allocatable is None:
        return []
    return sorted({n for n in names if n not in allocatable and not (dra is not None and dra.serves(n))})
