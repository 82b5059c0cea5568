"""Strict consistency: two independent replicas share a ConfigMap ledger through the fake API."""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.cluster.conftest import WAIT, Watching
from tests.support.fakekube import FakeKube
from tests.support.pods import gpu_pod, make_pod, quota, res
from tests.support.reviews import make_review
from webhook.accounting.demand import KaiRequest, PodShape
from webhook.cache import ClusterCache
from webhook.cluster import ConfigMapStore, connect
from webhook.dra.devices import DeviceAsk
from webhook.dra.resolve import ClaimShape
from webhook.gpu import parse_mig_resource
from webhook.quota.check import QuotaOutcome
from webhook.quota.ledger import Entry, LedgerGate, LedgerStore, StoredLedger, decode, encode, ledger_name
from webhook.types import AdmissionRequest

CAP = quota("cap", {"gpus": 10}, match={"namespaces": ["ml-team"]})
OWN_NAMESPACE = "gpu-system"


@dataclass
class Replica:
    gate: LedgerGate
    cache: ClusterCache


@pytest.fixture
def replicas(fake: FakeKube, watching: Watching, tmp_path: Path) -> list[Replica]:
    """Two webhook replicas: each its own client, cache, informers and ledger gate."""
    made = []
    for name in ("replica-a", "replica-b"):
        connection = connect(fake.write_kubeconfig(tmp_path / f"{name}.kubeconfig"))
        assert connection is not None
        cache = ClusterCache()
        watching(cache)
        assert cache.wait_until(lambda c: c.synced, WAIT)
        made.append(
            Replica(LedgerGate(cache, ConfigMapStore(connection, OWN_NAMESPACE), replica=name), cache)
        )
    return made


def request(
    name: str, *, gpus: int = 1, dry_run: bool = False, pod: dict[str, Any] | None = None
) -> AdmissionRequest:
    review: AdmissionRequest = make_review(pod or gpu_pod(name, gpus=gpus), dry_run=dry_run)["request"]
    return review


def admit_together(admit: Callable[[int], QuotaOutcome], count: int) -> list[QuotaOutcome]:
    start = threading.Barrier(count)

    def one(i: int) -> QuotaOutcome:
        start.wait()
        return admit(i)

    with ThreadPoolExecutor(max_workers=count) as pool:
        return list(pool.map(one, range(count)))


def test_fifty_admissions_across_two_replicas_admit_exactly_eight(
    fake: FakeKube, replicas: list[Replica]
) -> None:
    fake.create("pods", gpu_pod("old", gpus=2))
    for replica in replicas:
        assert replica.cache.wait_until(lambda c: c.stats().pods == 1, WAIT)
    outcomes = admit_together(lambda i: replicas[i % 2].gate.admit(request(f"new-{i}"), [CAP]), 50)
    assert sum(o.allowed for o in outcomes) == 8
    stored = fake.get("configmaps", OWN_NAMESPACE, ledger_name("ml-team"))
    assert stored is not None
    assert len(decode(stored["data"])) == 8


class RacingStore:
    """A ledger store where another replica writes between our read and our write, once."""

    def __init__(self, inner: LedgerStore, rival: Callable[[], object]) -> None:
        self.inner = inner
        self.rival: Callable[[], object] | None = rival

    def read(self, name: str) -> StoredLedger | None:
        found = self.inner.read(name)
        if self.rival is not None:
            rival, self.rival = self.rival, None
            rival()
        return found

    def create(self, name: str, data: Mapping[str, str]) -> None:
        self.inner.create(name, data)

    def replace(self, name: str, data: Mapping[str, str], resource_version: str) -> None:
        self.inner.replace(name, data, resource_version)


@pytest.mark.parametrize(
    "existing", [False, True], ids=["ledger-created-meanwhile", "ledger-updated-meanwhile"]
)
def test_a_conflict_is_read_again_and_decided_again(
    fake: FakeKube, replicas: list[Replica], existing: bool
) -> None:
    a, b = replicas
    if existing:
        assert b.gate.admit(request("earlier", gpus=1), [CAP]).allowed
    racing = LedgerGate(
        a.cache,
        RacingStore(a.gate.store, lambda: b.gate.admit(request("rival", gpus=5), [CAP])),
        replica="racing",
    )
    outcome = racing.admit(request("mine", gpus=5), [CAP])
    assert racing.conflicts == 1
    assert fake.conflicts == 1
    assert outcome.allowed is (not existing)  # with "earlier" there is room for only one of the two 5s
    if existing:
        assert "6 of 10 are in use" in outcome.decision().message


def test_admitted_pods_are_counted_once_the_watch_shows_them(fake: FakeKube, replicas: list[Replica]) -> None:
    a, b = replicas
    pod = gpu_pod("first", gpus=6)
    assert a.gate.admit(request("first", pod=pod), [CAP]).allowed
    fake.create("pods", pod)
    for replica in replicas:
        assert replica.cache.wait_until(lambda c: c.knows("ml-team/first", pod["metadata"]["uid"]), WAIT)
    assert b.gate.admit(request("second", gpus=4), [CAP]).allowed  # 6 + 4: the entry is not counted twice
    assert not a.gate.admit(request("third", gpus=1), [CAP]).allowed


def test_a_replica_whose_watch_lags_still_counts_the_entry(fake: FakeKube, replicas: list[Replica]) -> None:
    a, b = replicas
    pod = gpu_pod("first", gpus=6)
    with fake.watches_paused():  # neither watch has shown the pod yet
        assert a.gate.admit(request("first", pod=pod), [CAP]).allowed
        fake.create("pods", pod)
        outcome = b.gate.admit(request("second", gpus=5), [CAP])
    assert not outcome.allowed
    assert "6 of 10 are in use" in outcome.decision().message


def test_dry_runs_read_but_never_write(fake: FakeKube, replicas: list[Replica]) -> None:
    a, _ = replicas
    assert a.gate.admit(request("dry", gpus=10, dry_run=True), [CAP]).allowed
    assert fake.get("configmaps", OWN_NAMESPACE, ledger_name("ml-team")) is None
    assert fake.count("configmaps") == 1  # the one read


def test_pods_outside_every_quota_make_no_api_call(fake: FakeKube, replicas: list[Replica]) -> None:
    a, _ = replicas
    other: AdmissionRequest = make_review(gpu_pod("x", namespace="other", gpus=50))["request"]
    cpu: AdmissionRequest = make_review(make_pod("cpu", containers=[res("a", {"cpu": 1})]))["request"]
    assert a.gate.admit(other, [CAP]).allowed
    assert a.gate.admit(cpu, [CAP]).allowed
    assert fake.count("configmaps") == 0


def test_a_retried_create_does_not_count_against_itself(fake: FakeKube, replicas: list[Replica]) -> None:
    a, b = replicas
    pod = gpu_pod("same", gpus=7)
    assert a.gate.admit(request("same", pod=pod), [CAP]).allowed
    assert b.gate.admit(request("same", pod=pod), [CAP]).allowed  # the retry lands on the other replica
    assert not a.gate.admit(request("other", gpus=4), [CAP]).allowed
    stored = fake.get("configmaps", OWN_NAMESPACE, ledger_name("ml-team"))
    assert stored is not None and [e.pod for e in decode(stored["data"])] == ["ml-team/same"]


def test_release_returns_the_room(fake: FakeKube, replicas: list[Replica]) -> None:
    a, b = replicas
    big = a.gate.admit(request("big", gpus=10), [CAP])
    assert not b.gate.admit(request("small", gpus=1), [CAP]).allowed
    a.gate.release(big)
    assert b.gate.admit(request("small", gpus=1), [CAP]).allowed


def test_expired_entries_stop_counting(fake: FakeKube, replicas: list[Replica]) -> None:
    a, _ = replicas
    now = [1000.0]
    gate = LedgerGate(a.cache, a.gate.store, replica="clocked", ttl=30, wall=lambda: now[0])
    assert gate.admit(request("never-created", gpus=10), [CAP]).allowed
    assert not gate.admit(request("next", gpus=1), [CAP]).allowed
    now[0] += 31
    assert gate.admit(request("next", gpus=1), [CAP]).allowed


def test_an_unreachable_api_fails_the_check(fake: FakeKube, replicas: list[Replica]) -> None:
    a, _ = replicas
    with fake.outage(), pytest.raises(Exception, match="503"):
        a.gate.admit(request("new"), [CAP])


# The ledger's own encoding -------------------------------------------------------------------

amounts = st.lists(
    st.tuples(
        st.sampled_from(["nvidia.com/gpu", "nvidia.com/mig-1g.10gb", "nvidia.com/gpumem"]), st.integers(1, 99)
    ),
    max_size=3,
    unique_by=lambda pair: pair[0],
).map(lambda pairs: tuple(sorted(pairs)))
kai = st.none() | st.builds(
    KaiRequest, st.fractions(Fraction(1, 100), Fraction(1)), st.none(), st.integers(1, 8)
)
profiles = st.none() | st.sampled_from(["1g.5gb", "3g.40gb", "7g.80gb"]).map(
    lambda name: parse_mig_resource("nvidia.com/mig-" + name)
)
asks = st.builds(
    DeviceAsk,
    st.text(min_size=1),
    st.sampled_from(["gpu.nvidia.com", "mig.nvidia.com"]),
    st.integers(1, 16),
    admin_access=st.booleans(),
    profile=profiles,
    memory_mib=st.integers(0, 81920),
    share=st.fractions(Fraction(1, 100), Fraction(1)),
    charge_only=st.booleans(),
    class_count=st.integers(0, 16),
)
claims = st.lists(
    st.builds(ClaimShape, st.text(), st.text(), st.lists(asks, min_size=1, max_size=3).map(tuple)), max_size=2
).map(tuple)
shapes = st.builds(
    PodShape,
    app=st.lists(amounts, max_size=3).map(tuple),
    init=st.lists(st.tuples(amounts, st.booleans()), max_size=2).map(tuple),
    kai=kai,
    claims=claims,
    backed=st.lists(
        st.tuples(st.text(min_size=1), st.integers(0, 7), st.integers(0, 9999), st.text()), max_size=2
    ).map(tuple),
)
entries = st.lists(
    st.builds(Entry, st.text(min_size=1), st.text(), shapes, st.floats(0, 2e9), st.text()), max_size=5
)


@given(entries)
def test_entries_survive_the_round_trip(found: list[Entry]) -> None:
    assert decode(encode(found)) == found


@pytest.mark.parametrize(
    "data",
    [{"reservations": "not json"}, {"reservations": '[{"pod": 1}]'}, {"reservations": '{"a": 1}'}, {}],
)
def test_unreadable_ledgers_are_empty_not_fatal(data: dict[str, str]) -> None:
    assert decode(data) == []


def test_entries_written_before_backed_rows_named_their_class_still_read() -> None:
    """A replica of the previous release wrote (name, slices, MiB): read with no class to charge."""
    old = '[{"pod":"p","uid":"u","shape":{"backed":[["example.com/big",0,0]],"app":[],"init":[],"kai":null},'
    (entry,) = decode({"reservations": old + '"expires":1.0,"replica":"r"}]'})
    assert entry.shape.backed == (("example.com/big", 0, 0, ""),)
