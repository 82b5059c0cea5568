"""A pod's `spec.resourceClaims` resolved to the GPU devices they claim. Pure.

Each entry names a ResourceClaim (`resourceClaimName`, possibly shared by several pods)
or a ResourceClaimTemplate (`resourceClaimTemplateName`: the pod gets a claim of its own).
A named claim carries a key, `namespace/name`, so that a namespace's usage counts it once
however many pods share it. An entry that names nothing known is an error only when the
snapshot is synced: before that, the claim may simply not have arrived yet.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from webhook.dra.devices import ClaimError, DeviceAsk
from webhook.dra.index import DraIndex


@dataclass(frozen=True)
class ClaimShape:
    """The GPU devices of one claim a pod holds. Hashable: part of a pod's quota shape."""

    key: str  # "namespace/name" of a shared ResourceClaim; "" for a claim made from a template
    source: str  # "ResourceClaim ns/name" or "ResourceClaimTemplate ns/name", for messages
    asks: tuple[DeviceAsk, ...]


def pod_claims(pod: Mapping[str, Any], namespace: str, index: DraIndex) -> tuple[ClaimShape, ...]:
    """The GPU claims of a pod; raises ClaimError naming any claim that cannot be counted."""
    spec = pod.get("spec")
    entries = spec.get("resourceClaims") if isinstance(spec, dict) else None
    if not entries:
        return ()
    if not isinstance(entries, list):
        raise ClaimError("spec.resourceClaims must be a list")
    found = []
    for entry in entries:
        shape = _entry(entry, namespace, index)
        if shape is not None and shape.asks:
            found.append(shape)
    return tuple(found)


def _entry(entry: object, namespace: str, index: DraIndex) -> ClaimShape | None:
    if not isinstance(entry, dict):
        raise ClaimError("spec.resourceClaims must hold mappings")
    claim, template = entry.get("resourceClaimName"), entry.get("resourceClaimTemplateName")
    if isinstance(claim, str) and claim:
        source, key = f"ResourceClaim {namespace}/{claim}", f"{namespace}/{claim}"
        known, devices = index.claim_devices(namespace, claim)
    elif isinstance(template, str) and template:
        source, key = f"ResourceClaimTemplate {namespace}/{template}", ""
        known, devices = index.template_devices(namespace, template)
    else:
        return None  # an entry naming nothing: the apiserver refuses it; nothing to count
    if not known:
        if index.synced:
            raise ClaimError(f"{source} (pod claim {entry.get('name')!r}) does not exist")
        return None
    try:
        asks = index.asks(devices)
    except ClaimError as e:
        raise ClaimError(f"{source}: {e}") from e
    all_devices = [a for a in asks if a.all_devices]
    if all_devices:
        what = f"request {all_devices[0].request!r} on {all_devices[0].device_class}"
        raise ClaimError(f"{source}: {what} takes every matching device of a node (allocationMode All)")
    return ClaimShape(key, source, asks)
