"""List+watch caches through the real kubernetes client against the fake kube-apiserver."""

from __future__ import annotations

from fractions import Fraction
from pathlib import Path

import pytest

from tests.cluster.conftest import WAIT, Watching
from tests.support.fakekube import FakeKube
from tests.support.pods import gpu_pod, namespace
from webhook.accounting.demand import DEFAULT_SETTINGS
from webhook.cache import PODS, ClusterCache
from webhook.cluster import KubeSource, connect
from webhook.errors import ConfigError
from webhook.informer import Backoff, Informer


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def gpus(cache: ClusterCache, ns: str = "ml-team") -> Fraction:
    return cache.usage(ns, DEFAULT_SETTINGS).gpus


def wait(cache: ClusterCache, condition: str, check: object) -> None:
    assert callable(check)
    assert cache.wait_until(lambda c: bool(check(c)), WAIT), f"cache never reached: {condition}"


def test_initial_sync_lists_in_pages(fake: FakeKube, watching: Watching) -> None:
    for i in range(120):
        fake.create("pods", gpu_pod(f"p{i}", namespace=f"team-{i % 3}"))
    fake.create("namespaces", namespace("team-0", {"gpu": "capped"}))
    cache = ClusterCache()
    watching(cache)
    wait(cache, "synced", lambda c: c.synced)
    assert cache.stats().pods == 120
    assert gpus(cache, "team-0") == 40
    assert cache.namespace_labels("team-0")["gpu"] == "capped"
    assert fake.count(r"GET /api/v1/pods\?continue=") == 2  # 120 pods in pages of 50


def test_a_list_whose_continue_token_expired_is_retried(fake: FakeKube, watching: Watching) -> None:
    for i in range(120):
        fake.create("pods", gpu_pod(f"p{i}"))
    fake.expire_next_continue()
    cache = ClusterCache()
    pods, _ = watching(cache)
    wait(cache, "synced", lambda c: c.synced)
    assert cache.stats().pods == 120
    assert pods.lists == 1 and len(pods.delays) == 1  # one failed attempt, backed off, listed again
    assert fake.count(r"GET /api/v1/pods\?limit=") == 2


def test_events_reach_the_cache(fake: FakeKube, watching: Watching) -> None:
    cache = ClusterCache()
    watching(cache)
    wait(cache, "synced", lambda c: c.synced)
    fake.create("pods", gpu_pod("a", gpus=2))
    wait(cache, "ADDED", lambda c: gpus(c) == 2)
    fake.update("pods", gpu_pod("a", gpus=2, phase="Succeeded"))
    wait(cache, "MODIFIED to Succeeded", lambda c: gpus(c) == 0)
    fake.create("pods", gpu_pod("b", gpus=3))
    wait(cache, "second pod", lambda c: gpus(c) == 3)
    fake.delete("pods", "ml-team", "b")
    wait(cache, "DELETED", lambda c: gpus(c) == 0 and c.knows("ml-team/b"))
    fake.create("namespaces", namespace("ml-team", {"team": "ml"}))
    wait(cache, "namespace labels", lambda c: c.namespace_labels("ml-team").get("team") == "ml")


def test_an_expired_watch_lists_again(fake: FakeKube, watching: Watching) -> None:
    fake.create("pods", gpu_pod("a", gpus=1))
    fake.create("pods", gpu_pod("b", gpus=2))
    cache = ClusterCache()
    pods, _ = watching(cache)
    wait(cache, "synced", lambda c: c.synced and gpus(c) == 3)
    with fake.watches_paused():  # these changes never reach the watch: only a new list shows them
        fake.delete("pods", "ml-team", "a")
        fake.create("pods", gpu_pod("c", gpus=4))
        fake.expire_watches()
    wait(cache, "relisted", lambda c: gpus(c) == 6)
    assert pods.lists == 2
    fake.create("pods", gpu_pod("d", gpus=1))
    wait(cache, "watching again after the relist", lambda c: gpus(c) == 7)


def test_bookmarks_move_the_resume_point(fake: FakeKube, watching: Watching) -> None:
    cache = ClusterCache()
    pods, _ = watching(cache)
    wait(cache, "synced", lambda c: c.synced)
    fake.wait_for_watches(2)
    other = fake.create("configmaps", {"metadata": {"name": "x", "namespace": "elsewhere"}})
    fake.bookmark()
    wait(cache, "bookmark", lambda _: pods.resource_version == other["metadata"]["resourceVersion"])


def test_an_open_watch_keeps_the_cache_fresh(fake: FakeKube, watching: Watching) -> None:
    clock = Clock()
    cache = ClusterCache(clock=clock)
    watching(cache)
    wait(cache, "synced", lambda c: c.synced)
    clock.now += 60
    wait(cache, "fresh once both watches are open", lambda c: c.staleness() == 0)


def test_api_down_then_back(fake: FakeKube, watching: Watching) -> None:
    clock = Clock()
    cache = ClusterCache(clock=clock)
    pods, namespaces = watching(cache)
    wait(cache, "synced", lambda c: c.synced)
    with fake.outage():
        fake.wait_for_requests(lambda _: pods.failures >= 2 and namespaces.failures >= 2)
        assert "503" in pods.last_error
        clock.now += 45
        assert cache.staleness() == 45  # nothing confirms the cache while the API is away
        assert cache.synced  # the last good state keeps serving
    fake.create("pods", gpu_pod("after", gpus=2))
    wait(cache, "recovered", lambda c: gpus(c) == 2 and c.staleness() == 0)
    assert pods.failures == 0 and namespaces.failures == 0


def test_backoff_grows_with_jitter() -> None:
    backoff = Backoff(initial=0.5, maximum=30)
    assert [backoff.delay(n, 1.0) for n in range(1, 9)] == [0.5, 1, 2, 4, 8, 16, 30, 30]
    assert [backoff.delay(n, 0.0) for n in range(1, 4)] == [0.25, 0.5, 1]


def test_backoff_is_applied_between_failures(fake: FakeKube, watching: Watching) -> None:
    cache = ClusterCache()
    pods, _ = watching(cache)
    wait(cache, "synced", lambda c: c.synced)
    with fake.outage():
        fake.wait_for_requests(lambda log: sum("watch=true" in line for line in log) >= 10)
    delays = list(pods.delays)
    assert len(delays) >= 3
    ceilings = [min(0.08, 0.01 * 2**n) for n in range(len(delays))]
    assert all(c / 2 <= d <= c for d, c in zip(delays, ceilings, strict=True)), delays


def test_not_synced_until_both_kinds_are_listed(fake: FakeKube, watching: Watching) -> None:
    cache = ClusterCache()
    with fake.lists_held():
        watching(cache)
        fake.wait_for_requests(lambda log: any("/api/v1/pods?limit" in line for line in log))
        assert not cache.synced
    wait(cache, "synced", lambda c: c.synced)


def test_a_wrong_token_is_an_error_with_backoff(fake: FakeKube, tmp_path: Path) -> None:
    connection = connect(fake.write_kubeconfig(tmp_path / "bad", token="nope"))
    assert connection is not None
    cache = ClusterCache()
    informer = Informer(KubeSource(connection, PODS), cache, backoff=Backoff(0.01, 0.02))
    informer.start()
    try:
        fake.wait_for_requests(lambda log: len(log) >= 3)
        assert "401" in informer.last_error
        assert not cache.synced
    finally:
        informer.stop()


def test_without_any_kubeconfig_there_is_no_connection(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "missing"))
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    assert connect(None) is None


def test_an_explicit_kubeconfig_must_exist(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="does not exist"):
        connect(tmp_path / "missing")


def test_an_unusable_kubeconfig_is_a_config_error(tmp_path: Path) -> None:
    path = tmp_path / "kubeconfig"
    path.write_text("apiVersion: v1\nkind: Config\ncurrent-context: nowhere\n")
    with pytest.raises(ConfigError, match="cannot use kubeconfig"):
        connect(path)
