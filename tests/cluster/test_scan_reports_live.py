"""Publishing scan reports to a live API (the fake kube-apiserver serving the report CRDs, the real
client): created, then replaced in place with the resourceVersion read; 409s retried; reports
someone else owns left alone; the periodic scan publishing after a complete run."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from tests.cluster.test_scan_live import load
from tests.conftest import BUNDLED_POLICIES
from tests.support import cli
from tests.support.fakekube import FakeKube
from tests.support.report_crds import assert_valid_report
from tests.support.workloads import CANARIES, ESCAPES
from webhook.cluster import Connection, CustomObjectStore, lister
from webhook.policy.loader import load_directory
from webhook.review import ReviewSettings
from webhook.scan.periodic import ScanJob
from webhook.scan.publish import Published, Publisher, publish
from webhook.scan.reports import REPORT_NAME, build_reports
from webhook.scan.sources import from_cluster

SECURITY = BUNDLED_POLICIES / "security"
SETTINGS = ReviewSettings(excluded_namespaces=("kube-system",))


@pytest.fixture
def loaded(fake: FakeKube) -> FakeKube:
    load(fake)
    return fake


def scan_publish(fake: FakeKube, tmp_path: Path, *flags: str) -> Any:
    kubeconfig = fake.write_kubeconfig(tmp_path / "kubeconfig")
    return cli.gpu_webhook(
        "scan", "--policies", str(SECURITY), "--kubeconfig", str(kubeconfig), "--publish", *flags
    )


def escapes_in(namespace: str) -> int:
    return sum(len(c.policies) for c in ESCAPES if c.key[1] == namespace and c.key[0] != "Namespace")


def test_the_cli_publishes_one_report_per_namespace_then_replaces_them(
    loaded: FakeKube, tmp_path: Path
) -> None:
    first = scan_publish(loaded, tmp_path)
    assert first.returncode == 1, first.stderr  # findings that deny, as without --publish
    assert "published policyreport reports: 3 created, 0 updated" in first.stderr
    report = loaded.get("policyreports", "ml", REPORT_NAME)
    assert report is not None
    stored = dict(report)
    stored["metadata"] = {k: report["metadata"][k] for k in ("name", "namespace", "labels")}
    assert_valid_report(stored)
    assert len(report["results"]) == escapes_in("ml") == report["summary"]["fail"]
    assert all(canary not in str(report) for canary in CANARIES)
    assert loaded.get("policyreports", "kube-system", REPORT_NAME) is None  # excluded, not judged
    assert loaded.get("clusterpolicyreports", "", REPORT_NAME) is not None
    version = report["metadata"]["resourceVersion"]

    second = scan_publish(loaded, tmp_path)
    assert "published policyreport reports: 0 created, 3 updated" in second.stderr, second.stderr
    again = loaded.get("policyreports", "ml", REPORT_NAME)
    assert again is not None and again["metadata"]["resourceVersion"] != version
    assert again["metadata"]["uid"] == report["metadata"]["uid"]  # replaced in place, not recreated
    assert (
        loaded.count(rf"^PUT /apis/wgpolicyk8s.io/v1alpha2/namespaces/ml/policyreports/{REPORT_NAME}$") == 1
    )


def test_openreports_go_to_their_own_group(loaded: FakeKube, tmp_path: Path) -> None:
    result = scan_publish(loaded, tmp_path, "openreports")
    assert "published openreports reports: 3 created" in result.stderr, result.stderr
    report = loaded.get("reports", "ml", REPORT_NAME)
    assert report is not None and report["source"] == "gpu-webhook"
    assert loaded.get("clusterreports", "", REPORT_NAME) is not None
    assert loaded.get("policyreports", "ml", REPORT_NAME) is None


def test_a_report_someone_else_owns_is_left_alone(loaded: FakeKube, tmp_path: Path) -> None:
    theirs: dict[str, Any] = {
        "apiVersion": "wgpolicyk8s.io/v1alpha2",
        "kind": "PolicyReport",
        "metadata": {
            "name": REPORT_NAME,
            "namespace": "ml",
            "labels": {"app.kubernetes.io/managed-by": "kyverno"},
        },
        "results": [],
    }
    loaded.create("policyreports", theirs)
    result = scan_publish(loaded, tmp_path)
    assert f"left alone (not managed by gpu-webhook): policyreports ml/{REPORT_NAME}" in result.stderr
    assert "2 created" in result.stderr
    stored = loaded.get("policyreports", "ml", REPORT_NAME)
    assert (
        stored is not None
        and stored["results"] == []
        and stored["metadata"]["labels"] == theirs["metadata"]["labels"]
    )


def test_publishing_needs_the_cluster_the_scan_reads(tmp_path: Path) -> None:
    inventory = tmp_path / "inventory.yaml"
    inventory.write_text("apiVersion: v1\nkind: List\nitems: []\n")
    result = cli.gpu_webhook("scan", "--policies", str(SECURITY), "--inventory", str(inventory), "--publish")
    assert result.returncode != 0
    assert "--publish writes reports to the cluster the scan reads" in result.stderr
    assert "Traceback" not in result.stderr


class RacingStore:
    """The real store, with another writer updating the report between our read and our replace."""

    def __init__(self, inner: CustomObjectStore, fake: FakeKube, races: int) -> None:
        self.inner, self.fake, self.races = inner, fake, races

    def read(self, api_version: str, plural: str, namespace: str, name: str) -> dict[str, Any] | None:
        found = self.inner.read(api_version, plural, namespace, name)
        if found is not None and self.races:
            self.races -= 1
            self.fake.update(plural, {**found, "results": []})
        return found

    def create(self, api_version: str, plural: str, namespace: str, body: Mapping[str, Any]) -> None:
        self.inner.create(api_version, plural, namespace, body)

    def replace(self, api_version: str, plural: str, namespace: str, body: Mapping[str, Any]) -> None:
        self.inner.replace(api_version, plural, namespace, body)


def one_report(namespace: str = "ml") -> list[dict[str, Any]]:
    return build_reports([], "policyreport", namespaces=[namespace])[:1]


@pytest.mark.parametrize(("races", "written"), [(1, True), (3, False)], ids=["retried", "gives-up"])
def test_a_stale_resource_version_is_read_again(
    fake: FakeKube, connection: Connection, races: int, written: bool
) -> None:
    store = CustomObjectStore(connection)
    plurals = ("policyreports", "clusterpolicyreports")
    assert publish(one_report(), store, plurals).created == 1
    before = fake.conflicts
    done = publish(one_report(), RacingStore(store, fake, races), plurals)
    assert fake.conflicts - before == races
    assert (done.updated, done.ok) == ((1, True) if written else (0, False))
    if not written:
        assert done.failed[0].startswith(f"policyreports ml/{REPORT_NAME}: update policyreports ml/")
        assert "409" in done.failed[0]


def test_a_missing_crd_fails_that_report_and_not_the_others(connection: Connection) -> None:
    store = CustomObjectStore(connection)
    done = publish(one_report(), store, ("nosuchreports", "clusterpolicyreports"))
    assert done == Published(failed=done.failed) and len(done.failed) == 1
    assert "404" in done.failed[0]


def test_the_periodic_scan_publishes_after_a_complete_run(loaded: FakeKube, connection: Connection) -> None:
    policies = load_directory(SECURITY)
    publisher = Publisher(CustomObjectStore(connection), "policyreport")
    job = ScanJob(
        lambda: from_cluster(lister(connection), "fake"), lambda: policies, SETTINGS, publisher=publisher
    )
    stopped = job.run(keep_going=iter([True, False]).__next__)
    assert not stopped.summary.complete
    assert loaded.get("policyreports", "ml", REPORT_NAME) is None  # a partial run publishes nothing
    done = job.run(keep_going=lambda: True)
    assert done.summary.complete
    report = loaded.get("policyreports", "ml", REPORT_NAME)
    assert report is not None and len(report["results"]) == escapes_in("ml")
