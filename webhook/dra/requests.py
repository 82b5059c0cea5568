"""Which requests of a pod's claims get GPU devices, for the device variable. Pure.

A container names a claim of its pod (`resources.claims[].name`, one of the pod's
`spec.resourceClaims[].name`) and, optionally, one request of it (`request`); it gets only
those devices (k8s.io/api core/v1 types.go ResourceClaim). A claim on another driver's class
(a NIC, an IMEX channel) gets no GPU: its container is voided like any other without GPUs.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from webhook.dra.devices import ClaimError
from webhook.dra.index import DraIndex

# An entry that cannot be resolved (not known yet, malformed, not countable): it may get GPUs.
UNRESOLVED = None
GpuRequests = frozenset[str] | None


def gpu_requests(pod: Mapping[str, Any], namespace: str, index: DraIndex) -> dict[str, GpuRequests]:
    """For each `spec.resourceClaims` entry, by its pod-level name: the names of the claim's
    requests that get GPU devices (empty: only other drivers' devices), or UNRESOLVED."""
    spec = pod.get("spec")
    entries = spec.get("resourceClaims") if isinstance(spec, dict) else None
    if not isinstance(entries, list):
        return {}
    found: dict[str, GpuRequests] = {}
    for entry in entries:
        if isinstance(entry, dict) and isinstance(entry.get("name"), str):
            found[entry["name"]] = _gpu_requests(entry, namespace, index)
    return found


def _gpu_requests(entry: Mapping[str, Any], namespace: str, index: DraIndex) -> GpuRequests:
    claim, template = entry.get("resourceClaimName"), entry.get("resourceClaimTemplateName")
    if isinstance(claim, str) and claim:
        known, devices = index.claim_devices(namespace, claim)
    elif isinstance(template, str) and template:
        known, devices = index.template_devices(namespace, template)
    else:
        return UNRESOLVED
    if not known:
        return UNRESOLVED
    try:
        asks = index.asks(devices)
    except ClaimError:
        return UNRESOLVED
    # A firstAvailable alternative is asked as "request/subrequest"; containers name the request.
    return frozenset(ask.request.partition("/")[0] for ask in asks)
