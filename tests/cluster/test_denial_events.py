"""--emit-denial-events: Events shaped as Gatekeeper's --emit-admission-events writes them
(pkg/webhook/policy.go: Warning, FailedAdmission, Gatekeeper's annotation keys), rate-limited
and aggregated, written through webhook.cluster to the fake API server."""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import orjson
import pytest

from tests.cluster.test_serve_cluster import serve
from tests.support.fakekube import FakeKube
from tests.support.pods import gpu_pod
from tests.support.reviews import make_review
from tests.support.schema import assert_valid
from webhook import events
from webhook.cluster import Connection, EventStore
from webhook.decision import Finding, deny
from webhook.events import AGGREGATE_SECONDS, BURST, REFILL_PER_SECOND, DenialEvents, denials_of
from webhook.types import AdmissionRequest

SECRET = "s3cr3t-token-value"
STAMP = dt.datetime(2025, 1, 2, 3, 4, 5, tzinfo=dt.UTC)


class Recorder:
    namespace = "gpu-system"

    def __init__(self) -> None:
        self.created: list[dict[str, Any]] = []
        self.patched: list[tuple[str, dict[str, Any]]] = []

    def create(self, body: Mapping[str, Any]) -> None:
        self.created.append(dict(body))

    def patch(self, name: str, body: Mapping[str, Any]) -> None:
        self.patched.append((name, dict(body)))


def _request(name: str = "train", namespace: str = "ml") -> AdmissionRequest:
    pod = gpu_pod(name, namespace=namespace)
    pod["spec"]["containers"][0]["env"] = [{"name": "TOKEN", "value": SECRET}]
    request: AdmissionRequest = make_review(pod)["request"]
    return request


DENIED = deny(
    f"[gpu-no-privileged-containers] TOKEN={SECRET}",
    findings=(
        Finding("gpu-no-privileged-containers", "deny", f"TOKEN={SECRET}"),
        Finding("gpu-no-privileged-containers", "deny", "a second violation of the same policy"),
        Finding("gpu-max-per-pod", "deny", "too many"),
        Finding("advice", "warn", "only a warning"),
    ),
)


def _sender(recorder: Recorder) -> tuple[DenialEvents, list[str]]:
    dropped: list[str] = []
    return DenialEvents(recorder, clock=lambda: 0.0, wall=lambda: STAMP, on_dropped=dropped.append), dropped


def test_one_event_per_denying_policy_naming_the_resource_never_the_finding() -> None:
    recorder = Recorder()
    sender, dropped = _sender(recorder)
    for denial in denials_of(_request(), "validate", DENIED):
        sender.handle(denial, 0.0)
    assert [e["metadata"]["annotations"]["constraint_name"] for e in recorder.created] == [
        "gpu-no-privileged-containers",
        "gpu-max-per-pod",
    ]
    event = recorder.created[0]
    assert (event["type"], event["reason"], event["count"]) == ("Warning", "FailedAdmission", 1)
    assert event["involvedObject"] == {
        "kind": "Pod",
        "name": "train",
        "namespace": "gpu-system",
        "apiVersion": "v1",
    }
    assert event["metadata"]["annotations"]["resource_namespace"] == "ml"
    assert "Pod ml/train, policy gpu-no-privileged-containers" in event["message"]
    assert SECRET not in orjson.dumps(recorder.created).decode() and not dropped
    for body in recorder.created:
        assert_valid(body)


def test_repeats_raise_the_count_of_the_event_already_written() -> None:
    recorder = Recorder()
    sender, _ = _sender(recorder)
    [denial] = denials_of(_request(), "validate", deny("x", findings=(Finding("p", "deny", "x"),)))
    for second in range(5):
        sender.handle(denial, float(second))
    sender.flush(5.0)
    sender.flush(6.0)  # nothing new: nothing written
    [created] = recorder.created
    assert recorder.patched == [
        (created["metadata"]["name"], {"count": 5, "lastTimestamp": "2025-01-02T03:04:05Z"})
    ]
    sender.handle(denial, 5.0 + AGGREGATE_SECONDS)  # a repeat after the window starts a new Event
    assert len(recorder.created) == 2


def test_the_bucket_bounds_writes_and_refills() -> None:
    recorder = Recorder()
    sender, dropped = _sender(recorder)
    for index in range(BURST + 3):
        for denial in denials_of(
            _request(f"pod-{index}"), "validate", deny("x", findings=(Finding("p", "deny", "x"),))
        ):
            sender.handle(denial, 0.0)
    assert len(recorder.created) == BURST and dropped == ["rate limited"] * 3
    [later] = denials_of(_request("later"), "validate", deny("x", findings=(Finding("p", "deny", "x"),)))
    sender.handle(later, 1 / REFILL_PER_SECOND)
    assert len(recorder.created) == BURST + 1


def test_the_request_path_only_queues_and_drops_when_full() -> None:
    recorder = Recorder()
    sender, dropped = _sender(recorder)
    for _ in range(events.QUEUE_SIZE // 2 + 1):
        sender.offer(_request(), "validate", DENIED)  # two policies each
    assert not recorder.created and dropped == ["queue full"] * 2


def test_the_store_writes_events_the_api_server_accepts(fake: FakeKube, connection: Connection) -> None:
    store = EventStore(connection, "gpu-system")
    sender = DenialEvents(store, clock=lambda: 0.0, wall=lambda: STAMP)
    [denial] = denials_of(_request(), "mutate", deny("x", findings=(Finding("p", "deny", "x"),)))
    sender.handle(denial, 0.0)
    sender.handle(denial, 1.0)
    sender.flush(2.0)
    [stored] = _events(fake)
    assert stored["count"] == 2 and stored["reason"] == "FailedAdmission"
    assert fake.count(r"^POST /api/v1/namespaces/gpu-system/events") == 1
    assert fake.count(r"^PATCH /api/v1/namespaces/gpu-system/events/") == 1


def test_an_event_the_api_server_refuses_is_dropped_and_counted(connection: Connection) -> None:
    """The fake refuses an involved object in another namespace, as the legacy validation does."""
    dropped: list[str] = []
    sender = DenialEvents(EventStore(connection, "gpu-system"), on_dropped=dropped.append)
    body = events.event_body(denials_of(_request(), "validate", DENIED)[0], "e", "gpu-system", STAMP)
    body["involvedObject"]["namespace"] = "ml"
    assert sender._send(lambda: sender.writer.create(body)) is False
    assert dropped == ["write failed"]


def _events(fake: FakeKube) -> list[dict[str, Any]]:
    return [o for (resource, _, _), o in fake._objects.items() if resource == "events"]


@pytest.mark.slow
def test_a_served_denial_becomes_an_event(cert_dir: Path, tmp_path: Path) -> None:
    fake = FakeKube().start()
    try:
        kubeconfig = str(fake.write_kubeconfig(tmp_path / "kubeconfig"))
        server = serve(
            cert_dir,
            tmp_path,
            "--kubeconfig",
            kubeconfig,
            "--namespace",
            "gpu-system",
            "--emit-denial-events",
            "true",
        )
        try:
            pod = gpu_pod("train", namespace="ml")
            pod["spec"]["containers"][0]["securityContext"] = {"privileged": True}
            pod["spec"]["containers"][0]["env"] = [{"name": "TOKEN", "value": SECRET}]
            reply: dict[str, Any] = server.client().post_json("/validate", make_review(pod)).json()
            assert reply["response"]["allowed"] is False
            fake.wait_for_requests(
                lambda log: any(line.startswith("POST /api/v1/namespaces/gpu-system/events") for line in log)
            )
            [event] = _events(fake)
            assert event["metadata"]["annotations"]["constraint_name"] == "gpu-no-privileged-containers"
            assert SECRET not in orjson.dumps(event).decode()
        finally:
            server.stop()
    finally:
        fake.stop()
