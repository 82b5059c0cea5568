"""coordination.k8s.io/v1 Lease records on the wire. Pure: dicts in and out, no client.

`renewTime` and `acquireTime` are metav1.MicroTime: RFC 3339 with exactly six
fractional digits, the only form the API server parses. The kubernetes client (from
v33 on) turns a body into its pydantic model and back, re-writing times with
isoformat(), which drops the fraction at zero microseconds; so times are never
written at a whole second.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from webhook.errors import ClusterError

API_VERSION = "coordination.k8s.io/v1"
KIND = "Lease"
LABELS = {"app.kubernetes.io/managed-by": "gpu-webhook", "gpuwebhook.io/lease": "scan"}


@dataclass(frozen=True)
class LeaseSpec:
    holder: str
    duration_seconds: int
    acquire_time: dt.datetime | None
    renew_time: dt.datetime | None
    transitions: int = 0


@dataclass(frozen=True)
class StoredLease:
    spec: LeaseSpec
    resource_version: str


def micro_time(moment: dt.datetime) -> str:
    if moment.microsecond == 0:
        moment = moment.replace(microsecond=1)  # see above: the client would drop a zero fraction
    return moment.astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def parse_micro_time(text: Any) -> dt.datetime | None:
    if not isinstance(text, str) or not text:
        return None
    try:
        moment = dt.datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None
    return moment if moment.tzinfo else moment.replace(tzinfo=dt.UTC)


def to_wire(name: str, namespace: str, spec: LeaseSpec, resource_version: str | None) -> dict[str, Any]:
    metadata: dict[str, Any] = {"name": name, "namespace": namespace, "labels": dict(LABELS)}
    if resource_version:
        metadata["resourceVersion"] = resource_version
    body: dict[str, Any] = {"holderIdentity": spec.holder, "leaseDurationSeconds": spec.duration_seconds}
    if spec.acquire_time is not None:
        body["acquireTime"] = micro_time(spec.acquire_time)
    if spec.renew_time is not None:
        body["renewTime"] = micro_time(spec.renew_time)
    body["leaseTransitions"] = spec.transitions
    return {"apiVersion": API_VERSION, "kind": KIND, "metadata": metadata, "spec": body}


def from_wire(document: Mapping[str, Any]) -> StoredLease:
    """A Lease as read from the API; anything missing or mistyped reads as absent (an open lease)."""
    metadata = document.get("metadata")
    spec = document.get("spec")
    if not isinstance(metadata, dict) or not isinstance(spec, dict):
        raise ClusterError("the Lease read from the API has no metadata or spec")
    holder = spec.get("holderIdentity")
    duration = spec.get("leaseDurationSeconds")
    transitions = spec.get("leaseTransitions")
    return StoredLease(
        LeaseSpec(
            holder=holder if isinstance(holder, str) else "",
            duration_seconds=duration if type(duration) is int and duration > 0 else 0,
            acquire_time=parse_micro_time(spec.get("acquireTime")),
            renew_time=parse_micro_time(spec.get("renewTime")),
            transitions=transitions if type(transitions) is int and transitions >= 0 else 0,
        ),
        str(metadata.get("resourceVersion", "")),
    )
