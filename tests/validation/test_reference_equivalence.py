"""Speed never changes a decision: the optimised engine against a plain reference evaluation.

The engine indexes constraints by kind and namespace, compiles each template once into a
bundle, folds a kind's only parameter set into that bundle's data, sets the input once per
request and queries templates directly. The reference here does none of that: it tries
every constraint's match on every subject, and runs each matching constraint's template
from its source text in a fresh regopy interpreter with Gatekeeper's plain input
`{review, parameters}`, plus the webhook's GPU count `gpu`.
Both must find the same violations for every review.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from regopy import Input, Interpreter

from tests.support.pods import make_pod, res
from webhook.accounting.count import count_object
from webhook.policy.loader import load_directory, regopy_engine
from webhook.policy.model import PolicySet
from webhook.validation.gatekeeper import Constraint, ConstraintTemplate
from webhook.validation.gatekeeper_input import review_of_request, subjects

BUNDLE = Path(__file__).resolve().parents[2] / "policies" / "security"

Found = set[tuple[str, str]]  # (constraint id, violation message)


def _variants(constraint: dict[str, Any], n: int) -> list[dict[str, Any]]:
    """Copies with their own parameters and narrower matches, so kinds carry several parameter
    sets (the engine's wrapper path) next to kinds with one (the folded-in path)."""
    out = []
    matches: list[dict[str, Any]] = [
        {"namespaces": ["team-*"]},
        {"excludedNamespaces": ["team-b"], "labelSelector": {"matchLabels": {"tier": "gpu"}}},
        {"namespaceSelector": {"matchLabels": {"gpu": "shared"}}},
    ]
    for index, match in enumerate(matches):
        copy_ = copy.deepcopy(constraint)
        copy_["metadata"]["name"] = f"{constraint['metadata']['name']}-v{n}-{index}"
        copy_["spec"]["match"] = {**copy_["spec"].get("match", {}), **match}
        copy_["spec"].setdefault("parameters", {})["extraGpuResources"] = [f"example.com/accel-{index}"]
        copy_["spec"]["enforcementAction"] = ["deny", "warn", "dryrun"][index]
        out.append(copy_)
    return out


def _policy_set(tmp: Path, with_variants: bool) -> PolicySet:
    """The bundle, every constraint given a parameter its template does not default to; with
    variants, every other kind also gets several parameter sets."""
    documents: list[Any] = []
    for n, rule in enumerate(sorted(p for p in BUNDLE.iterdir() if p.is_dir())):
        documents.append(yaml.safe_load((rule / "template.yaml").read_text()))
        constraint = yaml.safe_load((rule / "constraint.yaml").read_text())
        if constraint["kind"] not in ("GpuIgnoreLabel", "GpuDraDeviceClasses"):
            constraint["spec"].setdefault("parameters", {})["extraGpuResources"] = ["example.com/accel-9"]
            if with_variants and n % 2 == 0:
                documents += _variants(constraint, n)
        documents.append(constraint)
    tmp.mkdir(parents=True, exist_ok=True)
    (tmp / "policies.yaml").write_text(yaml.safe_dump_all(documents))
    return load_directory(tmp, regopy_engine)


INVENTORY = {
    "cluster": {
        "v1": {
            "Namespace": {
                name: {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "labels": labels}}
                for name, labels in [
                    ("team-a", {"gpu": "shared"}),
                    ("team-b", {}),
                    ("ml", {"gpu": "shared"}),
                    ("kube-system", {}),
                ]
            }
        }
    }
}


def _reference(request: Mapping[str, Any], policies: PolicySet) -> Found:
    assert policies.constraints is not None and policies.engine is not None
    review = review_of_request(request)
    templates = policies.engine.templates
    found: Found = set()
    for constraint in policies.constraints.constraints:
        if any(constraint.match.matches(s) for s in subjects(review, INVENTORY)):
            found |= {
                (constraint.id, msg) for msg in _run_template(templates[constraint.kind], constraint, review)
            }
    return found


def _run_template(
    template: ConstraintTemplate, constraint: Constraint, review: Mapping[str, Any]
) -> list[str]:
    assert template.rego is not None
    interpreter = Interpreter()
    for n, source in enumerate([*template.libs, template.rego]):
        interpreter.add_module(f"m{n}.rego", source.text)
    # Gatekeeper's input, and the webhook's own GPU count that the bundle's GPU rules read.
    gpu = count_object(review.get("object")).as_input()
    interpreter.set_input(Input({"review": review, "parameters": dict(constraint.parameters), "gpu": gpu}))
    package = template.rego.text.split("package ", 1)[1].split()[0]
    output = interpreter.query(f"v := data.{package}.violation")
    assert output.ok(), output
    return [item["msg"] for item in (output[0]["v"] if len(output) else [])]


def _optimised(request: Mapping[str, Any], policies: PolicySet) -> Found:
    assert policies.constraints is not None and policies.engine is not None
    results = policies.engine.evaluate(request, policies.constraints, INVENTORY)
    assert all(r.error is None for r in results), [r.error for r in results if r.error]
    return {(r.constraint.id, v.msg) for r in results for v in r.violations}


@st.composite
def requests(draw: st.DrawFn) -> dict[str, Any]:
    limits = draw(
        st.sampled_from(
            [
                {},
                {"nvidia.com/gpu": "1"},
                {"nvidia.com/mig-1g.10gb": "2"},
                {"example.com/accel-1": "1"},
                {"example.com/accel-9": "1"},
            ]
        )
    )
    main = res("main", {**limits, "cpu": "1"})
    main["image"] = draw(
        st.sampled_from(["nvcr.io/nvidia/pytorch:24.01", "docker.io/library/python:3", "evil/x"])
    )
    security: dict[str, Any] = {}
    if draw(st.booleans()):
        security["privileged"] = True
    if draw(st.booleans()):
        security["capabilities"] = {
            "add": draw(st.lists(st.sampled_from(["SYS_ADMIN", "NET_RAW", "ALL"]), max_size=2))
        }
    if security:
        main["securityContext"] = security
    if draw(st.booleans()):
        main["env"] = [{"name": draw(st.sampled_from(["NVIDIA_VISIBLE_DEVICES", "HOME"])), "value": "all"}]
    namespace = draw(st.sampled_from(["team-a", "team-b", "ml", "kube-system"]))
    pod = make_pod("p", namespace, [main])
    pod["metadata"]["labels"] = draw(st.sampled_from([{}, {"tier": "gpu"}, {"tier": "cpu"}]))
    spec = pod["spec"]
    for field in ("hostPID", "hostIPC"):
        if draw(st.booleans()):
            spec[field] = True
    if draw(st.booleans()):
        spec["nodeName"] = "gpu-node-1"
    if draw(st.booleans()):
        spec["volumes"] = [
            {"name": "dev", "hostPath": {"path": draw(st.sampled_from(["/dev/nvidia0", "/tmp"]))}}
        ]
    if draw(st.booleans()):
        pod = {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": "d", "namespace": namespace, "labels": pod["metadata"]["labels"]},
            "spec": {"template": {"metadata": {"labels": {"app": "d"}}, "spec": spec}},
        }
    operation = draw(st.sampled_from(["CREATE", "UPDATE"]))
    return _request(pod, operation, draw(st.sampled_from(["alice", "system:admin"])))


def _request(obj: dict[str, Any], operation: str, username: str) -> dict[str, Any]:
    group, version = ("apps", "v1") if obj["kind"] == "Deployment" else ("", "v1")
    return {
        "uid": "u",
        "kind": {"group": group, "version": version, "kind": obj["kind"]},
        "resource": {"group": group, "version": version, "resource": obj["kind"].lower() + "s"},
        "namespace": obj["metadata"]["namespace"],
        "name": obj["metadata"]["name"],
        "operation": operation,
        "userInfo": {"username": username, "groups": []},
        "object": obj,
        "oldObject": obj if operation == "UPDATE" else None,  # as the API server sends a CREATE
        "dryRun": False,
    }


@pytest.fixture(scope="module", params=[False, True], ids=["bundle", "bundle-with-variants"])
def policies(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> PolicySet:
    return _policy_set(tmp_path_factory.mktemp("policies"), request.param)


@settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],  # the profile's, too
)
@given(request=requests())
def test_the_optimised_engine_finds_what_the_reference_finds(
    policies: PolicySet, request: dict[str, Any]
) -> None:
    assert _optimised(request, policies) == _reference(request, policies)


def test_the_comparison_sees_violations_and_several_parameter_sets(tmp_path: Path) -> None:
    """Guards the test above against comparing two empty sets: a bad pod is caught by both."""
    policies = _policy_set(tmp_path, with_variants=True)
    assert policies.constraints is not None
    main = res("main", {"example.com/accel-9": "1"})  # a GPU only by the constraints' parameters
    main["securityContext"] = {"privileged": True}
    pod = make_pod("p", "team-a", [main])
    pod["metadata"]["labels"] = {"tier": "gpu"}
    bad = _request(pod, "CREATE", "alice")
    found = _reference(bad, policies)
    assert {"GpuPrivilegedContainer/gpu-no-privileged-containers"} <= {id_ for id_, _ in found}
    assert _optimised(bad, policies) == found
    kinds = [c.kind for c in policies.constraints.constraints]
    assert any(kinds.count(kind) > 1 for kind in kinds)
