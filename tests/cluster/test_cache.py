"""The cluster cache without any API: lists, events, reservations, tombstones, memory."""

from __future__ import annotations

import json
import subprocess
import sys
from fractions import Fraction

import pytest

from tests.support.pods import gpu_pod, make_pod, namespace, res
from webhook.accounting.demand import DEFAULT_SETTINGS, pod_shape
from webhook.cache import NAMESPACES, PODS, ClusterCache

S = DEFAULT_SETTINGS


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def gpus(cache: ClusterCache, ns: str = "ml-team") -> Fraction:
    return cache.usage(ns, S).gpus


def test_a_list_counts_unfinished_gpu_pods_only() -> None:
    cache = ClusterCache()
    cache.replace(
        PODS,
        [
            gpu_pod("a", gpus=2),
            gpu_pod("b", gpus=3, phase="Running"),
            gpu_pod("done", gpus=4, phase="Succeeded"),
            gpu_pod("failed", gpus=4, phase="Failed"),
            make_pod("cpu", containers=[res("a", {"cpu": 1})]),
            gpu_pod("elsewhere", namespace="other", gpus=1),
        ],
    )
    assert gpus(cache) == 5
    assert gpus(cache, "other") == 1
    assert cache.stats().pods == 3


def test_synced_once_both_kinds_are_listed() -> None:
    cache = ClusterCache()
    cache.replace(PODS, [])
    assert not cache.synced
    cache.replace(NAMESPACES, [namespace("ml-team", {"team": "ml"})])
    assert cache.synced
    assert cache.namespace_labels("ml-team")["team"] == "ml"


def test_events_add_modify_and_delete() -> None:
    cache = ClusterCache()
    cache.replace(PODS, [])
    cache.apply(PODS, "ADDED", gpu_pod("a", gpus=2))
    assert gpus(cache) == 2
    cache.apply(PODS, "MODIFIED", gpu_pod("a", gpus=2, phase="Running"))
    assert gpus(cache) == 2
    cache.apply(PODS, "MODIFIED", gpu_pod("a", gpus=2, phase="Succeeded"))
    assert gpus(cache) == 0
    cache.apply(PODS, "ADDED", gpu_pod("b", gpus=1))
    cache.apply(PODS, "DELETED", gpu_pod("b", gpus=1))
    assert gpus(cache) == 0
    assert cache.stats().pods == 0 and cache.stats().shapes == 0


def test_namespace_events() -> None:
    cache = ClusterCache()
    cache.apply(NAMESPACES, "ADDED", namespace("a", {"x": "1"}))
    cache.apply(NAMESPACES, "MODIFIED", namespace("a", {"x": "2"}))
    assert cache.namespace_labels("a")["x"] == "2"
    cache.apply(NAMESPACES, "DELETED", namespace("a"))
    assert cache.namespace_labels("a") == {}


def test_a_relist_replaces_everything() -> None:
    cache = ClusterCache()
    cache.replace(PODS, [gpu_pod("a"), gpu_pod("b")])
    cache.replace(PODS, [gpu_pod("c", gpus=5)])
    assert gpus(cache) == 5
    assert cache.knows("ml-team/a")  # gone while we were not watching: still known, as gone


def test_identical_pods_share_one_shape() -> None:
    cache = ClusterCache()
    cache.replace(PODS, [gpu_pod(f"p{i}", namespace=f"ns{i % 10}") for i in range(1000)])
    stats = cache.stats()
    assert (stats.pods, stats.shapes) == (1000, 1)
    assert gpus(cache, "ns3") == 100


def test_unreadable_pods_are_counted_as_such_not_raised() -> None:
    cache = ClusterCache()
    cache.replace(PODS, [make_pod("bad", annotations={"gpu-fraction": "lots"}), gpu_pod("ok")])
    assert gpus(cache) == 1
    assert cache.stats().unreadable_pods == 1


def test_reservations_count_until_the_watch_shows_the_pod() -> None:
    cache = ClusterCache()
    pod = gpu_pod("new", gpus=2)
    shape = pod_shape(pod)
    assert shape is not None
    cache.reserve("ml-team", "ml-team/new", shape)
    assert gpus(cache) == 2
    assert cache.pod_usage("ml-team", S).gpus == 0
    cache.apply(PODS, "ADDED", pod)
    assert gpus(cache) == 2  # counted once: the reservation made way for the pod
    assert cache.stats().reservations == 0


def test_a_pod_recreated_under_the_same_name_keeps_its_reservation() -> None:
    """StatefulSets reuse names: a late DELETED of the old pod must not cancel the new one."""
    cache = ClusterCache()
    old, new = gpu_pod("web-0", gpus=2), gpu_pod("web-0", gpus=2)
    shape = pod_shape(new)
    assert shape is not None
    cache.apply(PODS, "ADDED", old)
    cache.reserve("ml-team", "ml-team/web-0", shape, new["metadata"]["uid"])
    cache.apply(PODS, "DELETED", old)
    assert gpus(cache) == 2
    assert cache.knows("ml-team/web-0", old["metadata"]["uid"])
    assert not cache.knows("ml-team/web-0", new["metadata"]["uid"])
    cache.apply(PODS, "ADDED", new)
    assert gpus(cache) == 2
    assert cache.stats().reservations == 0
    assert cache.knows("ml-team/web-0", new["metadata"]["uid"])


def test_reservations_expire() -> None:
    clock = Clock()
    cache = ClusterCache(reservation_ttl=30, clock=clock)
    shape = pod_shape(gpu_pod("new", gpus=2))
    assert shape is not None
    cache.reserve("ml-team", "ml-team/new", shape)
    clock.now += 29
    assert gpus(cache) == 2
    clock.now += 2
    assert gpus(cache) == 0


def test_released_reservations_stop_counting() -> None:
    cache = ClusterCache()
    shape = pod_shape(gpu_pod("new", gpus=2))
    assert shape is not None
    cache.reserve("ml-team", "ml-team/new", shape)
    cache.release("ml-team", "ml-team/new")
    assert gpus(cache) == 0


def test_known_pods_include_recently_gone_ones() -> None:
    clock = Clock()
    cache = ClusterCache(reservation_ttl=30, clock=clock)
    cache.apply(PODS, "ADDED", gpu_pod("a"))
    assert cache.knows("ml-team/a")
    cache.apply(PODS, "DELETED", gpu_pod("a"))
    assert cache.knows("ml-team/a")
    cache.apply(PODS, "ADDED", gpu_pod("b", phase="Succeeded"))
    assert cache.knows("ml-team/b")
    clock.now += 31
    assert not cache.knows("ml-team/a")
    assert not cache.knows("ml-team/b")


def test_staleness_grows_until_the_api_confirms() -> None:
    clock = Clock()
    cache = ClusterCache(clock=clock)
    assert cache.staleness() is None
    cache.replace(PODS, [])
    cache.replace(NAMESPACES, [])
    clock.now += 5
    assert cache.staleness() == 5
    cache.confirm(PODS)
    assert cache.staleness() == 5  # namespaces are still 5 s old
    cache.confirm(NAMESPACES)
    assert cache.staleness() == 0


def test_open_watches_keep_the_cache_fresh() -> None:
    clock = Clock()
    cache = ClusterCache(clock=clock)
    cache.replace(PODS, [])
    cache.replace(NAMESPACES, [])
    cache.set_live(PODS, True)
    cache.set_live(NAMESPACES, True)
    clock.now += 100
    assert cache.staleness() == 0
    cache.set_live(PODS, False)
    clock.now += 7
    assert cache.staleness() == 7


def test_a_static_cache_is_synced_and_never_stale() -> None:
    cache = ClusterCache()
    cache.replace(PODS, [gpu_pod("a")])
    cache.mark_static()
    assert cache.synced and cache.staleness() is None


MEMORY_PROBE = """
import json, sys
import webhook.cluster  # the kubernetes client, as serve loads it
from webhook.cache import PODS, ClusterCache
from tests.support.pods import make_pod, res

def pods(count, templates):
    for i in range(count):
        t = i % templates
        amounts = {"nvidia.com/gpu": 1 + t % 4, "nvidia.com/gpumem": 1000 + t}
        if t % 3 == 0:
            amounts = {"nvidia.com/mig-1g.10gb": 1 + t % 7, "example.com/tag": 1 + t}
        pod = make_pod(f"job-{t}-{i}", f"team-{i % 1000}", [res("main", amounts), res("log", {"cpu": 1})])
        pod["metadata"]["labels"] = {"app": f"job-{t}", "pod-template-hash": "7d9f8c6b5"}
        pod["status"] = {"phase": "Running", "podIP": "10.0.0.1"}
        yield pod

cache = ClusterCache()
cache.replace(PODS, pods(int(sys.argv[1]), int(sys.argv[2])))
# VmHWM, not ru_maxrss: getrusage keeps the parent's peak across vfork and exec, so a large
# pytest process would be counted as ours.
peak_kb = next(int(line.split()[1]) for line in open("/proc/self/status") if line.startswith("VmHWM:"))
print(json.dumps({"rss_mb": peak_kb / 1024,
                  "pods": cache.stats().pods, "shapes": cache.stats().shapes}))
"""


@pytest.mark.slow
def test_a_hundred_thousand_pods_fit_in_well_under_200_mb() -> None:
    """Peak RSS with the kubernetes client loaded and 100,000 GPU pods cached, every one a
    distinct shape (the worst case; pods from shared templates take about half)."""
    templates = 100_000
    result = subprocess.run(
        [sys.executable, "-c", MEMORY_PROBE, "100000", str(templates)],
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    figures = json.loads(result.stdout)
    assert figures["pods"] == 100_000
    assert figures["shapes"] == templates
    assert figures["rss_mb"] < 200, figures  # the bound, for the whole process with its imports


def test_quota_stops_trusting_a_cache_past_max_staleness() -> None:
    from webhook.clusterstate import ClusterState
    from webhook.quota.gate import LocalGate

    clock = Clock()
    cache = ClusterCache(clock=clock)
    cache.replace(PODS, [])
    cache.replace(NAMESPACES, [])
    state = ClusterState(cache=cache, gate=LocalGate(cache), origin="test", max_staleness=60)
    clock.now += 60
    assert state.stale_reason() is None
    clock.now += 1
    reason = state.stale_reason()
    assert reason is not None and "61s behind the API" in reason and "--max-staleness 60s" in reason
    cache.confirm(PODS)
    cache.confirm(NAMESPACES)
    assert state.stale_reason() is None
