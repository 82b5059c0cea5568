"""A pod's demand on a GPU quota: table-driven cases, then properties. No API, no I/O."""

from __future__ import annotations

import random
from fractions import Fraction
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.support.pods import make_pod, res, sidecar
from webhook.accounting.demand import QuotaInputError, QuotaSettings, pod_demand, pod_shape
from webhook.accounting.usage import NOTHING, Usage, total

GPU = "nvidia.com/gpu"
MIG_1G = "nvidia.com/mig-1g.10gb"
MIG_3G = "nvidia.com/mig-3g.40gb"
SHARED = "nvidia.com/gpu.shared"
GPUMEM = "nvidia.com/gpumem"
CORES = "nvidia.com/gpucores"
CARD = 81920  # MiB of an 80 GB card
A100 = QuotaSettings(card_memory_mib=CARD)
DEFAULT = QuotaSettings()
F = Fraction

# (case, pod, settings, gpus, gpu memory MiB, resource counts)
CASES: list[tuple[str, dict[str, Any], QuotaSettings, Fraction, Fraction, dict[str, int]]] = [
    ("whole GPUs", make_pod(containers=[res("a", {GPU: 2})]), DEFAULT, F(2), F(0), {GPU: 2}),
    (
        "whole GPUs count the card's memory when it is known",
        make_pod(containers=[res("a", {GPU: 2})]),
        A100,
        F(2),
        F(2 * CARD),
        {GPU: 2},
    ),
    (
        "app containers add up",
        make_pod(containers=[res("a", {GPU: 1}), res("b", {GPU: 2})]),
        DEFAULT,
        F(3),
        F(0),
        {GPU: 3},
    ),
    (
        "a larger init container sets the demand",
        make_pod(containers=[res("a", {GPU: 1})], init=[res("warmup", {GPU: 3})]),
        DEFAULT,
        F(3),
        F(0),
        {GPU: 3},
    ),
    (
        "a smaller init container changes nothing",
        make_pod(containers=[res("a", {GPU: 2}), res("b", {GPU: 2})], init=[res("i", {GPU: 3})]),
        DEFAULT,
        F(4),
        F(0),
        {GPU: 4},
    ),
    (
        "init containers take the maximum, not the sum",
        make_pod(containers=[res("a")], init=[res("i1", {GPU: 2}), res("i2", {GPU: 3})]),
        DEFAULT,
        F(3),
        F(0),
        {GPU: 3},
    ),
    (
        "a native sidecar adds to the app containers",
        make_pod(containers=[res("a", {GPU: 1})], init=[sidecar("s", {GPU: 1})]),
        DEFAULT,
        F(2),
        F(0),
        {GPU: 2},
    ),
    (
        "a native sidecar adds to init containers that start after it",
        make_pod(containers=[res("a", {GPU: 1})], init=[sidecar("s", {GPU: 1}), res("i", {GPU: 2})]),
        DEFAULT,
        F(3),
        F(0),
        {GPU: 3},
    ),
    (
        "but not to init containers that ran before it",
        make_pod(containers=[res("a", {GPU: 1})], init=[res("i", {GPU: 2}), sidecar("s", {GPU: 1})]),
        DEFAULT,
        F(2),
        F(0),
        {GPU: 2},
    ),
    (
        "MIG profiles count g/7 and their memory, per profile",
        make_pod(containers=[res("a", {MIG_1G: 2}), res("b", {MIG_3G: 1})]),
        DEFAULT,
        F(5, 7),
        F(2 * 10240 + 40960),
        {MIG_1G: 2, MIG_3G: 1},
    ),
    (
        "the init/app rule holds per resource, as the scheduler reserves them",
        make_pod(containers=[res("a", {MIG_1G: 2})], init=[res("i", {GPU: 1})]),
        DEFAULT,
        F(1) + F(2, 7),
        F(20480),
        {GPU: 1, MIG_1G: 2},
    ),
    (
        "HAMi memory is per GPU, times the GPU count",
        make_pod(containers=[res("a", {GPU: 2, GPUMEM: 20480})]),
        A100,
        F(2 * 20480, CARD),
        F(40960),
        {GPU: 2, GPUMEM: 20480},
    ),
    (
        "HAMi multiplies within each container, never across containers",
        make_pod(containers=[res("a", {GPU: 2, GPUMEM: 10000}), res("b", {GPU: 1, GPUMEM: 30000})]),
        A100,
        F(50000, CARD),
        F(50000),
        {GPU: 3, GPUMEM: 40000},
    ),
    (
        "HAMi without a known card memory falls back to gpucores",
        make_pod(containers=[res("a", {GPU: 2, GPUMEM: 20480, CORES: 25})]),
        DEFAULT,
        F(1, 2),
        F(40960),
        {GPU: 2, GPUMEM: 20480, CORES: 25},
    ),
    (
        "HAMi cores alone, one GPU assumed",
        make_pod(containers=[res("a", {CORES: 30})]),
        DEFAULT,
        F(3, 10),
        F(0),
        {CORES: 30},
    ),
    (
        "HAMi memory percentage of a known card",
        make_pod(containers=[res("a", {GPU: 1, "nvidia.com/gpumem-percentage": 50})]),
        A100,
        F(1, 2),
        F(CARD, 2),
        {GPU: 1, "nvidia.com/gpumem-percentage": 50},
    ),
    (
        "a time-slice share is 1/replicas",
        make_pod(containers=[res("a", {SHARED: 2})]),
        DEFAULT,
        F(2, 4),
        F(0),
        {SHARED: 2},
    ),
    (
        "replicas per resource name, shares carry their part of the card",
        make_pod(containers=[res("a", {GPU: 1})]),
        QuotaSettings(shared_replicas=((GPU, 10),), card_memory_mib=CARD),
        F(1, 10),
        F(CARD, 10),
        {GPU: 1},
    ),
    (
        "KAI fraction",
        make_pod(annotations={"gpu-fraction": "0.5"}),
        DEFAULT,
        F(1, 2),
        F(0),
        {},
    ),
    (
        "KAI fraction on several devices",
        make_pod(annotations={"gpu-fraction": "0.25", "gpu-fraction-num-devices": "2"}),
        A100,
        F(1, 2),
        F(CARD, 2),
        {},
    ),
    (
        "KAI memory over the card's memory",
        make_pod(annotations={"gpu-memory": "20480"}),
        A100,
        F(1, 4),
        F(20480),
        {},
    ),
    (
        "a request defaults to its limit",
        make_pod(containers=[{"name": "a", "resources": {"limits": {GPU: "2"}}}]),
        DEFAULT,
        F(2),
        F(0),
        {GPU: 2},
    ),
    (
        "quantities are parsed, not read as text",
        make_pod(containers=[res("a", {GPU: "2e0"})]),
        DEFAULT,
        F(2),
        F(0),
        {GPU: 2},
    ),
]


@pytest.mark.parametrize(
    ("pod", "settings", "gpus", "memory", "counts"), [c[1:] for c in CASES], ids=[c[0] for c in CASES]
)
def test_demand(
    pod: dict[str, Any], settings: QuotaSettings, gpus: Fraction, memory: Fraction, counts: dict[str, int]
) -> None:
    expected = {name: Fraction(count) for name, count in counts.items()}
    demand = pod_demand(pod, settings)
    assert (demand.gpus, demand.gpu_memory_mib, dict(demand.resources)) == (gpus, memory, expected)


@pytest.mark.parametrize("phase", ["Succeeded", "Failed"])
def test_finished_pods_use_nothing(phase: str) -> None:
    assert pod_demand(make_pod(containers=[res("a", {GPU: 4})], phase=phase)) == NOTHING


@pytest.mark.parametrize("phase", ["Pending", "Running", "Unknown"])
def test_unfinished_pods_count(phase: str) -> None:
    assert pod_demand(make_pod(containers=[res("a", {GPU: 4})], phase=phase)).gpus == 4


def test_pods_without_extended_resources_have_no_shape() -> None:
    pod = make_pod(containers=[res("a", {"cpu": 2, "memory": "1Gi"})])
    assert pod_shape(pod) is None
    assert pod_demand(pod).is_zero


BAD = [
    (make_pod(containers=[res("web", {GPU: "lots"})]), "container 'web'"),
    (make_pod(containers=[res("web", {GPU: "1.5"})]), "whole number"),
    (make_pod(containers=[res("web", {GPU: "-1"})]), "negative"),
    (make_pod(annotations={"gpu-fraction": "1.5"}), "gpu-fraction"),
    (make_pod(annotations={"gpu-fraction": "half"}), "gpu-fraction"),
    (make_pod(annotations={"gpu-fraction": "0"}), "gpu-fraction"),
    (make_pod(annotations={"gpu-memory": "20Gi"}), "gpu-memory"),
    (make_pod(annotations={"gpu-fraction": "0.5", "gpu-fraction-num-devices": "0"}), "num-devices"),
    ({"spec": {"containers": "nope"}}, "spec.containers"),
    ({"spec": {"containers": [{"name": "a", "resources": []}]}}, "resources"),
]


@pytest.mark.parametrize(("pod", "words"), BAD)
def test_invalid_values_are_clear_errors(pod: dict[str, Any], words: str) -> None:
    with pytest.raises(QuotaInputError, match=words):
        pod_demand(pod)


def test_seven_single_slices_make_exactly_one_gpu() -> None:
    pods = [make_pod(containers=[res("a", {MIG_1G: 1})]) for _ in range(7)]
    assert total(pod_demand(p) for p in pods).gpus == 1


# Properties -------------------------------------------------------------------------------

RESOURCE_NAMES = [GPU, MIG_1G, MIG_3G, SHARED, GPUMEM, CORES]
amounts = st.dictionaries(st.sampled_from(RESOURCE_NAMES), st.integers(0, 64), max_size=3)
containers = st.lists(amounts, min_size=1, max_size=4)
settings = st.sampled_from([DEFAULT, A100, QuotaSettings(shared_replicas=((GPU, 3), (SHARED, 7)))])


def _pod(app: list[dict[str, int]], init: list[tuple[dict[str, int], bool]]) -> dict[str, Any]:
    return make_pod(
        containers=[res(f"c{i}", a) for i, a in enumerate(app)],
        init=[
            sidecar(f"s{i}", a) if is_sidecar else res(f"i{i}", a) for i, (a, is_sidecar) in enumerate(init)
        ],
    )


def _at_least(a: Usage, b: Usage) -> bool:
    dims = set(a.resources) | set(b.resources)
    return (
        a.gpus >= b.gpus
        and a.gpu_memory_mib >= b.gpu_memory_mib
        and all(a.amount(d) >= b.amount(d) for d in dims)
    )


inits = st.lists(st.tuples(amounts, st.booleans()), max_size=3)


@given(app=containers, init=inits, settings=settings, seed=st.integers())
def test_order_of_app_containers_does_not_matter(
    app: list[dict[str, int]], init: list[tuple[dict[str, int], bool]], settings: QuotaSettings, seed: int
) -> None:
    shuffled = list(app)
    random.Random(seed).shuffle(shuffled)
    assert pod_demand(_pod(app, init), settings) == pod_demand(_pod(shuffled, init), settings)


@given(app=containers, init=inits, extra=amounts, settings=settings)
def test_another_container_never_lowers_demand(
    app: list[dict[str, int]],
    init: list[tuple[dict[str, int], bool]],
    extra: dict[str, int],
    settings: QuotaSettings,
) -> None:
    before = pod_demand(_pod(app, init), settings)
    assert _at_least(pod_demand(_pod([*app, extra], init), settings), before)
    assert _at_least(pod_demand(_pod(app, [*init, (extra, False)]), settings), before)
    assert _at_least(pod_demand(_pod(app, [*init, (extra, True)]), settings), before)


@given(app=containers, init=inits, settings=settings)
def test_demand_covers_every_container_and_the_app_sum(
    app: list[dict[str, int]], init: list[tuple[dict[str, int], bool]], settings: QuotaSettings
) -> None:
    demand = pod_demand(_pod(app, init), settings)
    assert _at_least(demand, pod_demand(_pod(app, []), settings))
    for amounts_, _ in init:
        assert _at_least(demand, pod_demand(_pod([amounts_], []), settings))


@given(app=containers, init=inits, settings=settings)
def test_more_of_a_resource_never_lowers_demand(
    app: list[dict[str, int]], init: list[tuple[dict[str, int], bool]], settings: QuotaSettings
) -> None:
    grown = [{name: count + 1 if count else 0 for name, count in a.items()} for a in app]
    assert _at_least(pod_demand(_pod(grown, init), settings), pod_demand(_pod(app, init), settings))
