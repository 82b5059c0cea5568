"""Gatekeeper documents for tests: templates, constraints and the objects they review."""

from __future__ import annotations

from typing import Any

from webhook.validation.gatekeeper import (
    Constraint,
    ConstraintTemplate,
    Where,
    parse_constraint,
    parse_template,
)

# v0, as the gatekeeper-library writes them: a lib, a wildcard inside a call, a parameter schema.
ALLOWED_REPOS = """package k8sallowedrepos

import data.lib.images.exempt

violation[{"msg": msg, "details": {"container": c.name}}] {
  c := input.review.object.spec.containers[_]
  not exempt(c.image)
  not startswith(c.image, input.parameters.repos[_])
  msg := sprintf("container <%v> uses image <%v> from a repository not in %v", [
    c.name, c.image, input.parameters.repos,
  ])
}
"""
IMAGES_LIB = """package lib.images

exempt(image) {
  exemptions := object.get(input.parameters, "exemptImages", [])
  image == exemptions[_]
}
"""
REPOS_SCHEMA = {
    "type": "object",
    "properties": {
        "repos": {"type": "array", "items": {"type": "string"}},
        "exemptImages": {"type": "array", "items": {"type": "string"}},
    },
}

# Referential: a Service selector already used by another Service in the namespace.
UNIQUE_SELECTOR = """package k8suniqueselector

violation[{"msg": msg}] {
  selector := input.review.object.spec.selector
  other := data.inventory.namespace[input.review.object.metadata.namespace]["v1"]["Service"][name]
  name != input.review.object.metadata.name
  other.spec.selector == selector
  msg := sprintf("selector is already used by service <%v>", [name])
}
"""

# A runtime error: the function has two different values for the same argument.
CONFLICT = """package k8sconflict

level(x) = 1 { true }
level(x) = 2 { true }

violation[{"msg": "unreachable"}] {
  level(input.review.object) > 5
}
"""

# regopy aborts the whole process compiling this (a `with input as` over another package's rule).
CRASHES_REGOPY = """package k8scrash
import future.keywords.in

violation[{"msg": name}] {
  some name, p in input.review.object
  review := input.review
  found := data.lib.inner.violation with input as {"review": review, "parameters": p}
  count(found) > 0
}
"""
CRASHES_REGOPY_LIB = """package lib.inner

violation[{"msg": "x"}] {
  c := input.review.object.spec.containers[_]
  not startswith(c.image, "good/")
}
"""


def template(
    kind: str,
    rego: str,
    *,
    libs: tuple[str, ...] = (),
    schema: dict[str, Any] | None = None,
    version: str | None = None,
) -> dict[str, Any]:
    target: dict[str, Any] = {"target": "admission.k8s.gatekeeper.sh"}
    if version is None:
        target["rego"] = rego
        if libs:
            target["libs"] = list(libs)
    else:
        source: dict[str, Any] = {"rego": rego, "version": version}
        if libs:
            source["libs"] = list(libs)
        target["code"] = [{"engine": "Rego", "source": source}]
    crd: dict[str, Any] = {"names": {"kind": kind}}
    if schema is not None:
        crd["validation"] = {"openAPIV3Schema": schema}
    return {
        "apiVersion": "templates.gatekeeper.sh/v1",
        "kind": "ConstraintTemplate",
        "metadata": {"name": kind.lower()},
        "spec": {"crd": {"spec": crd}, "targets": [target]},
    }


def constraint(
    kind: str,
    name: str,
    *,
    parameters: dict[str, Any] | None = None,
    match: dict[str, Any] | None = None,
    action: str | None = None,
    annotations: dict[str, str] | None = None,
) -> dict[str, Any]:
    spec: dict[str, Any] = {}
    if parameters is not None:
        spec["parameters"] = parameters
    if match is not None:
        spec["match"] = match
    if action is not None:
        spec["enforcementAction"] = action
    metadata: dict[str, Any] = {"name": name}
    if annotations:
        metadata["annotations"] = annotations
    return {
        "apiVersion": "constraints.gatekeeper.sh/v1beta1",
        "kind": kind,
        "metadata": metadata,
        "spec": spec,
    }


def load_template(doc: dict[str, Any]) -> ConstraintTemplate:
    return parse_template(doc, Where(f"{doc['metadata']['name']}.yaml"))


def load_constraint(doc: dict[str, Any], *templates: ConstraintTemplate) -> Constraint:
    return parse_constraint(doc, Where(f"{doc['metadata']['name']}.yaml"), {t.kind: t for t in templates})


def pod(
    name: str, *images: str, namespace: str = "team-a", labels: dict[str, str] | None = None
) -> dict[str, Any]:
    containers = [{"name": f"c{i}", "image": image} for i, image in enumerate(images)]
    metadata: dict[str, Any] = {"name": name, "namespace": namespace, "labels": labels or {}}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": {"containers": containers}}


def service(name: str, selector: dict[str, str], namespace: str = "team-a") -> dict[str, Any]:
    metadata = {"name": name, "namespace": namespace}
    return {"apiVersion": "v1", "kind": "Service", "metadata": metadata, "spec": {"selector": selector}}


def request(
    obj: dict[str, Any] | None, operation: str = "CREATE", old: dict[str, Any] | None = None
) -> dict[str, Any]:
    """An AdmissionRequest as kube-apiserver sends it."""
    subject = obj or old
    assert subject is not None
    group, _, version = subject["apiVersion"].rpartition("/")
    metadata = subject.get("metadata", {})
    return {
        "uid": "0000",
        "kind": {"group": group, "version": version, "kind": subject["kind"]},
        "resource": {"group": group, "version": version, "resource": subject["kind"].lower() + "s"},
        "name": metadata.get("name", ""),
        "namespace": metadata.get("namespace", ""),
        "operation": operation,
        "userInfo": {"username": "alice"},
        "object": obj,
        "oldObject": old,
    }
