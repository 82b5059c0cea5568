"""The scan's judgement of one object, its run over a snapshot, and its records, without processes."""

from __future__ import annotations

import copy
import datetime as dt
from collections.abc import Mapping, Sequence
from typing import Any, cast

import pytest
import yaml

from tests.conftest import BUNDLED_POLICIES
from tests.support.reviews import make_review
from tests.support.workloads import (
    CANARIES,
    ENV_CANARY,
    ESCAPES,
    INVENTORY,
    namespace,
    pod,
    workload,
)
from webhook.admission import check_request
from webhook.audit.redact import REDACTED
from webhook.decision import Finding
from webhook.inventory import parse_inventory
from webhook.policy.loader import load_directory
from webhook.policy.model import PolicySet
from webhook.review import ReviewDeps, ReviewSettings, review
from webhook.scan import run as scan_run
from webhook.scan.judge import Judgement, judge, scan_request
from webhook.scan.kinds import scan_kind
from webhook.scan.records import object_record
from webhook.scan.sources import Snapshot, from_inventory
from webhook.scan.stream import BATCH, scan_once

SETTINGS = ReviewSettings(excluded_namespaces=("kube-system", "gpu-system"))
NOW = dt.datetime(2025, 3, 1, 12, 0, tzinfo=dt.UTC)


@pytest.fixture(scope="module")
def policies() -> PolicySet:
    return load_directory(BUNDLED_POLICIES / "security")


def deps(policies: PolicySet) -> ReviewDeps:
    return ReviewDeps(policies=policies, settings=SETTINGS)


def findings(obj: dict[str, Any], policies: PolicySet) -> set[str]:
    kind = scan_kind(obj)
    assert kind is not None
    return {f.policy for f in judge(obj, kind, deps(policies)).findings}


# What binding, schedulers and administrators write after admission: a scan must not blame the
# object's author for it, though a CREATE with the same content is refused (see the next test).
AFTER_ADMISSION = [
    ("scheduled pod", pod("bound", nodeName="gpu-node-1")),
    (
        "pod allocated by HAMi",
        pod("allocated", meta={"annotations": {"hami.io/vgpu-devices-allocated": "GPU-0,1"}}),
    ),
    ("namespace exempted by an administrator", namespace("team", **{"gpuwebhook.io/ignore": "true"})),
]


@pytest.mark.parametrize(("what", "obj"), AFTER_ADMISSION, ids=[w for w, _ in AFTER_ADMISSION])
def test_state_written_after_admission_is_not_a_finding(
    policies: PolicySet, what: str, obj: dict[str, Any]
) -> None:
    assert findings(obj, policies) == set()
    created = check_request(make_review(obj, username="alice@example.com")["request"])
    assert not review(created, "validate", deps(policies)).allowed, "the case must matter on CREATE"


TEMPLATES = [
    (workload("Deployment", "pinned", nodeName="gpu-node-1"), "gpu-no-preset-node-name"),
    (
        workload("Job", "forged", template_annotations={"run.ai/allocated": "x"}, restartPolicy="Never"),
        "gpu-scheduler-owned-annotations",
    ),
]


@pytest.mark.parametrize(("obj", "policy"), TEMPLATES, ids=[p for _, p in TEMPLATES])
def test_a_workload_template_is_judged_as_applied_again(
    policies: PolicySet, obj: dict[str, Any], policy: str
) -> None:
    assert findings(obj, policies) == {policy}


@pytest.mark.parametrize("case", [c for c in ESCAPES if c.obj["kind"] != "Pod"], ids=lambda c: c.key[2])
def test_a_workload_is_judged_as_validate_judges_its_create(policies: PolicySet, case: Any) -> None:
    """The same object: the scan finds what /validate finds on its CREATE, policy by policy (the
    messages may differ where they name the user: Gatekeeper's audit review has none)."""
    kind = scan_kind(case.obj)
    assert kind is not None
    scanned = judge(case.obj, kind, deps(policies))
    request = cast(dict[str, Any], scan_request(case.obj, kind))
    admitted = review(check_request({**request, "uid": "x"}), "validate", deps(policies))
    assert [(f.policy, f.action) for f in scanned.findings] == [
        (f.policy, f.action) for f in admitted.findings
    ]
    assert not admitted.allowed


def test_a_malformed_gpu_pod_is_a_deny_finding(policies: PolicySet) -> None:
    obj = pod("odd", terminationGracePeriodSeconds="thirty")
    kind = scan_kind(obj)
    assert kind is not None
    judged = judge(obj, kind, deps(policies))
    assert judged.denied
    assert [(f.policy, f.action) for f in judged.findings] == [("gpu-builtin/shape", "deny")]
    assert "terminationGracePeriodSeconds must be an integer" in judged.findings[0].message


def snapshot_of(objects: Sequence[dict[str, Any]]) -> Snapshot:
    return from_inventory(parse_inventory(yaml.safe_dump_all(list(objects)), "test"))


def test_an_object_review_cannot_judge_is_denied_and_the_scan_goes_on(
    policies: PolicySet, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = judge

    def flaky(obj: dict[str, Any], kind: Any, deps: ReviewDeps) -> Judgement:
        if obj["metadata"]["name"] == "breaks":
            raise RuntimeError(f"boom near {ENV_CANARY}")
        return real(obj, kind, deps)

    monkeypatch.setattr(scan_run, "judge", flaky)
    objects = [pod("before"), pod("breaks"), pod("after", hostPID=True)]
    outcome = scan_once(snapshot_of(objects), policies, SETTINGS, keep=True)
    assert outcome.summary.objects == 3 and outcome.summary.unreviewable == 1
    assert [(r["name"], [f["policy"] for f in r["findings"]]) for r in outcome.objects] == [
        ("breaks", ["gpu-webhook/scan"]),
        ("after", ["gpu-no-host-namespaces"]),
    ]
    assert ENV_CANARY not in str(outcome.objects)
    assert "could not be reviewed: internal error (ref " in outcome.objects[0]["findings"][0]["message"]


def test_a_run_stops_between_objects_when_told(policies: PolicySet) -> None:
    calls = iter([True, True, False])
    outcome = scan_once(
        snapshot_of([pod(f"p{i}", hostPID=True) for i in range(5)]),
        policies,
        SETTINGS,
        keep_going=lambda: next(calls),
    )
    assert outcome.summary.objects == 2
    assert not outcome.summary.complete and outcome.summary_record["complete"] is False


def test_records_stream_to_the_sink_in_batches_ending_with_the_summary(policies: PolicySet) -> None:
    batches: list[list[Mapping[str, Any]]] = []
    objects = [pod(f"p{i}", hostPID=True) for i in range(BATCH + 3)]
    outcome = scan_once(snapshot_of(objects), policies, SETTINGS, sink=lambda b: batches.append(list(b)))
    assert [len(b) for b in batches] == [BATCH, 4]
    assert [r["scope"] for r in batches[-1]] == ["object"] * 3 + ["summary"]
    assert batches[-1][-1] == outcome.summary_record
    assert {r["scan"] for b in batches for r in b} == {outcome.summary.scan_id}


def test_an_object_record_names_the_object_and_scrubs_every_message() -> None:
    obj = copy.deepcopy(pod("leaky"))
    obj["metadata"]["ownerReferences"] = [
        {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web-5d9f", "controller": True, "uid": "u"}
    ]
    obj["metadata"]["annotations"]["gpuwebhook.io/sharing"] = "timeslice"
    kind = scan_kind(obj)
    assert kind is not None
    message = f"env says {ENV_CANARY}, an annotation says {CANARIES[1]}"
    judged = Judgement(kind, obj, "ml", "leaky", (Finding("quoting", "warn", message),), allowed=True)
    record = object_record(judged, scan_id="s1", now=NOW, instance="i", policy_version="v")
    assert record["findings"] == [
        {
            "policy": "quoting",
            "action": "warn",
            "message": f"env says {REDACTED}, an annotation says {REDACTED}",
        }
    ]
    assert record["owner"] == "ReplicaSet/web-5d9f"
    assert record["annotations"] == {"gpuwebhook.io/sharing": "timeslice"}
    assert (record["type"], record["scope"], record["decision"], record["operation"]) == (
        "scan",
        "object",
        "warned",
        "UPDATE",
    )
    assert record["time"] == "2025-03-01T12:00:00.000Z"


def test_every_inventory_object_of_a_scanned_kind_is_judged_once(policies: PolicySet) -> None:
    outcome = scan_once(snapshot_of(INVENTORY), policies, SETTINGS)
    scanned = [o for o in INVENTORY if scan_kind(o) is not None]
    assert outcome.summary.objects + outcome.summary.skipped == len(scanned)
