"""Requests and review dependencies for the native policy tests."""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from webhook.native.params import from_objects
from webhook.policy.loader import load_directory, load_sources
from webhook.policy.model import PolicySet
from webhook.review import ReviewDeps
from webhook.types import AdmissionRequest

POLICIES = Path(__file__).parent / "policies"
NAMESPACES = {
    "test": {"environment": "test"},
    "params": {"environment": "params"},
    "meshed": {"mesh": "on"},
    "plain": {},
}
LIMIT = {
    "apiVersion": "v1",
    "kind": "ConfigMap",
    "metadata": {"name": "replica-limit-test.example.com", "namespace": "params"},
    "data": {"maxReplicas": "3"},
}
RESOURCES = {
    "Deployment": ("apps", "deployments"),
    "Pod": ("", "pods"),
    "ConfigMap": ("", "configmaps"),
    "Namespace": ("", "namespaces"),
}


def bundled() -> PolicySet:
    return load_directory(POLICIES)


def policies(text: str, name: str = "policy.yaml") -> PolicySet:
    return load_sources([(name, text.encode())])


def deps(policy_set: PolicySet, params: Sequence[dict[str, Any]] = (LIMIT,)) -> ReviewDeps:
    return ReviewDeps(
        policies=policy_set,
        namespace_labels=lambda name: NAMESPACES.get(name, {}),
        native_params=from_objects(list(params)),
    )


def deployment(replicas: int, namespace: str = "test") -> dict[str, Any]:
    container = {"name": "app", "image": "registry.example.com/app:1"}
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "web", "namespace": namespace},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": "web"}},
            "template": {"metadata": {"labels": {"app": "web"}}, "spec": {"containers": [container]}},
        },
    }


def pod(namespace: str = "meshed", labels: Mapping[str, str] | None = None) -> dict[str, Any]:
    metadata: dict[str, Any] = {"name": "app", "namespace": namespace}
    if labels is not None:
        metadata["labels"] = dict(labels)
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": metadata,
        "spec": {"containers": [{"name": "app", "image": "registry.example.com/app:1"}]},
    }


def request(
    obj: dict[str, Any], operation: str = "CREATE", old: dict[str, Any] | None = None
) -> AdmissionRequest:
    group, resource = RESOURCES[obj["kind"]]
    version = obj["apiVersion"].rpartition("/")[2]
    gvk = {"group": group, "version": version, "kind": obj["kind"]}
    gvr = {"group": group, "version": version, "resource": resource}
    metadata = obj["metadata"]
    namespace = metadata["name"] if obj["kind"] == "Namespace" else metadata.get("namespace", "")
    made: dict[str, Any] = {
        "uid": "8e8c8d1c-0000-4000-8000-000000000001",
        "kind": gvk,
        "resource": gvr,
        "requestKind": gvk,
        "requestResource": gvr,
        "name": metadata.get("name", ""),
        "namespace": namespace,
        "operation": operation,
        "userInfo": {"username": "alice", "groups": ["system:authenticated"]},
        "object": copy.deepcopy(obj),
        "oldObject": old,
        "dryRun": False,
    }
    return made  # type: ignore[return-value]
