"""Leader election with a coordination.k8s.io/v1 Lease: only one replica runs the background scan.

The algorithm of client-go's leaderelection, kept small:
- a missing Lease is created with us as holder; another replica creating it first
  answers 409 AlreadyExists, and we lost;
- a Lease held by another replica is left alone until it has not changed for its
  `leaseDurationSeconds`, measured on our own monotonic clock from when we saw it
  change (so clock skew between nodes does not matter); then we take it over;
- every write carries the resourceVersion we read, so of two replicas that both see
  an expired Lease, one update wins and the other gets 409 Conflict;
- the holder renews every `retry_seconds` and believes itself leader only until
  `renew_deadline` after its last successful renewal, which is shorter than the
  lease: a holder that cannot reach the API stops scanning before anyone takes over.
On a graceful stop the holder releases the Lease (empty holder) so a successor need not wait.
"""

from __future__ import annotations

import datetime as dt
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from webhook.errors import ClusterError, Conflict
from webhook.lease import LeaseSpec, StoredLease

log = logging.getLogger("webhook.scan")
LEASE_NAME = "gpu-webhook-scan"


class LeaseStore(Protocol):
    def read(self, name: str) -> StoredLease | None: ...

    def create(self, name: str, spec: LeaseSpec) -> StoredLease: ...

    def replace(self, name: str, spec: LeaseSpec, resource_version: str) -> StoredLease: ...


@dataclass(frozen=True)
class Timing:
    lease_seconds: int = 15
    renew_deadline: float = 10.0
    retry_seconds: float = 2.0

    def __post_init__(self) -> None:
        if not 0 < self.retry_seconds < self.renew_deadline < self.lease_seconds:
            raise ValueError("need 0 < retry_seconds < renew_deadline < lease_seconds")


class LeaseElector:
    def __init__(
        self,
        store: LeaseStore,
        identity: str,
        *,
        name: str = LEASE_NAME,
        timing: Timing = Timing(),
        monotonic: Callable[[], float] = time.monotonic,
        wall: Callable[[], dt.datetime] = lambda: dt.datetime.now(dt.UTC),
    ) -> None:
        self.store = store
        self.identity = identity
        self.name = name
        self.timing = timing
        self._monotonic = monotonic
        self._wall = wall
        self._seen: tuple[str, float] | None = None  # (resourceVersion, when we saw it appear)
        self._renewed_at: float | None = None

    @property
    def leading(self) -> bool:
        renewed = self._renewed_at
        return renewed is not None and self._monotonic() - renewed < self.timing.renew_deadline

    def try_acquire_or_renew(self) -> bool:
        started = self._monotonic()
        try:
            current = self.store.read(self.name)
            if current is None:
                return self._won(self.store.create(self.name, self._next(None)), started)
            self._observe(current, started)
            if self._held_elsewhere(current, started):
                self._renewed_at = None
                return False
            written = self.store.replace(self.name, self._next(current.spec), current.resource_version)
            return self._won(written, started)
        except Conflict:
            self._renewed_at = None  # another replica wrote first: it leads
            return False
        except ClusterError as e:
            log.warning("scan lease not renewed", extra={"lease": self.name, "error": str(e)})
            return self.leading

    def release(self) -> None:
        """Hand the Lease back (empty holder), so the next replica takes it at its next try."""
        if not self.leading:
            return
        self._renewed_at = None
        try:
            current = self.store.read(self.name)
            if current is not None and current.spec.holder == self.identity:
                now = self._wall()
                spec = LeaseSpec("", 1, now, now, current.spec.transitions)
                self.store.replace(self.name, spec, current.resource_version)
        except ClusterError as e:
            log.warning("scan lease not released", extra={"lease": self.name, "error": str(e)})

    def _won(self, written: StoredLease, started: float) -> bool:
        self._observe(written, started)
        self._renewed_at = started
        return True

    def _observe(self, lease: StoredLease, now: float) -> None:
        if self._seen is None or self._seen[0] != lease.resource_version:
            self._seen = (lease.resource_version, now)

    def _held_elsewhere(self, lease: StoredLease, now: float) -> bool:
        holder = lease.spec.holder
        if not holder or holder == self.identity:
            return False
        assert self._seen is not None
        duration = lease.spec.duration_seconds or self.timing.lease_seconds
        return now - self._seen[1] < duration

    def _next(self, previous: LeaseSpec | None) -> LeaseSpec:
        now, seconds = self._wall(), self.timing.lease_seconds
        if previous is not None and previous.holder == self.identity:
            acquired = previous.acquire_time or now
            return LeaseSpec(self.identity, seconds, acquired, now, previous.transitions)
        transitions = previous.transitions + 1 if previous is not None else 0
        return LeaseSpec(self.identity, seconds, now, now, transitions)


class Leadership:
    """Runs an elector in its own thread; `on_change(leading)` hears every gain and loss. `label`
    and `duty` name the lease and what its holder does, for the log. While `needed()` is false
    (there is no duty to do) it hands the Lease back and stays out of the election."""

    def __init__(
        self,
        elector: LeaseElector,
        on_change: Callable[[bool], None] = lambda _: None,
        *,
        label: str = "scan",
        duty: str = "the background scan",
        needed: Callable[[], bool] = lambda: True,
    ) -> None:
        self.elector = elector
        self.label = label
        self.duty = duty
        self._needed = needed
        self._on_change = on_change
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"lease-{elector.name}", daemon=True)
        self._leading = False

    @property
    def leading(self) -> bool:
        return self.elector.leading

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join()
        self.elector.release()
        self._changed(False)

    def _run(self) -> None:
        while not self._stop.is_set():
            if self._needed():
                self._changed(self.elector.try_acquire_or_renew())
            else:
                self.elector.release()
                self._changed(False)
            self._stop.wait(self.elector.timing.retry_seconds)

    def _changed(self, leading: bool) -> None:
        if leading == self._leading:
            return
        self._leading = leading
        facts = {"lease": self.elector.name, "holder": self.elector.identity}
        if leading:
            log.info("%s lease acquired: this replica runs %s", self.label, self.duty, extra=facts)
        else:
            log.info("%s lease given up or lost: another replica runs %s", self.label, self.duty, extra=facts)
        self._on_change(leading)


class LeaderLoop:
    """A daemon thread that calls `work()` while this replica leads (always, without an elector),
    then rests `every` seconds or until woken: by stop, and by gaining the Lease, which first
    calls `on_gain()`. What the scan and the ResourceClaimTemplate keeper share."""

    def __init__(
        self,
        name: str,
        work: Callable[[], object],
        every: float,
        *,
        elector: LeaseElector | None = None,
        label: str = "scan",
        duty: str = "the background scan",
        needed: Callable[[], bool] = lambda: True,
        on_gain: Callable[[], None] = lambda: None,
        join_seconds: float = 10.0,
    ) -> None:
        self.every = every
        self.stopping = threading.Event()  # set by stop(): work may rest on it, and end early
        self.leadership = (
            Leadership(elector, self._woken, label=label, duty=duty, needed=needed)
            if elector is not None
            else None
        )
        self._work = work
        self._on_gain = on_gain
        self._join_seconds = join_seconds
        self._wake = threading.Event()
        self._thread = threading.Thread(target=self._loop, name=name, daemon=True)

    @property
    def leading(self) -> bool:
        return self.leadership is None or self.leadership.leading

    def start(self) -> None:
        if self.leadership is not None:
            self.leadership.start()
        self._thread.start()

    def stop(self) -> None:
        self.stopping.set()
        self._wake.set()
        if self._thread.is_alive():
            self._thread.join(self._join_seconds)
        if self.leadership is not None:
            self.leadership.stop()

    def _woken(self, leading: bool) -> None:
        if leading:
            self._on_gain()
            self._wake.set()

    def _loop(self) -> None:
        while not self.stopping.is_set():
            if self.leading:
                self._work()
            self._wake.wait(self.every)
            self._wake.clear()
