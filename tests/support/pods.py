"""Build Pods, Namespaces and GPUQuotas the way the API serves them, for quota and cluster tests."""

from __future__ import annotations

import copy
import uuid
from collections.abc import Iterable, Mapping
from typing import Any

from webhook.errors import PolicyError
from webhook.quota.policy import GPUQuota, parse_quota

Resources = Mapping[str, int | str]


def res(name: str = "main", amounts: Resources | None = None, **extra: Any) -> dict[str, Any]:
    """A container from an explicit map of resource names; extra fields (restartPolicy) pass through."""
    values = {k: str(v) for k, v in (amounts or {}).items()}
    return {
        "name": name,
        "image": "registry.example.com/app:1",
        "resources": {"limits": dict(values), "requests": dict(values)},
        **extra,
    }


def sidecar(name: str, amounts: Resources | None = None) -> dict[str, Any]:
    return res(name, amounts, restartPolicy="Always")


def make_pod(
    name: str = "p",
    namespace: str = "ml-team",
    containers: Iterable[dict[str, Any]] = (),
    *,
    init: Iterable[dict[str, Any]] = (),
    annotations: Mapping[str, str] | None = None,
    phase: str | None = None,
    uid: str | None = None,
) -> dict[str, Any]:
    metadata: dict[str, Any] = {"name": name, "namespace": namespace, "uid": uid or str(uuid.uuid4())}
    if annotations:
        metadata["annotations"] = dict(annotations)
    spec: dict[str, Any] = {"containers": list(containers) or [res("main")]}
    init_list = list(init)
    if init_list:
        spec["initContainers"] = init_list
    pod: dict[str, Any] = {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": spec}
    if phase:
        pod["status"] = {"phase": phase}
    return pod


def gpu_pod(name: str, namespace: str = "ml-team", gpus: int = 1, **kwargs: Any) -> dict[str, Any]:
    return make_pod(name, namespace, [res("main", {"nvidia.com/gpu": gpus})], **kwargs)


def namespace(name: str, labels: Mapping[str, str] | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "labels": {"kubernetes.io/metadata.name": name, **(labels or {})}}
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": meta}


def quota_doc(name: str, limits: Mapping[str, Any], **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "gpuwebhook.io/v1alpha1",
        "kind": "GPUQuota",
        "metadata": {"name": name},
        "spec": {"limits": dict(limits), **spec},
    }


def quota(name: str, limits: Mapping[str, Any], **spec: Any) -> GPUQuota:
    """A parsed GPUQuota; a test quota that does not parse is a broken test."""
    try:
        return parse_quota(quota_doc(name, limits, **spec), "test.yaml", lambda _: 0)
    except PolicyError as e:
        raise AssertionError(str(e)) from e


def in_namespace(namespace: str, obj: Mapping[str, Any]) -> dict[str, Any]:
    """A copy of `obj` moved to `namespace`."""
    moved = copy.deepcopy(dict(obj))
    moved["metadata"]["namespace"] = namespace
    return moved
