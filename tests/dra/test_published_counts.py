"""Claims counted by the devices the driver publishes: selectors are evaluated, never read as text.

The node publishes what NVIDIA's DRA driver publishes for one A100-80GB card split into MIG
devices (k8s-dra-driver-gpu cmd/gpu-kubelet-plugin/deviceinfo.go, through webhook/dra/catalog.py's
slice builder), and the device classes are the driver chart's
(deployments/helm/dra-driver-nvidia-gpu/templates/deviceclass-gpu.yaml, deviceclass-mig.yaml).
"""

from __future__ import annotations

import copy
import dataclasses
from fractions import Fraction
from typing import Any

import pytest

from tests.dra.objects import NS, claim, device_class, pod, request
from webhook import gpu
from webhook.accounting.count import count_gpus, count_object
from webhook.accounting.demand import DEFAULT_SETTINGS, device_class_resource, pod_shape, shape_demand
from webhook.dra import catalog, judge
from webhook.dra.devices import ClaimError
from webhook.dra.index import DraIndex, build_index
from webhook.dra.slices import slice_devices

GPU_DEVICES = device_class_resource("gpu.nvidia.com")
MIG_DEVICES = device_class_resource("mig.nvidia.com")
A100_MIB = 81920


def driver_classes() -> list[dict[str, Any]]:
    """The driver chart's DeviceClasses, rendered with its defaults."""
    return [device_class(name, " && ".join(expressions)) for name, expressions in DRIVER_CLASSES.items()]


DRIVER_CLASSES = {k: v for k, v in catalog.NVIDIA_DEVICE_CLASSES.items() if "nvidia.com" in k}


def a100_node(name: str = "node-1") -> dict[str, Any]:
    """One A100-80GB card as the driver publishes it on a node: the GPU and its MIG devices."""
    published = copy.deepcopy(catalog.model_slice("A100-80GB"))
    published["metadata"]["name"] = f"{name}-gpu.nvidia.com"
    spec = published["spec"]
    spec.pop("allNodes")
    spec["nodeName"] = name
    spec["pool"]["name"] = name
    return published


def index(
    *claims: dict[str, Any], slices: bool = True, classes: list[dict[str, Any]] | None = None
) -> DraIndex:
    return build_index(
        {
            "resourceclaims": list(claims),
            "deviceclasses": driver_classes() + (classes or []),
            "resourceslices": [a100_node()] if slices else [],
        },
        synced=True,
    )


def cel(expression: str) -> list[dict[str, Any]]:
    return [{"cel": {"expression": expression}}]


def usage_of(shown: dict[str, Any], dra: DraIndex) -> Any:
    shape = pod_shape(shown, dra, NS)
    assert shape is not None
    return shape_demand(shape, DEFAULT_SETTINGS)


PROFILE = "device.attributes['gpu.nvidia.com'].profile"

# (id, request, GPU-equivalents, memory MiB or None when unknown, devices)
CASES: list[tuple[str, dict[str, Any], Fraction, int | None, int]] = [
    (
        "a profile literal ORed on gpu.nvidia.com selects whole GPUs",
        request(count=7, selectors=cel(f"{PROFILE} == '1g.10gb' || true")),
        Fraction(7),
        7 * A100_MIB,
        7,
    ),
    (
        "either of two profiles: the larger, whatever comes first in the text",
        request("m", "mig.nvidia.com", selectors=cel(f"{PROFILE} == '1g.10gb' || {PROFILE} == '7g.80gb'")),
        Fraction(1),
        None,
        1,
    ),
    (
        "profile in a list: the largest listed",
        request("m", "mig.nvidia.com", selectors=cel(f"{PROFILE} in ['1g.10gb', '2g.20gb']")),
        Fraction(2, 7),
        None,
        1,
    ),
    (
        "a +me profile",
        request("m", "mig.nvidia.com", selectors=cel(f"{PROFILE} == '1g.10gb+me'")),
        Fraction(1, 7),
        None,
        1,
    ),
    (
        "a capacity-based MIG selector: the largest slice with 20Gi or more",
        request(
            "m",
            "mig.nvidia.com",
            selectors=cel("device.capacity['gpu.nvidia.com'].memory.compareTo(quantity('20Gi')) >= 0"),
        ),
        Fraction(1),
        None,
        1,
    ),
    (
        "capacity.requests.memory on a device that cannot be shared holds the whole card",
        request(capacity={"requests": {"memory": "10Gi"}}),
        Fraction(1),
        A100_MIB,
        1,
    ),
    (
        "the qualified capacity key reads the same",
        request(capacity={"requests": {"gpu.nvidia.com/memory": "10Gi"}}),
        Fraction(1),
        A100_MIB,
        1,
    ),
]


@pytest.mark.parametrize(("case", "asked", "gpus", "memory", "devices"), CASES, ids=[c[0] for c in CASES])
def test_claims_count_what_the_published_devices_give(
    case: str, asked: dict[str, Any], gpus: Fraction, memory: int | None, devices: int
) -> None:
    dra = index(claim("c", asked))
    usage = usage_of(pod(claim_name="c"), dra)
    assert usage.gpus == gpus, case
    assert usage.devices == devices
    if memory is not None:
        assert usage.gpu_memory_mib == memory
    else:
        profile = dra.asks(claim("c", asked)["spec"]["devices"])[0].profile
        assert profile is not None
        assert usage.gpu_memory_mib == real_mib(profile.name)


def real_mib(profile: str) -> int:
    """The slice's real memory on the A100-80GB (webhook/migtable.py, from go-nvml's tables)."""
    return next(p.memory_mib for p in gpu.MIG_PROFILES["A100-80GB"] if p.name == profile)


@pytest.mark.parametrize(
    "expression",
    [
        "device.driver in ['gpu.nvidia.com']",
        "device.attributes['gpu.nvidia.com'].type == 'gpu'",
        "device.attributes['gpu.nvidia.com'].productName.lowerAscii().contains('a100')",
    ],
)
def test_classes_that_select_nvidia_gpus_without_the_literal_driver_test_count(expression: str) -> None:
    custom = device_class("custom.example.com", expression)
    dra = index(claim("c", request("c", "custom.example.com", count=2)), classes=[custom])
    assert count_gpus(pod(claim_name="c"), dra).devices == 2
    every = index(claim("all", request("c", "custom.example.com", allocationMode="All")), classes=[custom])
    assert count_gpus(pod(claim_name="all"), every).error is not None


def test_a_class_of_another_driver_is_no_gpu() -> None:
    nic = device_class("nic.example.com", "device.driver == 'nic.example.com'")
    dra = index(claim("c", request("nic", "nic.example.com")), classes=[nic])
    assert count_gpus(pod(claim_name="c"), dra).devices == 0


@pytest.mark.parametrize(
    ("name", "devices", "gpus"),
    [
        ("deviceclass.resource.kubernetes.io/gpu.nvidia.com", 2, Fraction(2)),
        ("deviceclass.resource.kubernetes.io/mig.nvidia.com", 2, Fraction(2)),
    ],
)
def test_the_implicit_extended_resource_name_counts_as_its_class(
    name: str, devices: int, gpus: Fraction
) -> None:
    """k8s.io/api resource/v1 types.go ResourceDeviceClassPrefix: every class serves this name."""
    dra = index()
    shown = pod(limits={name: "2"})
    assert count_gpus(shown, dra).devices == devices
    usage = usage_of(shown, dra)
    cls = name.removeprefix("deviceclass.resource.kubernetes.io/")
    assert usage.resources[device_class_resource(cls)] == 2
    # mig.nvidia.com's largest slice is the whole card's 7g.80gb.
    assert usage.gpus == gpus


def test_first_available_charges_each_alternative_class_its_largest_count() -> None:
    """kubernetes pkg/quota/v1/evaluator/core/resource_claims.go (claimEvaluator.Usage): for
    firstAvailable, each subrequest class is charged its largest count."""
    either = {
        "name": "gpu",
        "firstAvailable": [
            {
                "name": "slice",
                "deviceClassName": "mig.nvidia.com",
                "count": 2,
                "selectors": cel(f"{PROFILE} == '1g.10gb'"),
            },
            {"name": "whole", "deviceClassName": "gpu.nvidia.com", "count": 1},
        ],
    }
    usage = usage_of(pod(claim_name="c"), index(claim("c", either)))
    assert usage.resources[MIG_DEVICES] == 2
    assert usage.resources[GPU_DEVICES] == 1
    assert usage.gpus == 1  # the whole GPU is the most the allocator can give


def test_admin_access_claims_are_not_gpus_but_charge_their_class() -> None:
    """kubernetes pkg/quota/v1/evaluator/core/resource_claims.go charges every exactly request's
    class, adminAccess or not; the devices stay with the pods that hold them."""
    usage = usage_of(pod(claim_name="c"), index(claim("c", request(adminAccess=True, count=2))))
    assert usage.gpus == 0
    assert usage.devices == 0
    assert usage.gpu_memory_mib == 0
    assert usage.resources[GPU_DEVICES] == 2


def test_an_admin_claim_on_every_device_is_no_gpu_and_charges_the_class_its_worst_case() -> None:
    """The same evaluator charges `allocationMode: All` the most devices one claim may hold
    (k8s.io/api resource/v1 types.go AllocationResultsMaxSize, 32)."""
    usage = usage_of(pod(claim_name="c"), index(claim("c", request(adminAccess=True, allocationMode="All"))))
    assert (usage.gpus, usage.devices) == (0, 0)
    assert usage.resources[GPU_DEVICES] == 32


def test_a_claim_over_the_apis_32_devices_is_refused_with_its_reason() -> None:
    """dynamic-resource-allocation structured/internal/stable/allocator_stable.go, and
    k8s.io/api resource/v1 types.go AllocationResultsMaxSize."""
    dra = index()
    with pytest.raises(ClaimError, match="number of requested devices 33 exceeds the claim limit of 32"):
        dra.asks({"requests": [request(count=32), request("more")]})


def test_without_published_devices_counting_is_estimated_and_never_zero() -> None:
    dra = index(claim("c", request(count=2)), claim("m", request("m", "mig.nvidia.com")), slices=False)
    assert dra.estimated
    assert count_gpus(pod(claim_name="c"), dra).devices == 2
    # Any MIG device: the largest one a MIG class could select, a whole card's slices.
    assert usage_of(pod(claim_name="m"), dra).gpus == 1
    asks = dra.asks({"requests": [request(count=2)]})
    assert asks[0].estimated


def test_v1beta1_claims_count_as_their_v1_twins() -> None:
    """k8s-dra-driver-gpu demo/specs/quickstart/v1beta1/gpu-test1.yaml: the request fields are flat."""
    beta = {
        "apiVersion": "resource.k8s.io/v1beta1",
        "kind": "ResourceClaim",
        "metadata": {"name": "c", "namespace": NS},
        "spec": {"devices": {"requests": [{"name": "gpu", "deviceClassName": "gpu.nvidia.com", "count": 3}]}},
    }
    assert count_object(beta, index()).devices == 3


def test_consumable_capacity_is_a_share_only_where_the_device_allows_several_claims() -> None:
    """k8s.io/api resource/v1 types.go Device.AllowMultipleAllocations: only then may one device
    serve several claims, each taking the capacity it requests (NVIDIA's driver sets it on none)."""
    shareable = a100_node()
    for device in shareable["spec"]["devices"]:
        device["allowMultipleAllocations"] = True
    dra = build_index(
        {
            "resourceclaims": [claim("c", request(capacity={"requests": {"memory": "10Gi"}}))],
            "deviceclasses": driver_classes(),
            "resourceslices": [shareable],
        },
        synced=True,
    )
    usage = usage_of(pod(claim_name="c"), dra)
    assert usage.gpus == Fraction(10 * 1024, A100_MIB)
    assert usage.gpu_memory_mib == 10 * 1024
    # The unshareable card of the same node holds the whole card whatever is requested.
    assert (
        usage_of(
            pod(claim_name="c"), index(claim("c", request(capacity={"requests": {"memory": "10Gi"}})))
        ).gpus
        == 1
    )


def test_a_judgement_beyond_its_evaluation_budget_counts_the_larger_device() -> None:
    """Thousands of published GPUs that a MIG request's class refuses one by one: the judge stops
    after its budget and counts the group it stopped in, never less than the answer."""
    whole = next(d for d in slice_devices(a100_node()) if d.attribute("type") == "gpu")
    mig = next(d for d in slice_devices(a100_node()) if d.attribute("profile") == "1g.10gb")
    many = [dataclasses.replace(whole, name=f"gpu-{i}") for i in range(judge.EVALUATIONS + 10)]
    classes = dict(DRIVER_CLASSES)
    few = judge.DeviceJudge(classes, [*many[:10], mig]).judge("mig.nvidia.com")
    assert few is not None and few.profile is not None and few.profile.name == "1g.10gb"
    beyond = judge.DeviceJudge(classes, [*many, mig]).judge("mig.nvidia.com")
    assert beyond is not None and beyond.profile is None  # a whole GPU: the larger answer


@pytest.mark.parametrize(
    ("expression", "gpu"),
    [
        ("device.attributes['gpu.nvidia.com'].productName == 'NVIDIA H100 80GB HBM3'", True),
        ("device.attributes['gpu.nvidia.com'].driverVersion.isGreaterThan(semver('550.0.0'))", True),
        ("device.driver == 'compute-domain.nvidia.com'", False),
    ],
    ids=["an exact product name", "a driver version", "IMEX channels"],
)
def test_without_published_devices_a_class_on_machine_facts_is_a_gpu_and_other_drivers_are_not(
    expression: str, gpu: bool
) -> None:
    """What only a machine knows (webhook/dra/catalog.py PLACEHOLDER_ATTRIBUTES) cannot refuse a
    catalog device: such a class counts as the largest GPU, never as nothing."""
    custom = device_class("custom.example.com", expression)
    dra = index(claim("c", request("c", "custom.example.com")), slices=False, classes=[custom])
    assert count_gpus(pod(claim_name="c"), dra).devices == (1 if gpu else 0)
