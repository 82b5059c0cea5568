"""DRA objects as each resource.k8s.io version lays them out on the wire, written by hand from
k8s.io/api resource/{v1,v1beta2,v1beta1}/types.go, and a cache that records what reaches it.

The same call with version "v1" gives the object a reader must see whatever version it was
served in, so a test's expectation never comes from the converter it checks.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from tests.dra.objects import NS
from webhook.cache import DELETED, ClusterCache
from webhook.dra.index import DRA_KINDS, object_key
from webhook.types import KubeObject

GROUP = "resource.k8s.io"
OLDER = ("v1beta1", "v1beta2")
DRIVER = "gpu.nvidia.com"


def request(version: str, count: int = 1, name: str = "gpu", device_class: str = DRIVER) -> dict[str, Any]:
    """v1beta1 DeviceRequest holds deviceClassName, allocationMode and count itself; v1beta2 and
    v1 hold them in ExactDeviceRequest under `exactly`."""
    exact = {"deviceClassName": device_class, "allocationMode": "ExactCount", "count": count}
    return {"name": name, **exact} if version == "v1beta1" else {"name": name, "exactly": exact}


def claim(version: str, name: str, *requests: dict[str, Any], namespace: str = NS) -> dict[str, Any]:
    return {
        "apiVersion": f"{GROUP}/{version}",
        "kind": "ResourceClaim",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"devices": {"requests": list(requests)}},
    }


def template(version: str, name: str, *requests: dict[str, Any], namespace: str = NS) -> dict[str, Any]:
    return {
        "apiVersion": f"{GROUP}/{version}",
        "kind": "ResourceClaimTemplate",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"spec": {"devices": {"requests": list(requests)}}},
    }


def device_class(version: str, name: str = DRIVER) -> dict[str, Any]:
    """k8s-dra-driver-gpu deployments/helm/dra-driver-nvidia-gpu/templates/deviceclass-gpu.yaml."""
    return {
        "apiVersion": f"{GROUP}/{version}",
        "kind": "DeviceClass",
        "metadata": {"name": name},
        "spec": {"selectors": [{"cel": {"expression": f"device.driver == '{DRIVER}'"}}]},
    }


def gpu(version: str, name: str, memory: str = "80Gi") -> dict[str, Any]:
    """A whole GPU as k8s-dra-driver-gpu cmd/gpu-kubelet-plugin/deviceinfo.go publishes it (type,
    productName; memory capacity). v1beta1 Device wraps what it publishes in `basic`."""
    published = {
        "attributes": {"type": {"string": "gpu"}, "productName": {"string": "NVIDIA A100-SXM4-80GB"}},
        "capacity": {"memory": {"value": memory}},
    }
    return {"name": name, "basic": published} if version == "v1beta1" else {"name": name, **published}


def resource_slice(version: str, node: str, *devices: dict[str, Any], generation: int = 1) -> dict[str, Any]:
    return {
        "apiVersion": f"{GROUP}/{version}",
        "kind": "ResourceSlice",
        "metadata": {"name": f"{node}-{DRIVER}"},
        "spec": {
            "driver": DRIVER,
            "pool": {"name": node, "generation": generation, "resourceSliceCount": 1},
            "nodeName": node,
            "devices": list(devices),
        },
    }


class Recording(ClusterCache):
    """A ClusterCache that keeps the last DRA object of each key it was given, as it was given."""

    def __init__(self, **options: Any) -> None:
        super().__init__(**options)
        self.seen: dict[str, dict[tuple[str, str], KubeObject]] = {kind: {} for kind in DRA_KINDS}

    def replace(self, kind: str, objects: Iterable[KubeObject]) -> None:
        objects = list(objects)
        if kind in DRA_KINDS:
            self.seen[kind] = {object_key(obj): obj for obj in objects}
        super().replace(kind, objects)

    def apply(self, kind: str, event_type: str, obj: KubeObject) -> None:
        if kind in DRA_KINDS:
            if event_type == DELETED:
                self.seen[kind].pop(object_key(obj), None)
            else:
                self.seen[kind][object_key(obj)] = obj
        super().apply(kind, event_type, obj)

    def got(self, kind: str, name: str, namespace: str = "default") -> KubeObject | None:
        return self.seen[kind].get((namespace, name))


def as_read(obj: KubeObject) -> dict[str, Any]:
    """What a reader compares: the object without what the API server adds to metadata."""
    meta = {k: v for k, v in obj["metadata"].items() if k in ("name", "namespace", "labels", "annotations")}
    return {**obj, "metadata": meta}
