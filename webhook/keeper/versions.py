"""The keeper builds its ResourceClaimTemplates as resource.k8s.io/v1; a cluster that serves only
v1beta2 or v1beta1 is written them in that version.

- v1beta2 has v1's layout: only `apiVersion` changes.
- v1beta1 device requests hold what v1 keeps under `exactly` on the request itself, while
  `firstAvailable` stays (k8s.io/dynamic-resource-allocation api/v1beta1/conversion.go,
  Convert_v1_DeviceRequest_To_v1beta1_DeviceRequest).

On what the keeper writes this undoes webhook.dra.versions.as_v1, through which the watch reads
templates back: the keeper compares specs in v1 and finds its own unchanged.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

from webhook.keeper.loop import TemplateWriter

V1 = "resource.k8s.io/v1"
V1BETA1 = "resource.k8s.io/v1beta1"


def in_version(body: Mapping[str, Any], api_version: str) -> dict[str, Any]:
    """A v1 template `body` as `api_version` (resource.k8s.io/v1, v1beta2 or v1beta1) holds it;
    a body in another version is returned as it stands."""
    if body.get("apiVersion") != V1 or api_version == V1:
        return dict(body)
    converted = {**body, "apiVersion": api_version}
    if api_version == V1BETA1:
        converted["spec"] = _template_spec(body.get("spec"))
    return converted


def _template_spec(spec: Any) -> Any:
    claim = _mapping(spec, "spec")
    devices = _mapping(claim, "devices")
    requests = devices.get("requests")
    if not isinstance(requests, list):
        return spec
    flat_devices = {**devices, "requests": [_flat(request) for request in requests]}
    return {**spec, "spec": {**claim, "devices": flat_devices}}


def _mapping(obj: Any, name: str) -> Mapping[str, Any]:
    value = obj.get(name) if isinstance(obj, Mapping) else None
    return value if isinstance(value, Mapping) else {}


def _flat(request: Any) -> Any:
    exactly = request.get("exactly") if isinstance(request, Mapping) else None
    if not isinstance(exactly, Mapping):
        return request
    return {**{k: v for k, v in request.items() if k != "exactly"}, **exactly}


class ServingStore(TemplateWriter, Protocol):
    def api_version(self) -> str:
        """The resource.k8s.io version the store writes in (it may ask the API once)."""
        ...


class VersionedWriter:
    """The keeper's TemplateWriter: v1 bodies written in the version the store serves."""

    def __init__(self, store: ServingStore) -> None:
        self._store = store

    def create(self, body: Mapping[str, Any]) -> None:
        self._store.create(in_version(body, self._store.api_version()))

    def replace(self, body: Mapping[str, Any]) -> None:
        self._store.replace(in_version(body, self._store.api_version()))

    def delete(self, namespace: str, name: str, resource_version: str) -> None:
        self._store.delete(namespace, name, resource_version)
