"""Leader election for the background scan: two contenders, one Lease, the real client, the fake API."""

from __future__ import annotations

import datetime as dt
import queue
import re
from collections.abc import Callable

import pytest

from tests.support.fakekube import FakeKube
from tests.support.patience import PATIENCE
from webhook.cluster import Connection, LeaseStore
from webhook.leader import LEASE_NAME, Leadership, LeaseElector, Timing
from webhook.lease import LeaseSpec, StoredLease, from_wire, micro_time

NAMESPACE = "gpu-system"
TIMING = Timing(lease_seconds=15, renew_deadline=10, retry_seconds=2)
# For contenders on real time: no pause of a busy machine outlasts the renew deadline, and no test
# waits out the lease, so a release is the only way the lease changes hands while a test runs.
LIVE = Timing(lease_seconds=3600, renew_deadline=1800, retry_seconds=0.05)


class Clock:
    """A monotonic clock the test moves by hand: expiry without waiting."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class Interleaved:
    """A LeaseStore that, once armed, runs `between` right after the next read: a race on demand."""

    def __init__(self, store: LeaseStore) -> None:
        self.store = store
        self._between: Callable[[], object] | None = None

    def arm(self, between: Callable[[], object]) -> None:
        self._between = between

    def read(self, name: str) -> StoredLease | None:
        found = self.store.read(name)
        between, self._between = self._between, None
        if between is not None:
            between()
        return found

    def create(self, name: str, spec: LeaseSpec) -> StoredLease:
        return self.store.create(name, spec)

    def replace(self, name: str, spec: LeaseSpec, resource_version: str) -> StoredLease:
        return self.store.replace(name, spec, resource_version)


@pytest.fixture
def store(connection: Connection) -> LeaseStore:
    return LeaseStore(connection, NAMESPACE)


def elector(store: LeaseStore | Interleaved, identity: str, clock: Clock | None = None) -> LeaseElector:
    return LeaseElector(store, identity, timing=TIMING, monotonic=clock or Clock())


def holder(fake: FakeKube) -> str:
    lease = fake.get("leases", NAMESPACE, LEASE_NAME)
    assert lease is not None
    return str(lease["spec"]["holderIdentity"])


def test_exactly_one_of_two_contenders_holds_the_lease(fake: FakeKube, store: LeaseStore) -> None:
    a, b = elector(store, "replica-a"), elector(store, "replica-b")
    for _ in range(3):
        assert a.try_acquire_or_renew() is True
        assert b.try_acquire_or_renew() is False
        assert (a.leading, b.leading) == (True, False)
    assert holder(fake) == "replica-a"
    assert fake.count(r"^POST /apis/coordination.k8s.io/v1/namespaces/gpu-system/leases") == 1
    assert fake.count(r"^PUT /apis/coordination.k8s.io/v1/namespaces/gpu-system/leases/gpu-webhook-scan") == 2


def test_the_lease_is_written_in_the_api_wire_format(fake: FakeKube, store: LeaseStore) -> None:
    elector(store, "replica-a").try_acquire_or_renew()
    lease = fake.get("leases", NAMESPACE, LEASE_NAME)
    assert lease is not None
    assert (lease["apiVersion"], lease["kind"]) == ("coordination.k8s.io/v1", "Lease")
    spec = lease["spec"]
    assert spec["holderIdentity"] == "replica-a" and spec["leaseDurationSeconds"] == 15
    assert spec["leaseTransitions"] == 0
    # What the client sends: six fraction digits always (the API refuses fewer), in UTC.
    micro = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}(Z|\+00:00)$")
    assert micro.match(spec["renewTime"]) and micro.match(spec["acquireTime"])


def test_the_other_takes_over_once_the_lease_has_expired(fake: FakeKube, store: LeaseStore) -> None:
    clock_b = Clock()
    a, b = elector(store, "replica-a"), elector(store, "replica-b", clock_b)
    assert a.try_acquire_or_renew()
    assert not b.try_acquire_or_renew()  # b starts its own count from the lease it saw
    clock_b.now += 14.9
    assert not b.try_acquire_or_renew()  # a stopped renewing, but the lease has not run out
    clock_b.now += 0.2
    assert b.try_acquire_or_renew()
    assert holder(fake) == "replica-b"
    lease = fake.get("leases", NAMESPACE, LEASE_NAME)
    assert lease is not None and lease["spec"]["leaseTransitions"] == 1
    assert not a.try_acquire_or_renew() and not a.leading  # a sees b's fresh renewal and stands down


def test_a_renewing_holder_is_never_overtaken(fake: FakeKube, store: LeaseStore) -> None:
    clock_b = Clock()
    a, b = elector(store, "replica-a"), elector(store, "replica-b", clock_b)
    for _ in range(5):
        assert a.try_acquire_or_renew()
        clock_b.now += 10  # less than the lease between two of a's renewals
        assert not b.try_acquire_or_renew()
    assert holder(fake) == "replica-a"


def test_a_lost_race_to_create_the_lease_is_a_409(fake: FakeKube, store: LeaseStore) -> None:
    racing = Interleaved(store)
    a, b = elector(racing, "replica-a"), elector(store, "replica-b")
    racing.arm(b.try_acquire_or_renew)
    assert a.try_acquire_or_renew() is False  # a read "no lease"; b created it; a's create got 409
    assert (a.leading, b.leading) == (False, True)
    assert holder(fake) == "replica-b" and fake.conflicts == 1


def test_a_lost_race_to_take_over_an_expired_lease_is_a_409(fake: FakeKube, store: LeaseStore) -> None:
    clock_a, clock_b, racing = Clock(), Clock(), Interleaved(store)
    assert elector(store, "replica-old").try_acquire_or_renew()
    a, b = elector(racing, "replica-a", clock_a), elector(store, "replica-b", clock_b)
    assert not a.try_acquire_or_renew() and not b.try_acquire_or_renew()  # both see replica-old's lease
    clock_a.now += 16
    clock_b.now += 16
    racing.arm(b.try_acquire_or_renew)
    assert a.try_acquire_or_renew() is False  # b took it over between a's read and a's write
    assert b.leading and not a.leading
    assert holder(fake) == "replica-b" and fake.conflicts == 1


def test_a_lease_renewed_on_a_whole_second_is_accepted(fake: FakeKube, store: LeaseStore) -> None:
    whole = dt.datetime(2025, 3, 1, 12, 0, 0, tzinfo=dt.UTC)
    a = LeaseElector(store, "replica-a", timing=TIMING, monotonic=Clock(), wall=lambda: whole)
    assert a.try_acquire_or_renew() and a.try_acquire_or_renew()  # the fake refuses unparsable times
    lease = fake.get("leases", NAMESPACE, LEASE_NAME)
    assert lease is not None and lease["spec"]["renewTime"].startswith("2025-03-01T12:00:00.000001")


def test_a_released_lease_is_taken_at_once(fake: FakeKube, store: LeaseStore) -> None:
    a, b = elector(store, "replica-a"), elector(store, "replica-b")
    assert a.try_acquire_or_renew() and not b.try_acquire_or_renew()
    a.release()
    assert not a.leading and holder(fake) == ""
    assert b.try_acquire_or_renew() and holder(fake) == "replica-b"


def test_a_holder_that_cannot_renew_stops_leading_before_the_lease_runs_out(
    fake: FakeKube, store: LeaseStore
) -> None:
    clock = Clock()
    a = elector(store, "replica-a", clock)
    assert a.try_acquire_or_renew()
    with fake.outage():
        clock.now += 5
        assert a.try_acquire_or_renew() is True  # a failed renewal inside the deadline changes nothing
        clock.now += 5
        assert a.try_acquire_or_renew() is False and not a.leading  # 10 s: the renew deadline


def test_two_running_contenders_hand_over_on_stop(fake: FakeKube, store: LeaseStore) -> None:
    changes: queue.Queue[tuple[str, bool]] = queue.Queue()

    def reporter(name: str) -> Callable[[bool], None]:
        return lambda leading: changes.put((name, leading))

    runners = {
        name: Leadership(LeaseElector(store, name, timing=LIVE), reporter(name))
        for name in ("replica-a", "replica-b")
    }
    for runner in runners.values():
        runner.start()
    try:
        first, leading = changes.get(timeout=PATIENCE)
        assert leading
        other = next(n for n in runners if n != first)
        fake.wait_for_requests(lambda log: sum("GET /apis/coordination" in line for line in log) >= 6)
        assert runners[first].leading and not runners[other].leading and holder(fake) == first
        runners[first].stop()
        assert changes.get(timeout=PATIENCE) == (first, False)
        assert changes.get(timeout=PATIENCE) == (other, True)  # released: taken without waiting an hour
        assert holder(fake) == other
    finally:
        for runner in runners.values():
            runner.stop()


def test_the_fake_refuses_a_lease_with_a_time_the_api_cannot_parse(
    fake: FakeKube, connection: Connection
) -> None:
    body = {
        "apiVersion": "coordination.k8s.io/v1",
        "kind": "Lease",
        "metadata": {"name": "x"},
        "spec": {"holderIdentity": "a", "renewTime": dt.datetime(2025, 1, 1, tzinfo=dt.UTC).isoformat()},
    }
    status, document = fake.write("POST", "leases", NAMESPACE, "", body)
    assert (status, document["reason"]) == (422, "Invalid")


@pytest.mark.parametrize(
    ("moment", "text"),
    [
        (dt.datetime(2025, 1, 1, tzinfo=dt.UTC), "2025-01-01T00:00:00.000001Z"),
        (
            dt.datetime(2025, 1, 1, 1, 2, 3, 456, tzinfo=dt.timezone(dt.timedelta(hours=2))),
            "2024-12-31T23:02:03.000456Z",
        ),
    ],
)
def test_micro_time_never_falls_on_a_whole_second(moment: dt.datetime, text: str) -> None:
    assert micro_time(moment) == text


def test_a_lease_with_odd_fields_reads_as_open() -> None:
    lease = from_wire(
        {
            "metadata": {"resourceVersion": "7"},
            "spec": {"holderIdentity": 5, "leaseDurationSeconds": "x", "renewTime": "soon"},
        }
    )
    assert lease == StoredLease(LeaseSpec("", 0, None, None, 0), "7")


def test_a_contender_with_nothing_to_do_hands_the_lease_back(fake: FakeKube, store: LeaseStore) -> None:
    needed = {"now": True}
    changes: queue.Queue[bool] = queue.Queue()
    runner = Leadership(
        LeaseElector(store, "replica-a", timing=LIVE), changes.put, needed=lambda: needed["now"]
    )
    runner.start()
    try:
        assert changes.get(timeout=PATIENCE) is True
        needed["now"] = False
        assert changes.get(timeout=PATIENCE) is False
        assert holder(fake) == ""  # handed back, so another replica with work need not wait
        needed["now"] = True
        assert changes.get(timeout=PATIENCE) is True
        assert holder(fake) == "replica-a"
    finally:
        runner.stop()
