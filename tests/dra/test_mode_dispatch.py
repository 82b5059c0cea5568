"""mode dra through the installed webhook configurations, as kube-apiserver dispatches them, against
a server given the printed templates as its inventory (what `serve --inventory` reads)."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from typing import Any

import pytest

from tests.support.dispatch import Dispatcher, Request, installed
from tests.support.policies import bundled_policies, sharing_policy
from tests.support.schema import assert_valid
from webhook.dra import templates
from webhook.inventory import Inventory
from webhook.offline import offline_deps
from webhook.quota.policy import parse_quota

NS = "dra-team"
TEMPLATES = "resourceclaimtemplates"
POLICIES = {
    strategy: sharing_policy(
        "priority: 1000\n"
        f"match: {{namespaces: [{NS}], podSelector: {{matchLabels: {{strategy: {strategy}}}}}}}\n"
        f"sharing: {{mode: dra, strategy: {strategy}, maxGpusPerPod: 4{extra}}}",
        name=f"dra-{strategy.lower()}",
    )
    for strategy, extra in (
        ("Exclusive", ""),
        ("TimeSlicing", ", timeSlicing: {interval: Short}, driverFeatureGates: {TimeSlicingSettings: true}"),
        ("MPS", ", mps: {defaultActiveThreadPercentage: 25}, driverFeatureGates: {MPSSupport: true}"),
        ("MIG", ", gpuModel: H100-80GB, defaultMemory: 10Gi, fallback: [largerProfile, wholeGpu]"),
    )
}
QUOTA = {
    "apiVersion": "gpuwebhook.io/v1alpha1",
    "kind": "GPUQuota",
    "metadata": {"name": "dra-team"},
    "spec": {"match": {"namespaces": [NS]}, "limits": {"gpus": 3}},
}


@pytest.fixture(scope="module")
def dispatcher() -> Iterator[Dispatcher]:
    policies = bundled_policies()
    ours = tuple(POLICIES.values())
    quota = parse_quota(QUOTA, "quota.yaml", lambda _: 1)
    policies = dataclasses.replace(
        policies, sharing=(*ours, *policies.sharing), quotas=(*policies.quotas, quota)
    )
    printed = templates.needed(ours, NS, {"kubernetes.io/metadata.name": NS})
    deps = offline_deps(policies, Inventory("dra-mode", tuple(printed)))
    with installed(deps) as dispatcher:
        yield dispatcher


def _pod(strategy: str, count: int) -> dict[str, Any]:
    container = {
        "name": "train",
        "image": "registry.example.com/cuda:12",
        "resources": {"limits": {"nvidia.com/gpu": str(count)}},
    }
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p", "namespace": NS, "labels": {"strategy": strategy}},
        "spec": {"containers": [container]},
    }


@pytest.mark.parametrize("strategy", POLICIES)
def test_whole_gpus_become_a_claim_on_a_printed_template(dispatcher: Dispatcher, strategy: str) -> None:
    outcome = dispatcher.admit(Request("CREATE", _pod(strategy, 2)))
    assert outcome.allowed, outcome.message
    final = outcome.object
    assert final is not None
    assert_valid(final)
    container = final["spec"]["containers"][0]
    assert "nvidia.com/gpu" not in container["resources"].get("limits", {})
    (claim,) = container["resources"]["claims"]
    (entry,) = [c for c in final["spec"]["resourceClaims"] if c["name"] == claim["name"]]
    printed = {t["metadata"]["name"] for t in templates.templates_for(POLICIES[strategy], NS)}
    assert entry["resourceClaimTemplateName"] in printed
    again = dispatcher.admit(Request("CREATE", final))
    assert again.allowed and again.object == final  # idempotent


def test_claimed_gpus_are_held_to_quota(dispatcher: Dispatcher) -> None:
    outcome = dispatcher.admit(Request("CREATE", _pod("Exclusive", 4)))
    assert not outcome.allowed and 'GPU quota "dra-team" exceeded' in outcome.message


def _two_containers(strategy: str) -> dict[str, Any]:
    pod = _pod(strategy, 2)
    pod["spec"]["containers"].append({**_pod(strategy, 2)["spec"]["containers"][0], "name": "serve"})
    return pod


@pytest.mark.parametrize(
    ("strategy", "allowed"), [("TimeSlicing", True), ("MPS", True), ("Exclusive", False)]
)
def test_containers_sharing_a_claim_count_once(dispatcher: Dispatcher, strategy: str, allowed: bool) -> None:
    """Two containers of 2 GPUs: shared, one claim of 2 fits the quota of 3; exclusive, 4 do not."""
    outcome = dispatcher.admit(Request("CREATE", _two_containers(strategy)))
    assert outcome.allowed == allowed, outcome.message
    if allowed:
        final = outcome.object
        assert final is not None
        assert_valid(final)
        assert [c["resources"]["claims"] for c in final["spec"]["containers"]] == [[{"name": "gpu"}]] * 2
        assert dispatcher.admit(Request("CREATE", final)).object == final  # idempotent


def test_a_template_nobody_printed_is_named(dispatcher: Dispatcher) -> None:
    pod = _pod("Exclusive", 1)
    pod["spec"]["containers"][0]["resources"] = {"claims": [{"name": "gpu"}]}
    pod["spec"]["resourceClaims"] = [{"name": "gpu", "resourceClaimTemplateName": "dra-exclusive-9gpu-0"}]
    outcome = dispatcher.admit(Request("CREATE", pod))
    assert not outcome.allowed and "dra-exclusive-9gpu-0" in outcome.message


def _on_template(strategy: str, template: str) -> dict[str, Any]:
    pod = _pod(strategy, 1)
    pod["spec"]["containers"][0]["resources"] = {"claims": [{"name": "gpu"}]}
    pod["spec"]["resourceClaims"] = [{"name": "gpu", "resourceClaimTemplateName": template}]
    return pod


def test_a_template_of_another_policy_is_no_way_around_the_sharing(dispatcher: Dispatcher) -> None:
    exclusive = templates.template_name(POLICIES["Exclusive"], templates.Shape(1))
    denied = dispatcher.admit(Request("CREATE", _on_template("TimeSlicing", exclusive)))
    assert not denied.allowed and "[gpu-builtin/sharing-enforced]" in denied.message
    assert f"ResourceClaimTemplate {NS}/{exclusive}" in denied.message
    own = dispatcher.admit(Request("CREATE", _on_template("Exclusive", exclusive)))
    assert own.allowed, own.message


def _template_object(strategy: str, count: int) -> dict[str, Any]:
    return templates.template(POLICIES[strategy], NS, templates.Shape(count))


def test_a_template_under_a_policys_name_must_be_the_policys(dispatcher: Dispatcher) -> None:
    printed = _template_object("TimeSlicing", 1)
    assert dispatcher.admit(Request("CREATE", printed, resource=TEMPLATES)).allowed  # as printed (GitOps)
    squatted = {**printed, "spec": _template_object("Exclusive", 1)["spec"]}
    denied = dispatcher.admit(Request("CREATE", squatted, resource=TEMPLATES))
    assert not denied.allowed and "[gpu-builtin/dra-claim]" in denied.message
    assert "belongs to policy dra-timeslicing" in denied.message
    other = {**squatted, "metadata": {**squatted["metadata"], "name": "my-own-template"}}
    assert dispatcher.admit(Request("CREATE", other, resource=TEMPLATES)).allowed


def test_a_policys_template_that_someone_else_made_differently_is_no_escape() -> None:
    """Made before the webhook could refuse it: the pods pointed at it are denied instead."""
    ours = (POLICIES["TimeSlicing"],)
    printed = templates.needed(ours, NS, {"kubernetes.io/metadata.name": NS})
    squatted = [{**t, "spec": _template_object("Exclusive", 1)["spec"]} for t in printed]
    policies = dataclasses.replace(bundled_policies(), sharing=ours)
    deps = offline_deps(policies, Inventory("squatted", tuple(squatted)))
    with installed(deps) as dispatcher:
        outcome = dispatcher.admit(Request("CREATE", _pod("TimeSlicing", 1)))
    assert not outcome.allowed and "[gpu-builtin/sharing-enforced]" in outcome.message
