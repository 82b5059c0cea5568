"""check_pod_shape: each malformed field is named in one clear line; well-formed pods pass."""

from __future__ import annotations

from typing import Any

import pytest

from webhook.accounting.target import PodTarget
from webhook.mutation.shape import ShapeError, check_pod_shape

REQUIRED = "requiredDuringSchedulingIgnoredDuringExecution"
PREFERRED = "preferredDuringSchedulingIgnoredDuringExecution"
NODE = "spec.affinity.nodeAffinity"  # every message names the whole path


def pod(**spec: Any) -> dict[str, Any]:
    return {
        "metadata": {"name": "p", "labels": {"a": "b"}},
        "spec": {
            "containers": [{"name": "main", "resources": {"limits": {"nvidia.com/gpu": "1"}}}],
            **spec,
        },
    }


def check(obj: dict[str, Any]) -> None:
    check_pod_shape(PodTarget(obj, "Pod", "p"))


def with_metadata(**fields: Any) -> dict[str, Any]:
    obj = pod()
    obj["metadata"].update(fields)
    return obj


def with_container(**fields: Any) -> dict[str, Any]:
    obj = pod()
    obj["spec"]["containers"].append({"name": "second", **fields})
    return obj


MALFORMED = [
    ("metadata", {"metadata": [], "spec": {}}, "metadata must be an object"),
    ("spec", {"spec": "x"}, "spec must be an object"),
    ("name", with_metadata(name=3), "metadata.name must be a string"),
    ("generateName", with_metadata(generateName=[]), "metadata.generateName must be a string"),
    ("labels", with_metadata(labels={"a": 1}), "metadata.labels must map strings to strings"),
    ("annotations", with_metadata(annotations=[]), "metadata.annotations must map strings to strings"),
    ("schedulerName", pod(schedulerName=1), "spec.schedulerName must be a string"),
    (
        "grace is bool",
        pod(terminationGracePeriodSeconds=True),
        "spec.terminationGracePeriodSeconds must be an integer",
    ),
    (
        "grace is text",
        pod(terminationGracePeriodSeconds="30"),
        "spec.terminationGracePeriodSeconds must be an integer",
    ),
    ("tolerations", pod(tolerations=["x"]), "spec.tolerations must be a list of objects"),
    ("volumes", pod(volumes={}), "spec.volumes must be a list of objects"),
    ("containers", pod(containers={}), "spec.containers must be a list of objects"),
    ("initContainers", pod(initContainers=[1]), "spec.initContainers must be a list of objects"),
    ("container name", with_container(name=7), "spec.containers[1].name must be a string"),
    ("resources", with_container(resources=[]), "spec.containers[1].resources must be an object"),
    (
        "limits",
        with_container(resources={"limits": "1"}),
        "spec.containers[1].resources.limits must be an object",
    ),
    (
        "requests",
        with_container(resources={"requests": []}),
        "spec.containers[1].resources.requests must be an object",
    ),
    ("env", with_container(env={}), "spec.containers[1].env must be a list of objects"),
    ("envFrom", with_container(envFrom=["x"]), "spec.containers[1].envFrom must be a list of objects"),
    (
        "volumeMounts",
        with_container(volumeMounts="x"),
        "spec.containers[1].volumeMounts must be a list of objects",
    ),
    ("affinity", pod(affinity=[]), "spec.affinity must be an object"),
    ("nodeAffinity", pod(affinity={"nodeAffinity": 1}), "spec.affinity.nodeAffinity must be an object"),
    (
        "required",
        pod(affinity={"nodeAffinity": {REQUIRED: []}}),
        f"spec.affinity.nodeAffinity.{REQUIRED} must be an object",
    ),
    (
        "terms",
        pod(affinity={"nodeAffinity": {REQUIRED: {"nodeSelectorTerms": {}}}}),
        f"{NODE}.{REQUIRED}.nodeSelectorTerms must be a list of objects",
    ),
    (
        "expressions",
        pod(affinity={"nodeAffinity": {REQUIRED: {"nodeSelectorTerms": [{}, {"matchExpressions": 1}]}}}),
        f"{NODE}.{REQUIRED}.nodeSelectorTerms[1].matchExpressions must be a list of objects",
    ),
    (
        "preferred",
        pod(affinity={"nodeAffinity": {PREFERRED: {}}}),
        f"{NODE}.{PREFERRED} must be a list of objects",
    ),
    (
        "preference",
        pod(affinity={"nodeAffinity": {PREFERRED: [{"weight": 1, "preference": []}]}}),
        f"{NODE}.{PREFERRED}[0].preference must be an object",
    ),
]


@pytest.mark.parametrize(("obj", "message"), [pytest.param(o, m, id=i) for i, o, m in MALFORMED])
def test_a_malformed_field_is_named(obj: dict[str, Any], message: str) -> None:
    with pytest.raises(ShapeError) as caught:
        check(obj)
    assert str(caught.value) == message


WELL_FORMED = [
    ("minimal", {}),
    ("nulls count as absent", {"metadata": None, "spec": None}),
    ("null fields", pod(schedulerName=None, tolerations=None, affinity=None, initContainers=None)),
    (
        "full",
        pod(terminationGracePeriodSeconds=30, tolerations=[{"key": "k"}], affinity={"nodeAffinity": {}}),
    ),
    ("a dict subclass is an object", {"metadata": type("Meta", (dict,), {})(name="p")}),
]


@pytest.mark.parametrize("obj", [pytest.param(o, id=i) for i, o in WELL_FORMED])
def test_a_well_formed_pod_passes(obj: dict[str, Any]) -> None:
    check(obj)
