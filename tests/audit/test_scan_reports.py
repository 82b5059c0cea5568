"""A scan's findings as wgpolicyk8s.io/v1alpha2 and openreports.io/v1alpha1 reports, without processes.

Every report is checked against the CRDs' schemas (tests/support/report_crds.py)."""

from __future__ import annotations

import copy
import datetime as dt
from collections import Counter
from typing import Any

import pytest
import yaml

from tests.conftest import BUNDLED_POLICIES
from tests.support.report_crds import assert_valid_report
from tests.support.workloads import CANARIES, ESCAPES, INVENTORY
from webhook.inventory import parse_inventory
from webhook.policy.loader import load_directory
from webhook.policy.model import PolicySet
from webhook.review import ReviewSettings
from webhook.scan.output import render
from webhook.scan.reports import (
    MAX_RESULTS,
    OMITTED_ANNOTATION,
    REPORT_NAME,
    Entry,
    Flavour,
    build_reports,
    rules_of,
)
from webhook.scan.sources import from_inventory
from webhook.scan.stream import ScanOutcome, scan_once

SETTINGS = ReviewSettings(excluded_namespaces=("kube-system", "gpu-system"))
NOW = dt.datetime(2025, 3, 1, 12, 0, 0, 250_000, tzinfo=dt.UTC)
FLAVOURS: list[Flavour] = ["policyreport", "openreports"]


@pytest.fixture(scope="module")
def policies() -> PolicySet:
    return load_directory(BUNDLED_POLICIES / "security")


@pytest.fixture(scope="module")
def outcome(policies: PolicySet) -> ScanOutcome:
    snapshot = from_inventory(parse_inventory(yaml.safe_dump_all(INVENTORY), "test"))
    return scan_once(snapshot, policies, SETTINGS, reports=True, clock=lambda: NOW)


def reports(outcome: ScanOutcome, flavour: Flavour, policies: PolicySet) -> list[dict[str, Any]]:
    return build_reports(
        outcome.entries, flavour, namespaces=outcome.summary.namespaces, rules=rules_of(policies)
    )


@pytest.mark.parametrize("flavour", FLAVOURS)
def test_every_report_is_valid_against_its_crd(
    outcome: ScanOutcome, policies: PolicySet, flavour: Flavour
) -> None:
    built = reports(outcome, flavour, policies)
    for report in built:
        assert_valid_report(report)
    kinds = [r["kind"] for r in built]
    expected = (
        ["PolicyReport", "ClusterPolicyReport"] if flavour == "policyreport" else ["Report", "ClusterReport"]
    )
    assert set(kinds) == set(expected) and kinds[-1] == expected[1]  # the cluster report comes last


@pytest.mark.parametrize("flavour", FLAVOURS)
def test_one_report_per_judged_namespace_and_one_for_the_cluster(
    outcome: ScanOutcome, policies: PolicySet, flavour: Flavour
) -> None:
    built = reports(outcome, flavour, policies)
    namespaced = [r["metadata"]["namespace"] for r in built if "namespace" in r["metadata"]]
    assert namespaced == sorted(outcome.summary.namespaces)
    assert "kube-system" not in namespaced  # excluded: not judged, no report
    assert {r["metadata"]["name"] for r in built} == {REPORT_NAME}
    assert all(r["metadata"]["labels"] == {"app.kubernetes.io/managed-by": "gpu-webhook"} for r in built)


def test_every_finding_is_one_result_naming_its_object(outcome: ScanOutcome, policies: PolicySet) -> None:
    built = reports(outcome, "policyreport", policies)
    results = [r for report in built for r in report["results"]]
    found = Counter(
        (ref["kind"], ref.get("namespace", ""), ref["name"], r["policy"])
        for r in results
        for ref in r["resources"]
    )
    expected = Counter((*c.key, p) for c in ESCAPES for p in c.policies)
    assert found == expected
    for result in results:
        (ref,) = result["resources"]
        assert ref["uid"] == f"uid-{ref['namespace']}-{ref['name']}"
        assert result["source"] == "gpu-webhook"
        assert result["timestamp"] == {"seconds": int(NOW.timestamp()), "nanos": 250_000_000}
        assert (result["result"], result["scored"], result["severity"]) == ("fail", True, "high")
    privileged = next(r for r in results if r["policy"] == "gpu-no-privileged-containers")
    assert privileged["rule"] == "GpuPrivilegedContainer"


@pytest.mark.parametrize("flavour", FLAVOURS)
def test_summaries_count_the_results_and_openreports_names_its_source(
    outcome: ScanOutcome, policies: PolicySet, flavour: Flavour
) -> None:
    for report in reports(outcome, flavour, policies):
        counts = Counter(r["result"] for r in report["results"])
        assert report["summary"] == {k: counts.get(k, 0) for k in ("pass", "fail", "warn", "error", "skip")}
        assert ("source" in report) is (flavour == "openreports")


@pytest.mark.parametrize("flavour", FLAVOURS)
def test_no_report_holds_an_env_value_a_secret_or_a_foreign_annotation(
    outcome: ScanOutcome, policies: PolicySet, flavour: Flavour
) -> None:
    text = render(outcome, flavour, rules_of(policies))
    assert all(canary not in text for canary in CANARIES)
    assert "last-applied-configuration" not in text and "image:" not in text  # no object content


def entry(policy: str, action: str, name: str = "p") -> Entry:
    finding = {"policy": policy, "action": action, "message": f"{policy} found it"}
    return Entry("v1", "Pod", "ml", name, f"uid-{name}", (finding,), NOW)


ACTIONS = [
    ("deny", "fail", True, "high"),
    ("warn", "warn", False, "medium"),
    ("dryrun", "warn", False, "medium"),
]


@pytest.mark.parametrize(("action", "result", "scored", "severity"), ACTIONS)
def test_an_enforcement_action_becomes_a_result(
    action: str, result: str, scored: bool, severity: str
) -> None:
    (report, _) = build_reports([entry("some-constraint", action)], "openreports")
    (found,) = report["results"]
    assert (found["result"], found["scored"], found["severity"]) == (result, scored, severity)
    assert found["properties"] == {"enforcementAction": action}
    assert "rule" not in found  # no constraint of that name: a built-in check has no template


def test_an_object_the_scan_could_not_judge_is_an_error() -> None:
    (report, _) = build_reports([entry("gpu-webhook/scan", "deny")], "policyreport")
    assert report["results"][0]["result"] == "error"
    assert report["summary"]["error"] == 1


def test_a_namespace_without_findings_gets_an_empty_report() -> None:
    built = build_reports([], "policyreport", namespaces=["clean"])
    assert [(r["kind"], r["metadata"].get("namespace"), r["results"]) for r in built] == [
        ("PolicyReport", "clean", []),
        ("ClusterPolicyReport", None, []),
    ]
    for report in built:
        assert_valid_report(report)


def test_results_beyond_the_bound_are_counted_not_kept() -> None:
    many = [entry("c", "deny", f"p{i:05}") for i in range(MAX_RESULTS + 5)]
    (report, _) = build_reports(many, "policyreport")
    assert len(report["results"]) == MAX_RESULTS == report["summary"]["fail"]
    assert report["metadata"]["annotations"] == {OMITTED_ANNOTATION: "5"}
    assert_valid_report(report)


def test_a_long_message_is_clipped() -> None:
    long = Entry(
        "v1", "Pod", "ml", "p", "u", ({"policy": "c", "action": "deny", "message": "x" * 5000},), NOW
    )
    (report, _) = build_reports([long], "policyreport")
    assert len(report["results"][0]["message"]) == 1024


BROKEN = [
    ("result outside the enum", ("results", 0, "result"), "failed"),
    ("severity outside the enum", ("results", 0, "severity"), "urgent"),
    ("timestamp as a string", ("results", 0, "timestamp"), "2025-03-01T12:00:00Z"),
    ("misspelt field", ("results", 0, "mesage"), "x"),
    ("summary count as a string", ("summary", "fail"), "1"),
]


@pytest.mark.parametrize(("what", "path", "value"), BROKEN, ids=[b[0] for b in BROKEN])
def test_the_schema_check_refuses_what_the_crd_refuses(what: str, path: tuple[Any, ...], value: Any) -> None:
    (report, _) = build_reports([entry("c", "deny")], "policyreport")
    broken = copy.deepcopy(report)
    target: Any = broken
    for step in path[:-1]:
        target = target[step]
    target[path[-1]] = value
    with pytest.raises(AssertionError):
        assert_valid_report(broken)
