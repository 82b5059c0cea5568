"""A pod's `spec.resourceClaims` resolved to the GPU devices they claim. Pure.

Each entry names a ResourceClaim (`resourceClaimName`, possibly shared by several pods)
or a ResourceClaimTemplate (`resourceClaimTemplateName`: the pod gets a claim of its own).
A named claim carries a key, `namespace/name`, so that a namespace's usage counts it once
however many pods share it. An entry that names nothing known is an error only when the
snapshot is synced: before that, the claim may simply not have arrived yet. `unseen_claims`
lists such entries, for the rules that decide whether the pod may wait for them.
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


@dataclass(frozen=True)
class UnseenClaim:
    """A pod's entry naming a claim or template that the synced snapshot does not hold."""

    source: str  # "ResourceClaimTemplate ns/name", as ClaimShape names it
    entry: str  # the pod's own name for the claim (spec.resourceClaims[].name)

    def describe(self) -> str:
        return f"{self.source} (pod claim {self.entry!r})"


# What a user can do about a claim that does not exist yet, whatever else the message says.
REMEDY = (
    "create it before the pod, or let its controller create it and retry; "
    "pods created by a controller are retried automatically"
)


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


def unseen_claims(pod: Mapping[str, Any], namespace: str, index: DraIndex) -> tuple[UnseenClaim, ...]:
    """The entries naming a claim or template the index does not hold; none unless it is synced
    (before that, nothing is known to be missing). Malformed entries are left to pod_claims."""
    spec = pod.get("spec")
    entries = spec.get("resourceClaims") if isinstance(spec, dict) else None
    if not index.synced or not isinstance(entries, list):
        return ()
    found = []
    for entry in entries:
        named = _named(entry, namespace, index) if isinstance(entry, dict) else None
        if named is not None and not named.known:
            found.append(UnseenClaim(named.source, str(entry.get("name"))))
    return tuple(found)


@dataclass(frozen=True)
class _Named:
    source: str
    key: str  # as ClaimShape.key
    known: bool
    devices: Any


def _named(entry: Mapping[str, Any], namespace: str, index: DraIndex) -> _Named | None:
    """What an entry names, and whether the index holds it; None for an entry naming nothing."""
    claim, template = entry.get("resourceClaimName"), entry.get("resourceClaimTemplateName")
    if isinstance(claim, str) and claim:
        key = f"{namespace}/{claim}"
        return _Named(f"ResourceClaim {key}", key, *index.claim_devices(namespace, claim))
    if isinstance(template, str) and template:
        source = f"ResourceClaimTemplate {namespace}/{template}"
        return _Named(source, "", *index.template_devices(namespace, template))
    return None


def _entry(entry: object, namespace: str, index: DraIndex) -> ClaimShape | None:
    if not isinstance(entry, dict):
        raise ClaimError("spec.resourceClaims must hold mappings")
    named = _named(entry, namespace, index)
    if named is None:
        return None  # an entry naming nothing: the apiserver refuses it; nothing to count
    source = named.source
    if not named.known:
        if index.synced:
            unseen = UnseenClaim(source, str(entry.get("name")))
            raise ClaimError(f"{unseen.describe()} does not exist yet: {REMEDY}")
        return None
    try:
        asks = index.asks(named.devices)
    except ClaimError as e:
        raise ClaimError(f"{source}: {e}") from e
    all_devices = [a for a in asks if a.takes_node]
    if all_devices:
        what = f"request {all_devices[0].request!r} on {all_devices[0].device_class}"
        raise ClaimError(f"{source}: {what} takes every matching device of a node (allocationMode All)")
    return ClaimShape(named.key, source, asks)
