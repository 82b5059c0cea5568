"""Claims resolved to GPU devices: the one count that quota, max-per-pod and matching share."""

from __future__ import annotations

from fractions import Fraction
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.dra.objects import NS, claim, device_class, mig_request, pod, request, template
from tests.support.schema import assert_valid
from webhook import gpu
from webhook.accounting.count import count_gpus, count_object
from webhook.accounting.demand import DEFAULT_SETTINGS, device_class_resource, pod_shape
from webhook.cache import ClusterCache
from webhook.dra.index import build_index
from webhook.inventory import Inventory, cache_from
from webhook.quota.ledger import Entry, LedgerView

GPU_DEVICES = device_class_resource("gpu.nvidia.com")
MIG_DEVICES = device_class_resource("mig.nvidia.com")
# NVIDIA/k8s-dra-driver-gpu demo/specs/extended-resources/mig-1g-12gb.yaml
MIG_1G12 = device_class(
    "mig-1g-12gb.gpu.nvidia.com",
    "device.driver == 'gpu.nvidia.com' && device.attributes['gpu.nvidia.com'].type == 'mig' && "
    "device.attributes['gpu.nvidia.com'].profile == '1g.12gb'",
    "nvidia.com/mig-1g.12gb",
)
WHOLE_BACKED = device_class("big.example.com", "device.driver == 'gpu.nvidia.com'", "example.com/big-gpu")
NIC = device_class("nic.example.com", "device.driver == 'nic.example.com'")
OBJECTS: list[dict[str, Any]] = [
    # demo/specs/quickstart/v1/gpu-test1.yaml: one whole GPU from a template
    template("single-gpu"),
    # demo/specs/quickstart/v1/gpu-test3.yaml: one claim shared by two pods
    claim("shared-gpu"),
    # demo/specs/quickstart/v1/gpu-test4.yaml: four MIG slices in one template
    template(
        "mig-devices",
        mig_request("mig-1g-5gb-0", "1g.5gb"),
        mig_request("mig-1g-5gb-1", "1g.5gb"),
        mig_request("mig-2g-10gb", "2g.10gb"),
        mig_request("mig-3g-20gb", "3g.20gb"),
    ),
    # demo/specs/quickstart/v1/gpu-test5.yaml: a time-sliced and an MPS GPU
    template("multiple-gpus", request("ts-gpu"), request("mps-gpu")),
    claim("eight", request(count=8)),
    claim("nic", request("nic", "nic.example.com")),
    claim(
        "either",
        {
            "name": "gpu",
            "firstAvailable": [
                {"name": "big", "deviceClassName": "gpu.nvidia.com", "count": 4},
                {"name": "small", "deviceClassName": "gpu.nvidia.com", "count": 1},
            ],
        },
    ),
    claim("memory", request(capacity={"requests": {"memory": "10Gi"}})),
    MIG_1G12,
    WHOLE_BACKED,
    NIC,
]
INVENTORY = Inventory("test", tuple(OBJECTS))


def dra_index() -> Any:
    return cache_from(INVENTORY).dra()


@pytest.mark.parametrize("obj", OBJECTS, ids=lambda o: f"{o['kind']}/{o['metadata']['name']}")
def test_every_object_here_is_valid_kubernetes(obj: dict[str, Any]) -> None:
    assert_valid(obj)


@pytest.mark.parametrize(
    ("case", "shown", "devices", "resources"),
    [
        ("template, one GPU", pod(template_name="single-gpu"), 1, {GPU_DEVICES: 1}),
        ("named claim", pod(claim_name="shared-gpu"), 1, {GPU_DEVICES: 1}),
        ("four MIG slices", pod(template_name="mig-devices"), 4, {MIG_DEVICES: 4}),
        ("two shared GPUs", pod(template_name="multiple-gpus"), 2, {GPU_DEVICES: 2}),
        ("count 8", pod(claim_name="eight"), 8, {GPU_DEVICES: 8}),
        ("firstAvailable: the largest", pod(claim_name="either"), 4, {GPU_DEVICES: 4}),
        ("not a GPU class", pod(claim_name="nic"), 0, {}),
        ("extended resource of a MIG class", pod(limits={"nvidia.com/mig-1g.12gb": "2"}), 2, None),
        ("extended resource of a GPU class", pod(limits={"example.com/big-gpu": "3"}), 3, None),
        ("claim and a device-plugin GPU", pod(claim_name="eight", limits={"nvidia.com/gpu": "1"}), 9, None),
    ],
)
def test_claims_count_as_gpu_devices(
    case: str, shown: dict[str, Any], devices: int, resources: dict[str, int] | None
) -> None:
    assert_valid(shown)
    count = count_gpus(shown, dra_index())
    assert count.error is None
    assert count.devices == devices, case
    if resources is not None:
        assert dict(count.resources) == resources


def test_mig_claims_add_up_to_their_slices_and_memory() -> None:
    cache = cache_from(Inventory("mig", (*OBJECTS, pod("a", template_name="mig-devices"))))
    usage = cache.usage(NS, DEFAULT_SETTINGS)
    assert usage.gpus == Fraction(1 + 1 + 2 + 3, 7)
    # Without published devices, the profiles' real sizes on the card that has them (A100-40GB).
    real = {p.name: p.memory_mib for p in gpu.MIG_PROFILES["A100-40GB"]}
    assert usage.gpu_memory_mib == 2 * real["1g.5gb"] + real["2g.10gb"] + real["3g.20gb"]


def test_capacity_memory_counts() -> None:
    cache = cache_from(Inventory("mem", (*OBJECTS, pod("a", claim_name="memory"))))
    assert cache.usage(NS, DEFAULT_SETTINGS).gpu_memory_mib == 10 * 1024


def test_a_shared_claim_counts_once_in_the_namespace() -> None:
    pods = [pod(f"p{i}", claim_name="shared-gpu") for i in range(3)]
    cache = cache_from(Inventory("shared", (*OBJECTS, *pods, pod("t", template_name="single-gpu"))))
    usage = cache.usage(NS, DEFAULT_SETTINGS)
    assert usage.gpus == 2  # the shared claim once, the template's own claim once
    assert cache.claims_in_use(NS) == {f"{NS}/shared-gpu"}


@pytest.mark.parametrize(
    ("case", "shown", "needle"),
    [
        ("missing claim", pod(claim_name="gone"), "ResourceClaim team-a/gone"),
        ("missing template", pod(template_name="gone"), "ResourceClaimTemplate team-a/gone"),
    ],
)
def test_an_unresolvable_claim_is_an_error_naming_it(case: str, shown: dict[str, Any], needle: str) -> None:
    count = count_gpus(shown, dra_index())
    assert count.error is not None and needle in count.error, case


def test_before_the_claims_are_listed_a_missing_claim_is_no_error() -> None:
    cache = ClusterCache()  # nothing listed yet
    assert count_gpus(pod(claim_name="gone"), cache.dra()).error is None


def test_allocation_mode_all_cannot_be_counted() -> None:
    index = build_index({"resourceclaims": [claim("all", request(allocationMode="All"))]}, synced=True)
    count = count_gpus(pod(claim_name="all"), index)
    assert count.error is not None and "allocationMode All" in count.error


def test_a_claim_object_counts_as_a_pod_holding_it() -> None:
    assert count_object(claim("eight", request(count=8)), dra_index()).devices == 8
    assert count_object(template("t", request(count=3)), dra_index()).devices == 3


def test_pods_without_claims_are_unchanged() -> None:
    plain = pod(limits={"nvidia.com/gpu": "2"})
    assert count_gpus(plain, dra_index()) == count_gpus(plain)


COUNTS = st.integers(min_value=1, max_value=5)  # six requests stay within a claim's 32 devices
CLASSES = st.sampled_from(["gpu.nvidia.com", "mig.nvidia.com", "nic.example.com", "gpus.example.com"])
GPU_CLASS_NAMES = {"gpu.nvidia.com", "mig.nvidia.com", "gpus.example.com"}


@st.composite
def requests(draw: st.DrawFn) -> tuple[dict[str, Any], int]:
    """A request and the devices it should count: GPU classes only, the largest alternative."""
    index = draw(st.integers(0, 10**6))
    if draw(st.booleans()):
        cls, count = draw(CLASSES), draw(COUNTS)
        return {"name": f"r{index}", "exactly": {"deviceClassName": cls, "count": count}}, (
            count if cls in GPU_CLASS_NAMES else 0
        )
    alternatives = draw(st.lists(st.tuples(CLASSES, COUNTS), min_size=1, max_size=4))
    body = [{"name": f"a{i}", "deviceClassName": c, "count": n} for i, (c, n) in enumerate(alternatives)]
    expected = max((n for c, n in alternatives if c in GPU_CLASS_NAMES), default=0)
    return {"name": f"r{index}", "firstAvailable": body}, expected


@given(st.lists(requests(), max_size=6))
def test_resolution_counts_gpu_requests_and_the_largest_alternative(
    drawn: list[tuple[dict[str, Any], int]],
) -> None:
    index = build_index({}, ("gpus.example.com",), synced=True)
    asks = index.asks({"requests": [r for r, _ in drawn]})
    assert sum(a.count for a in asks) == sum(n for _, n in drawn)


def test_the_strict_ledger_counts_a_shared_claim_once() -> None:
    cache = cache_from(INVENTORY)
    shape = pod_shape(pod("a", claim_name="shared-gpu"), cache.dra())
    assert shape is not None
    entries = [Entry(f"{NS}/{name}", name, shape, 1e12, "replica-1") for name in ("a", "b")]
    view = LedgerView(cache, entries)
    assert view.usage(NS, DEFAULT_SETTINGS).gpus == 1
    assert view.claims_in_use(NS) == {f"{NS}/shared-gpu"}
