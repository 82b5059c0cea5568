"""What a pod asks for its GPUs, read so that two versions of one pod can be compared. Pure.

kube-apiserver fixes a pod's containers, their resources and its resource claims at creation (an
UPDATE may change images, not resources: kubernetes/kubernetes pkg/apis/core/validation,
ValidatePodUpdate), so a label or annotation update cannot change what a running pod gets, and
the sharing rules need not judge it again. KAI's asks are annotations, which any UPDATE (and a
pods/status update, or a Binding) may write: those are the asks an update can change.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from webhook import gpu
from webhook.accounting.target import CONTAINER_LISTS

# What asks KAI for a share of a GPU (KAI-Scheduler pkg/common/constants/constants.go).
KAI_ASKS = tuple(sorted(gpu.KAI_ANNOTATIONS))


def same_asks(new: Mapping[str, Any] | None, old: Mapping[str, Any] | None) -> bool:
    """Both pods ask for the same devices: the same container resources and claims, pod-level
    resources, resource claims and KAI annotations. False when either is missing or malformed."""
    if not isinstance(new, Mapping) or not isinstance(old, Mapping):
        return False
    return _asks(new) == _asks(old)


def kai_changes(new: Mapping[str, Any], old: Mapping[str, Any]) -> tuple[str, ...]:
    """The KAI annotations whose value differs between two annotation maps (added, changed or removed)."""
    return tuple(key for key in KAI_ASKS if new.get(key) != old.get(key))


def _asks(pod: Mapping[str, Any]) -> tuple[Any, ...]:
    spec = pod.get("spec")
    spec = spec if isinstance(spec, Mapping) else {}
    containers = [
        (list_name, container.get("name"), container.get("resources"))
        for list_name in CONTAINER_LISTS
        for container in _list(spec.get(list_name))
        if isinstance(container, Mapping)
    ]
    metadata = pod.get("metadata")
    annotations = metadata.get("annotations") if isinstance(metadata, Mapping) else None
    annotations = annotations if isinstance(annotations, Mapping) else {}
    kai = {key: annotations[key] for key in KAI_ASKS if key in annotations}
    return containers, spec.get("resourceClaims"), spec.get("resources"), kai


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []
