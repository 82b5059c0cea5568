"""Build AdmissionReviews the way kube-apiserver sends them."""

from __future__ import annotations

import copy
import uuid
from pathlib import Path
from typing import Any

import orjson
import yaml

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
_PLURALS = {"Pod": "pods", "Deployment": "deployments", "Namespace": "namespaces", "Job": "jobs"}


def load_example(name: str) -> dict[str, Any]:
    path = EXAMPLES / name
    if path.suffix == ".json":
        document = orjson.loads(path.read_bytes())
    else:
        document = yaml.safe_load(path.read_text())
    assert isinstance(document, dict)
    return document


def make_review(
    obj: dict[str, Any] | None,
    *,
    operation: str = "CREATE",
    namespace: str | None = None,
    username: str = "alice@example.com",
    groups: list[str] | None = None,
    dry_run: bool = False,
    old: dict[str, Any] | None = None,
    uid: str | None = None,
) -> dict[str, Any]:
    subject = obj or old or {}
    api_version = subject.get("apiVersion", "v1")
    group, _, version = api_version.rpartition("/")
    kind = subject.get("kind", "Pod")
    metadata = subject.get("metadata", {})
    gvk = {"group": group, "version": version, "kind": kind}
    gvr = {"group": group, "version": version, "resource": _PLURALS.get(kind, kind.lower() + "s")}
    request: dict[str, Any] = {
        "uid": uid or str(uuid.uuid4()),
        "kind": gvk,
        "resource": gvr,
        "requestKind": gvk,
        "requestResource": gvr,
        "name": metadata.get("name", ""),
        "namespace": namespace if namespace is not None else metadata.get("namespace", "default"),
        "operation": operation,
        "userInfo": {"username": username, "groups": groups or ["system:authenticated"]},
        "object": copy.deepcopy(obj),
        "oldObject": copy.deepcopy(old),
        "dryRun": dry_run,
    }
    return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": request}
