"""The quota's fast path (integer tallies, a running usage counter in the cache) against the
straightforward Fraction computation in tests/quota/reference.py, on generated histories of
watch events, relists, admissions, releases and expiries."""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from tests.quota.reference import reference_check, usage_from_scratch
from tests.support.pods import make_pod, quota, res
from tests.support.reviews import make_review
from webhook.accounting.count import count_gpus
from webhook.accounting.demand import DEFAULT_SETTINGS, QuotaSettings, shape_demand
from webhook.accounting.tally import GPU_UNIT, MEMORY_UNIT, Tally, exact_text, scaled
from webhook.cache import DELETED, PODS, ClusterCache
from webhook.quota.gate import LocalGate

NAMESPACES = ("ml-team", "research")
NAMES = ("a", "b", "c", "d")
TTL = 30.0
# Amounts that the units make whole, and some that they cannot (KAI's 1/3, a HAMi percentage of a
# card whose bytes it does not divide), so the exact Fraction fallback is exercised too.
KAI_FRACTIONS = ("0.5", "0.35", "0.3333333", "5e-1")
CARD = {"cardMemory": "81920Mi", "sharedReplicas": {"nvidia.com/gpu.shared": 3}}

container_resources = st.fixed_dictionaries(
    {},
    optional={
        "nvidia.com/gpu": st.integers(1, 3),
        "nvidia.com/mig-1g.10gb": st.integers(1, 3),
        "nvidia.com/mig-3g.40gb": st.integers(1, 2),
        "nvidia.com/gpu.shared": st.integers(1, 5),
        "nvidia.com/gpumem-percentage": st.integers(1, 100),
        "example.com/fpga": st.integers(1, 2),
    },
)


@dataclass(frozen=True)
class PodSpec:
    containers: tuple[dict[str, int], ...]
    kai: str | None
    finished: bool
    uid: str

    def pod(self, name: str, namespace: str) -> dict[str, Any]:
        containers = [res(f"c{i}", amounts) for i, amounts in enumerate(self.containers)]
        annotations = {"gpu-fraction": self.kai} if self.kai else None
        phase = "Succeeded" if self.finished else None
        return make_pod(name, namespace, containers, annotations=annotations, phase=phase, uid=self.uid)


pod_specs = st.builds(
    PodSpec,
    st.lists(container_resources, min_size=1, max_size=2).map(tuple),
    st.none() | st.sampled_from(KAI_FRACTIONS),
    st.booleans(),
    st.sampled_from(("u1", "u2", "u3")),
)
where = st.tuples(st.sampled_from(NAMESPACES), st.sampled_from(NAMES))
operations = st.one_of(
    st.tuples(st.just("event"), where, st.sampled_from(("ADDED", "MODIFIED", DELETED)), pod_specs),
    st.tuples(st.just("admit"), where, st.booleans(), pod_specs),
    st.tuples(st.just("release"), where),
    st.tuples(st.just("relist"), st.lists(st.tuples(where, pod_specs), max_size=6)),
    st.tuples(st.just("tick"), st.sampled_from((1.0, 10.0, TTL))),
)


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def quotas_under_test() -> list[Any]:
    return [
        quota("small", {"gpus": 2, "gpuMemory": "60Gi"}, match={"namespaces": ["ml-*"]}),
        quota(
            "shared",
            {"gpus": "3500m", "resources": {"nvidia.com/mig-1g.10gb": 4, "example.com/fpga": 2}},
            accounting=CARD,
            enforcementAction="warn",
        ),
        quota(
            "memory", {"gpuMemory": "100Gi"}, accounting={"cardMemory": "40Gi"}, enforcementAction="dryrun"
        ),
    ]


def assert_counter_matches_scratch(cache: ClusterCache, quotas: list[Any]) -> None:
    for namespace in NAMESPACES:
        for accounting in {q.settings_or(DEFAULT_SETTINGS) for q in quotas} | {DEFAULT_SETTINGS}:
            expected = usage_from_scratch(cache.counted(namespace), accounting)
            assert cache.tally(namespace, accounting) == Tally.of(expected)
            assert cache.tally(namespace, accounting).usage() == _without_devices(expected)


@settings(max_examples=150, deadline=None)
@given(st.lists(operations, max_size=25))
def test_running_counter_and_integer_checks_equal_the_fraction_reference(history: list[Any]) -> None:
    clock = Clock()
    cache = ClusterCache(reservation_ttl=TTL, clock=clock)
    cache.replace(PODS, [])
    cache.mark_static()
    quotas = quotas_under_test()
    gate = LocalGate(cache)
    admitted: dict[tuple[str, str], Any] = {}
    for step in history:
        if step[0] == "event":
            _, (namespace, name), kind, spec = step
            cache.apply(PODS, kind, spec.pod(name, namespace))
        elif step[0] == "relist":
            cache.replace(PODS, [spec.pod(name, namespace) for (namespace, name), spec in step[1]])
        elif step[0] == "tick":
            clock.now += step[1]
        elif step[0] == "release":
            outcome = admitted.pop(step[1], None)
            if outcome is not None:
                gate.release(outcome)
        else:
            _, (namespace, name), dry_run, spec = step
            admitted[(namespace, name)] = admit_and_compare(
                cache, gate, quotas, spec.pod(name, namespace), dry_run
            )
        assert_counter_matches_scratch(cache, quotas)


def admit_and_compare(
    cache: ClusterCache, gate: LocalGate, quotas: list[Any], pod: dict[str, Any], dry_run: bool
) -> Any:
    request = make_review(pod, dry_run=dry_run)["request"]
    namespace, key = pod["metadata"]["namespace"], f"{pod['metadata']['namespace']}/{pod['metadata']['name']}"
    count = count_gpus(pod, cache.dra(), namespace)
    shapes = cache.counted(namespace, excluding=key)
    outcome = gate.admit(request, quotas, count)
    if count.shape is None or pod.get("status"):
        assert not outcome.checks
        return outcome
    expected = reference_check(
        namespace,
        key,
        count.shape,
        quotas,
        {},
        lambda accounting: usage_from_scratch(shapes, accounting),
        DEFAULT_SETTINGS,
        dry_run,
    )
    assert outcome.allowed == expected.allowed
    assert tuple(f.message for f in outcome.findings()) == expected.messages
    if outcome.checks:
        assert outcome.audit() == expected.audit
    return outcome


def _without_devices(usage: Any) -> Any:
    from webhook.accounting.usage import Usage

    return Usage(usage.gpus, usage.gpu_memory_mib, dict(usage.resources))


@given(st.fractions(min_value=-1000, max_value=1000, max_denominator=10**9))
def test_exact_text_is_the_fraction_printed(value: Fraction) -> None:
    for unit in (1, GPU_UNIT, MEMORY_UNIT):
        assert exact_text(scaled(value, unit), unit) == str(value)


def test_common_amounts_are_whole_units() -> None:
    """MIG sevenths, shares of replicas, KAI decimals: the integer form holds them."""
    for value in (Fraction(1, 7), Fraction(3, 4), Fraction(1, 3), Fraction(7, 20), Fraction(1, 16)):
        assert isinstance(scaled(value, GPU_UNIT), int)
    assert isinstance(scaled(Fraction(1, 10**7), GPU_UNIT), Fraction)
    assert isinstance(scaled(Fraction(20480), MEMORY_UNIT), int)


def test_demand_is_counted_once_per_shape_and_accounting() -> None:
    pod = make_pod("p", "ml-team", [res("main", {"nvidia.com/mig-1g.10gb": 2})])
    shape = count_gpus(pod).shape
    assert shape is not None
    card = QuotaSettings(card_memory_mib=81920)
    assert Tally.of(shape_demand(shape, card)).gpus == 2 * GPU_UNIT // 7
