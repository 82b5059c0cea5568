"""Per-replica reservations: concurrent admissions against limited room admit exactly that room."""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

from hypothesis import given, settings
from hypothesis import strategies as st

from tests.support.pods import gpu_pod, quota
from tests.support.reviews import make_review
from webhook.cache import PODS, ClusterCache
from webhook.quota.check import QuotaOutcome
from webhook.quota.gate import LocalGate
from webhook.types import AdmissionRequest

CAP = quota("cap", {"gpus": 10}, match={"namespaces": ["ml-team"]})


def request(name: str, *, dry_run: bool = False, gpus: int = 1) -> AdmissionRequest:
    review: AdmissionRequest = make_review(gpu_pod(name, gpus=gpus), dry_run=dry_run)["request"]
    return review


def admit_together(admit: Callable[[AdmissionRequest], QuotaOutcome], count: int) -> list[QuotaOutcome]:
    """Release `count` admissions at the same instant from as many threads."""
    start = threading.Barrier(count)

    def one(i: int) -> QuotaOutcome:
        start.wait()
        return admit(request(f"new-{i}"))

    with ThreadPoolExecutor(max_workers=count) as pool:
        return list(pool.map(one, range(count)))


def synced_cache(*pods: dict[str, object]) -> ClusterCache:
    cache = ClusterCache()
    cache.replace(PODS, list(pods))
    cache.mark_static()
    return cache


def test_fifty_concurrent_admissions_against_room_for_eight_admit_eight() -> None:
    gate = LocalGate(synced_cache(gpu_pod("old", gpus=2)))
    outcomes = admit_together(lambda r: gate.admit(r, [CAP]), 50)
    assert sum(o.allowed for o in outcomes) == 8
    denied = next(o for o in outcomes if not o.allowed)
    assert "this pod needs 1 GPU, 10 of 10 are in use" in denied.decision().message


def test_dry_runs_reserve_nothing() -> None:
    gate = LocalGate(synced_cache())
    for i in range(20):
        assert gate.admit(request(f"dry-{i}", dry_run=True, gpus=10), [CAP]).allowed
    assert gate.cache.stats().reservations == 0


def test_released_admissions_free_their_room() -> None:
    gate = LocalGate(synced_cache())
    first = gate.admit(request("a", gpus=10), [CAP])
    assert not gate.admit(request("b", gpus=1), [CAP]).allowed
    gate.release(first)
    assert gate.admit(request("b", gpus=1), [CAP]).allowed


def test_a_retried_create_does_not_count_against_itself() -> None:
    """Another webhook refused the pod after we reserved it; the user creates it again."""
    gate = LocalGate(synced_cache())
    for _ in range(5):
        assert gate.admit(request("same", gpus=7), [CAP]).allowed
    assert gate.cache.usage("ml-team", gate.settings).gpus == 7
    assert not gate.admit(request("other", gpus=4), [CAP]).allowed


def test_pods_outside_any_quota_reserve_nothing() -> None:
    gate = LocalGate(synced_cache())
    other: AdmissionRequest = make_review(gpu_pod("x", namespace="other", gpus=3))["request"]
    assert gate.admit(other, [CAP]).allowed
    assert gate.cache.stats().reservations == 0


def test_each_replica_alone_is_exact_but_replicas_do_not_see_each_other() -> None:
    """Why strict mode exists: two per-replica gates on the same cluster admit 8 each."""
    replicas = [LocalGate(synced_cache(gpu_pod("old", gpus=2))) for _ in range(2)]

    def route(r: AdmissionRequest) -> QuotaOutcome:
        return replicas[int(r["name"].rsplit("-", 1)[1]) % 2].admit(r, [CAP])

    assert sum(o.allowed for o in admit_together(route, 50)) == 16


@settings(deadline=None)  # no wall-clock limit: a first call on a busy machine took 290 ms
@given(sizes=st.lists(st.integers(1, 6), max_size=25), limit=st.integers(0, 40))
def test_admitted_pods_never_exceed_the_limit_and_denials_are_exact(sizes: list[int], limit: int) -> None:
    capped = quota("cap", {"gpus": limit}, match={"namespaces": ["ml-team"]})
    gate = LocalGate(synced_cache())
    used = 0
    for i, size in enumerate(sizes):
        outcome = gate.admit(request(f"p{i}", gpus=size), [capped])
        assert outcome.allowed is (used + size <= limit)
        used += size if outcome.allowed else 0
    assert gate.cache.usage("ml-team", gate.settings).gpus == used <= limit
