"""The quota routes that reading selector text left open, closed through the installed webhook
configurations: a cluster whose A100-80GB node publishes what NVIDIA's DRA driver publishes
(k8s-dra-driver-gpu cmd/gpu-kubelet-plugin/deviceinfo.go), with the driver chart's classes."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from typing import Any

import pytest

from tests.dra.objects import NS, claim, device_class, pod, request
from tests.dra.test_published_counts import PROFILE, a100_node, cel, driver_classes
from tests.support.dispatch import Dispatcher, Request, installed
from tests.support.policies import bundled_policies
from tests.support.schema import assert_valid
from webhook.accounting.count import ESTIMATED
from webhook.inventory import Inventory
from webhook.offline import offline_deps
from webhook.quota.policy import parse_quota

ATTRIBUTE_ONLY = device_class("any-nvidia.example.com", "device.attributes['gpu.nvidia.com'].type == 'gpu'")
DRIVER_IN = device_class("listed.example.com", "device.driver in ['gpu.nvidia.com']")
INVENTORY = Inventory(
    "published",
    (
        a100_node(),
        *driver_classes(),
        ATTRIBUTE_ONLY,
        DRIVER_IN,
        claim("or-true", request(count=7, selectors=cel(f"{PROFILE} == '1g.10gb' || true"))),
        claim("attribute-only", request("g", "any-nvidia.example.com", count=4)),
        claim("listed-all", request("g", "listed.example.com", allocationMode="All")),
        claim("memory", request(count=2, capacity={"requests": {"memory": "10Gi"}})),
        claim("slice", request("m", "mig.nvidia.com", selectors=cel(f"{PROFILE} == '1g.10gb'"))),
    ),
)
# 2 GPUs and 100Gi: one A100-80GB is 80Gi.
QUOTA = {
    "apiVersion": "gpuwebhook.io/v1alpha1",
    "kind": "GPUQuota",
    "metadata": {"name": "team-a"},
    "spec": {"match": {"namespaces": [NS]}, "limits": {"gpus": 2, "gpuMemory": "100Gi"}},
}


@pytest.fixture(scope="module")
def dispatcher() -> Iterator[Dispatcher]:
    policies = bundled_policies()
    quota = parse_quota(QUOTA, "quota.yaml", lambda _: 1)
    policies = dataclasses.replace(policies, quotas=(*policies.quotas, quota))
    with installed(offline_deps(policies, INVENTORY)) as dispatcher:
        yield dispatcher


def create(obj: dict[str, Any]) -> Request:
    resource = {"Pod": "pods", "ResourceClaim": "resourceclaims"}[obj["kind"]]
    return Request("CREATE", obj, resource=resource)


CASES = [
    ("seven GPUs behind a profile literal ORed with true", pod(claim_name="or-true"), False, "exceeded"),
    ("a class that selects GPUs by attribute only", pod(claim_name="attribute-only"), False, "exceeded"),
    (
        "10Gi of a card that cannot be shared holds the whole card's 80Gi",
        pod(claim_name="memory"),
        False,
        "exceeded",
    ),
    ("one 1g.10gb slice fits", pod(claim_name="slice"), True, None),
    (
        "one implicit-name GPU fits",
        pod(limits={"deviceclass.resource.kubernetes.io/gpu.nvidia.com": "1"}),
        True,
        None,
    ),
    (
        "three implicit-name GPUs pass no quota of two GPUs",
        pod(limits={"deviceclass.resource.kubernetes.io/gpu.nvidia.com": "3"}),
        False,
        "exceeded",
    ),
    (
        "allocationMode All on a class listing the driver",
        pod(claim_name="listed-all"),
        False,
        "allocationMode All",
    ),
]


@pytest.mark.parametrize(("case", "shown", "allowed", "needle"), CASES, ids=[c[0] for c in CASES])
def test_published_devices_decide(
    dispatcher: Dispatcher, case: str, shown: dict[str, Any], allowed: bool, needle: str | None
) -> None:
    assert_valid(shown)
    outcome = dispatcher.admit(create(shown))
    assert outcome.allowed is allowed, (case, outcome.message)
    if needle:
        assert needle in outcome.message, outcome.message


def test_a_claim_taking_every_device_of_an_attribute_class_is_refused(dispatcher: Dispatcher) -> None:
    outcome = dispatcher.admit(
        create(claim("all", request("g", "any-nvidia.example.com", allocationMode="All")))
    )
    assert not outcome.allowed
    assert "allocationMode All" in outcome.message


def test_an_implicit_name_pod_gets_no_void(dispatcher: Dispatcher) -> None:
    """A pod that gets GPUs through DRA is a GPU pod: its device variable is not voided."""
    outcome = dispatcher.admit(create(pod(limits={"deviceclass.resource.kubernetes.io/gpu.nvidia.com": "1"})))
    assert outcome.allowed, outcome.message
    assert outcome.object is not None
    env = outcome.object["spec"]["containers"][0].get("env") or []
    assert not any(e.get("name") == "NVIDIA_VISIBLE_DEVICES" for e in env)


def test_without_published_devices_the_review_says_it_estimated() -> None:
    unpublished = Inventory("unpublished", (*driver_classes(), claim("two", request(count=2))))
    with installed(offline_deps(bundled_policies(), unpublished)) as bare:
        outcome = bare.admit(create(pod(claim_name="two")))
    assert outcome.allowed, outcome.message
    assert ESTIMATED in outcome.warnings
    with installed(offline_deps(bundled_policies(), INVENTORY)) as published:
        assert ESTIMATED not in published.admit(create(pod(claim_name="slice"))).warnings
