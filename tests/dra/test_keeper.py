"""The ResourceClaimTemplate keeper's passes and its loop's timing, with an in-memory writer and a
stepped clock: when a pass runs, how far it writes, and how it backs off after a failure."""

from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import pytest

from tests.support.policies import sharing_policy
from webhook.errors import ClusterError, Conflict
from webhook.keeper.loop import KeeperLoop, TemplateKeeper, World
from webhook.policy.model import PolicySet

POLICY = sharing_policy("match: {namespaces: [team-*]}\nsharing: {mode: dra, maxGpusPerPod: 4}", name="whole")
POLICIES = PolicySet(version="v1", sharing=(POLICY,))
LABELS = {"kubernetes.io/metadata.name": "team-a"}


@dataclass
class Writer:
    """What the API would hold; `fail` makes every write raise it."""

    objects: dict[tuple[str, str], dict[str, Any]] = field(default_factory=dict)
    fail: Exception | None = None
    calls: int = 0

    def create(self, body: Mapping[str, Any]) -> None:
        self._write(body)

    def replace(self, body: Mapping[str, Any]) -> None:
        self._write(body)

    def delete(self, namespace: str, name: str, resource_version: str) -> None:
        self.calls += 1
        if self.fail:
            raise self.fail
        self.objects.pop((namespace, name), None)

    def _write(self, body: Mapping[str, Any]) -> None:
        self.calls += 1
        if self.fail:
            raise self.fail
        meta = body["metadata"]
        self.objects[(meta["namespace"], meta["name"])] = copy.deepcopy(dict(body))


@dataclass
class Cluster:
    writer: Writer = field(default_factory=Writer)
    namespaces: dict[str, Mapping[str, str]] = field(default_factory=lambda: {"team-a": LABELS})
    ready: bool = True

    def world(self) -> World:
        return World(POLICIES, dict(self.namespaces), tuple(self.writer.objects.values()), self.ready)

    def fingerprint(self) -> tuple[object, ...]:
        return (sorted(self.namespaces), len(self.writer.objects))


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def _loop(cluster: Cluster, clock: Clock, max_writes: int = 50) -> KeeperLoop:
    keeper = TemplateKeeper(cluster.world, cluster.writer, max_writes=max_writes)
    return KeeperLoop(keeper, cluster.fingerprint, interval=60.0, monotonic=clock)


def test_nothing_is_written_before_the_cache_is_ready() -> None:
    cluster = Cluster(ready=False)
    assert _loop(cluster, Clock()).step() is None
    assert cluster.writer.calls == 0


def test_a_pass_creates_every_needed_template_then_rests_until_something_changes() -> None:
    cluster, clock = Cluster(), Clock()
    loop = _loop(cluster, clock)
    result = loop.step()
    assert result is not None and result.written == {"create/ok": 4}
    echo = loop.step()  # its own writes come back through the watch: a pass that writes nothing
    assert echo is not None and echo.written == {} and cluster.writer.calls == 4
    assert loop.step() is None  # nothing changed: no pass at all
    cluster.namespaces["team-b"] = {"kubernetes.io/metadata.name": "team-b"}
    result = loop.step()
    assert result is not None and result.written == {"create/ok": 4}
    assert len(cluster.writer.objects) == 8


def test_a_pass_runs_again_after_the_interval_even_if_nothing_changed() -> None:
    cluster, clock = Cluster(), Clock()
    loop = _loop(cluster, clock)
    while loop.step() is not None:  # until its own writes have come back
        pass
    clock.now += 59
    assert loop.step() is None
    clock.now += 1
    assert loop.step() is not None


def test_large_plans_are_spread_over_ticks() -> None:
    cluster, clock = Cluster(), Clock()
    loop = _loop(cluster, clock, max_writes=3)
    first = loop.step()
    assert first is not None and (first.written, first.left_over) == ({"create/ok": 3}, 1)
    second = loop.step()  # the very next tick
    assert second is not None and (second.written, second.left_over) == ({"create/ok": 1}, 0)


@pytest.mark.parametrize(
    ("error", "tally", "held"),
    [
        (ClusterError("create resourceclaimtemplate: HTTP 403 Forbidden"), "create/error", True),
        (Conflict("create resourceclaimtemplate: HTTP 409 AlreadyExists"), "create/conflict", False),
    ],
)
def test_after_a_failed_write_the_next_pass_waits_for_the_interval(
    error: Exception, tally: str, held: bool
) -> None:
    cluster, clock = Cluster(), Clock()
    cluster.writer.fail = error
    loop = _loop(cluster, clock)
    result = loop.step()
    assert result is not None and result.written == {tally: 4} and result.failed is held
    cluster.namespaces["team-b"] = {}  # a change would normally start a pass at once
    assert (loop.step() is None) is held
    clock.now += 60
    cluster.writer.fail = None
    assert loop.step() is not None


def test_a_keeper_that_raises_keeps_its_loop() -> None:
    cluster, clock = Cluster(), Clock()

    def broken() -> World:
        raise RuntimeError("bug")

    loop = KeeperLoop(TemplateKeeper(broken, cluster.writer), cluster.fingerprint, 60.0, monotonic=clock)
    result = loop.step()
    assert result is not None and result.failed
