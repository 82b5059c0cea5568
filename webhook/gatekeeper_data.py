"""data.inventory for Gatekeeper templates while serving: a file's objects, or the cluster's namespaces.

Gatekeeper syncs whatever its Config lists; we keep only what quota and matching need
(GPU pods, namespaces), so in a cluster the inventory holds namespaces, rebuilt at most
once a second off the cache. `--inventory FILE` gives templates a fuller, static view.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from webhook.cache import ClusterCache
from webhook.inventory import gatekeeper_inventory, load_inventory

REFRESH_SECONDS = 1.0


def static_inventory(path: Path) -> Callable[[], Mapping[str, Any]]:
    """The file's objects, read on first need: most policy sets never read data.inventory, and
    holding every object of a large inventory would cost more memory than the rest of the server."""
    built: list[Mapping[str, Any]] = []

    def current() -> Mapping[str, Any]:
        if not built:
            built.append(load_inventory(path).gatekeeper())
        return built[0]

    return current


def namespace_inventory(
    cache: ClusterCache, clock: Callable[[], float] = time.monotonic
) -> Callable[[], Mapping[str, Any]]:
    built: dict[str, Any] = {"at": float("-inf"), "layout": {}}

    def current() -> Mapping[str, Any]:
        now = clock()
        if now - built["at"] >= REFRESH_SECONDS:
            built["layout"] = gatekeeper_inventory(
                _namespace(n, cache.namespace_labels(n)) for n in cache.namespaces()
            )
            built["at"] = now
        layout: Mapping[str, Any] = built["layout"]
        return layout

    return current


def _namespace(name: str, labels: Mapping[str, str]) -> dict[str, Any]:
    metadata = {"name": name, "labels": {"kubernetes.io/metadata.name": name, **labels}}
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": metadata}
