"""`serve` with a cluster: the replica holding the Lease keeps mode dra's ResourceClaimTemplates in place.

Admission creates nothing: the rewrite only names templates. This keeper makes them exist, in
every namespace a dra policy can match, by the plan of webhook.dra.sync. It reads what exists
from the watch cache and writes through the API, so its own writes come back to it through
the watch. A pass runs when the inputs changed (policy set, namespaces and their labels, DRA
objects), when a pass left writes over, on gaining the Lease, and at least every `interval`.
A pass writes at most `max_writes` objects, so a first install over many namespaces is spread
over several ticks. After a pass in which a write failed (RBAC, a namespace being deleted)
the next one waits for the interval, so a cause that persists is not retried every tick.
"""

from __future__ import annotations

import datetime as dt
import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from webhook.dra import sync, templates
from webhook.dra.index import Key, object_key
from webhook.errors import ClusterError, Conflict
from webhook.leader import LeaderLoop, LeaseElector
from webhook.policy.model import PolicySet
from webhook.types import KubeObject

log = logging.getLogger("webhook.dra")
LEASE_NAME = "gpu-webhook-dra-templates"
TICK_SECONDS = 2.0
MAX_WRITES = 50


class TemplateWriter(Protocol):
    def create(self, body: Mapping[str, Any]) -> None: ...

    def replace(self, body: Mapping[str, Any]) -> None: ...

    def delete(self, namespace: str, name: str, resource_version: str) -> None: ...


@dataclass(frozen=True)
class World:
    """What one pass reads: the policy set, managed namespaces with labels, existing templates."""

    policies: PolicySet
    namespaces: Mapping[str, Mapping[str, str]]
    existing: tuple[KubeObject, ...]
    ready: bool  # the cache has listed namespaces and templates: absence is a fact


@dataclass
class PassResult:
    written: dict[str, int] = field(default_factory=dict)  # "action/result" -> count
    conflicts: tuple[str, ...] = ()
    left_over: int = 0
    failed: bool = False


class Wanted:
    """templates.needed per namespace, remembered per policy set version and namespace labels:
    naming a template hashes its spec, and a pass may ask for thousands."""

    def __init__(self) -> None:
        self._version = ""
        self._memo: dict[tuple[str, tuple[tuple[str, str], ...]], list[dict[str, Any]]] = {}

    def __call__(self, world: World) -> dict[Key, dict[str, Any]]:
        if world.policies.version != self._version:
            self._version, self._memo = world.policies.version, {}
        if not any(p.sharing.mode == "dra" for p in world.policies.sharing):
            return {}
        wanted: dict[Key, dict[str, Any]] = {}
        for namespace, labels in world.namespaces.items():
            memo_key = (namespace, tuple(sorted(labels.items())))
            found = self._memo.get(memo_key)
            if found is None:
                found = self._memo[memo_key] = templates.needed(world.policies.sharing, namespace, labels)
            wanted.update(((namespace, t["metadata"]["name"]), t) for t in found)
        return wanted


class TemplateKeeper:
    def __init__(
        self,
        world: Callable[[], World],
        writer: TemplateWriter,
        *,
        max_writes: int = MAX_WRITES,
        grace_seconds: float = sync.GRACE_SECONDS,
        wall: Callable[[], dt.datetime] = lambda: dt.datetime.now(dt.UTC),
        on_write: Callable[[str, str], None] = lambda action, result: None,
    ) -> None:
        self._world = world
        self._writer = writer
        self._max_writes = max_writes
        self._grace_seconds = grace_seconds
        self._wall = wall
        self._on_write = on_write
        self._wanted = Wanted()
        self.conflicts: tuple[str, ...] = ()

    def run_once(self) -> PassResult | None:
        """One pass; None when the cache is not ready (nothing can be called missing yet)."""
        world = self._world()
        if not world.ready:
            return None
        managed = set(world.namespaces)
        existing = {object_key(o): o for o in world.existing if object_key(o)[1]}
        plan = sync.plan(
            self._wanted(world), existing, managed.__contains__, self._wall(), self._grace_seconds
        )
        result = PassResult(conflicts=plan.conflicts, left_over=max(0, len(plan.writes) - self._max_writes))
        for write in plan.writes[: self._max_writes]:
            outcome = self._apply(write)
            tally = f"{write.action}/{outcome}"
            result.written[tally] = result.written.get(tally, 0) + 1
            result.failed |= outcome == "error"
        if plan.conflicts and plan.conflicts != self.conflicts:
            log.warning(
                "ResourceClaimTemplates that mode dra needs are held by objects that are not ours",
                extra={"templates": ", ".join(plan.conflicts[:10]), "count": len(plan.conflicts)},
            )
        self.conflicts = plan.conflicts
        return result

    def _apply(self, write: sync.Write) -> str:
        facts = {"action": write.action, "template": write.key, "reason": write.reason}
        try:
            if write.action == "create":
                assert write.body is not None
                self._writer.create(write.body)
            elif write.action == "update":
                assert write.body is not None
                self._writer.replace(write.body)
            else:
                self._writer.delete(write.namespace, write.name, write.resource_version)
        except Conflict:
            outcome = "conflict"  # someone wrote first; the watch brings the news, the next pass decides
        except ClusterError as e:
            log.warning("ResourceClaimTemplate not written", extra={**facts, "error": str(e)})
            outcome = "error"
        else:
            log.info("ResourceClaimTemplate written", extra=facts)
            outcome = "ok"
        self._on_write(write.action, outcome)
        return outcome


class KeeperLoop:
    """Runs passes in a thread while this replica holds the Lease (always, without an elector)."""

    def __init__(
        self,
        keeper: TemplateKeeper,
        fingerprint: Callable[[], tuple[object, ...]],
        interval: float,
        *,
        elector: LeaseElector | None = None,
        needed: Callable[[], bool] = lambda: True,
        tick: float = TICK_SECONDS,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self.keeper = keeper
        self.interval = interval
        self._fingerprint = fingerprint
        self._monotonic = monotonic
        self._last: tuple[object, ...] | None = None
        self._next_at = 0.0
        self._held_until = 0.0
        self._loop = LeaderLoop(
            "dra-templates",
            self.step,
            tick,
            elector=elector,
            label="dra-templates",
            duty="the ResourceClaimTemplate keeper",
            needed=needed,
            on_gain=self._forget,
        )

    @property
    def leading(self) -> bool:
        return self._loop.leading

    def start(self) -> None:
        self._loop.start()

    def stop(self) -> None:
        self._loop.stop()

    def due(self) -> bool:
        """Whether a pass should run now: inputs changed, or its time has come; after a failed
        pass, not before the interval is over."""
        now = self._monotonic()
        if now < self._held_until:
            return False
        return now >= self._next_at or self._fingerprint() != self._last

    def step(self) -> PassResult | None:
        """One tick: a pass if due and leading. Threads aside, what the loop does."""
        if not self.leading or not self.due():
            return None
        fingerprint = self._fingerprint()
        try:
            result = self.keeper.run_once()
        except Exception as e:  # a bug or a broken input must not end the thread
            log.error("ResourceClaimTemplate pass failed", extra={"error_type": type(e).__name__})
            result = PassResult(failed=True)
        if result is None:
            return None
        now = self._monotonic()
        self._last = None if result.left_over and not result.failed else fingerprint
        self._next_at = now + self.interval
        self._held_until = now + self.interval if result.failed else 0.0
        return result

    def _forget(self) -> None:
        """Leadership gained: what this replica did when it last led may be out of date."""
        self._last, self._held_until = None, 0.0
