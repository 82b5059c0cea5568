"""Nodes listed and watched through the real kubernetes client against the fake kube-apiserver:
the cache keeps only which extended resource names they advertise, and a node watch the API
refuses (an install whose ClusterRole predates nodes) changes nothing else."""

from __future__ import annotations

import tracemalloc
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.cluster.conftest import WAIT, Watching
from tests.support.fakekube import FakeKube
from tests.support.schema import assert_valid
from webhook.cache import KINDS, NODES, ClusterCache
from webhook.clusterstate import ClusterState
from webhook.dra.served import NodeNames, extended_names
from webhook.informer import Informer
from webhook.quota.gate import LocalGate

GPU, SHARED, MIG = "nvidia.com/gpu", "nvidia.com/gpu.shared", "nvidia.com/mig-1g.10gb"


def node(
    name: str, *names: str, heartbeat: str = "t0", labels: dict[str, str] | None = None
) -> dict[str, Any]:
    amounts = {"cpu": "64", "memory": "512Gi", **dict.fromkeys(names, "8")}
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "annotations": {"heartbeat": heartbeat}, "labels": labels or {}},
        "status": {"capacity": amounts, "allocatable": amounts},
    }


def watch(watching: Watching, cache: ClusterCache) -> dict[str, Informer]:
    """Pods, namespaces and nodes, in pages of 2."""
    return {i.kind: i for i in watching(cache, kinds=(*KINDS, NODES), page_size=2)}


def test_nodes_are_listed_then_watched_as_their_resource_names(fake: FakeKube, watching: Watching) -> None:
    for index in range(5):  # pages of 2: the list follows continue tokens
        assert_valid(node(f"gpu-{index}", GPU))
        fake.create("nodes", node(f"gpu-{index}", GPU))
    cache = ClusterCache()
    assert cache.allocatable is None  # nothing is known before the list
    watch(watching, cache)
    assert cache.wait_until(lambda c: c.allocatable == frozenset({GPU}) and c.synced, WAIT)
    assert cache.stats().nodes == 5

    fake.update("nodes", node("gpu-1", GPU, SHARED))  # the device plugin now renames by default
    assert cache.wait_until(lambda c: c.allocatable == frozenset({GPU, SHARED}), WAIT)
    fake.create("nodes", node("mig-0", MIG))
    assert cache.wait_until(lambda c: c.allocatable == frozenset({GPU, SHARED, MIG}), WAIT)
    fake.delete("nodes", "", "gpu-1")
    assert cache.wait_until(lambda c: c.allocatable == frozenset({GPU, MIG}), WAIT)
    assert cache.stats().nodes == 5
    assert cache.staleness() == 0.0  # every watch open


def test_a_refused_node_watch_blocks_nothing_and_is_picked_up_once_granted(
    fake: FakeKube, watching: Watching
) -> None:
    fake.forbidden.add("nodes")
    fake.create("nodes", node("gpu-0", GPU))
    cache = ClusterCache()
    started = watch(watching, cache)
    state = ClusterState(cache, LocalGate(cache), "cluster (test)", list(started.values()))
    assert cache.wait_until(lambda c: c.synced and started[NODES].failures > 0, WAIT)
    assert cache.wait_until(lambda c: c.staleness() == 0.0, WAIT)  # pods and namespaces: fresh
    assert cache.allocatable is None and not cache.nodes_listed
    ready, text = state.readiness()
    assert ready
    assert "nodes not listed (ClusterError: list nodes: HTTP 403 Forbidden)" in text
    assert state.stale_reason() is None  # quota keeps trusting the cache

    fake.forbidden.discard("nodes")  # the ClusterRole is updated: no restart needed
    assert cache.wait_until(lambda c: c.allocatable == frozenset({GPU}), WAIT)
    assert "nodes not listed" not in state.readiness()[1]


def test_a_status_heartbeat_changes_nothing() -> None:
    cache = ClusterCache()
    cache.replace(NODES, [node("gpu-0", GPU)])
    before = cache.allocatable
    cache.apply(NODES, "MODIFIED", node("gpu-0", GPU, heartbeat="t1"))
    assert cache.allocatable is before


@pytest.mark.parametrize(
    ("case", "status", "names"),
    [
        ("allocatable and capacity", {"allocatable": {GPU: "8"}, "capacity": {SHARED: "8"}}, {GPU, SHARED}),
        ("native resources are not extended", {"allocatable": {"cpu": "8", "hugepages-2Mi": "0"}}, set()),
        ("no status yet", None, set()),
        ("a malformed status", {"allocatable": ["nvidia.com/gpu"]}, set()),
    ],
)
def test_extended_names(case: str, status: Any, names: set[str]) -> None:
    obj: dict[str, Any] = {"metadata": {"name": "n"}}
    if status is not None:
        obj["status"] = status
    assert extended_names(obj) == names, case


def test_nodes_of_one_pool_share_one_set() -> None:
    index = NodeNames()
    assert index.union() is None
    index.replace({f"a-{n}": frozenset({GPU}) for n in range(10_000)})
    index.put("b-0", frozenset({GPU, SHARED}))
    assert index.distinct_sets == 2 and len(index) == 10_001
    assert index.union() == frozenset({GPU, SHARED})
    index.replace({})
    assert index.union() is None  # listed, but no node: nothing is claimed unserved


def test_ten_thousand_nodes_stay_cheap() -> None:
    """Whole Nodes (labels, conditions) pass through; only names stay: measured about 1 MB."""
    labels = {f"example.com/label-{k}": "v" * 20 for k in range(30)}
    cache = ClusterCache()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        cache.replace(  # one at a time, as pages of a list are: a Node kept would stay allocated
            NODES,
            (
                node(f"ip-10-0-{n // 250}-{n % 250}.ec2.internal", GPU if n % 2 else MIG, labels=labels)
                for n in range(10_000)
            ),
        )
        retained = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert cache.allocatable == frozenset({GPU, MIG}) and cache.stats().nodes == 10_000
    assert retained < 3 * 2**20


NAMES = st.frozensets(st.sampled_from([GPU, SHARED, MIG, "example.com/fpga"]), max_size=3)
STEPS = st.lists(st.tuples(st.sampled_from(["n1", "n2", "n3"]), st.none() | NAMES), max_size=30)


@given(STEPS)
def test_the_union_follows_every_put_and_remove(steps: list[tuple[str, frozenset[str] | None]]) -> None:
    index, model = NodeNames(), dict[str, frozenset[str]]()
    index.replace({})
    for name, names in steps:
        if names is None:
            index.remove(name)
            model.pop(name, None)
        else:
            index.put(name, names)
            model[name] = names
        expected = frozenset().union(*model.values()) if model else None
        assert index.union() == expected
        assert index.distinct_sets == len(set(model.values()))
