"""serve --scan-publish in the rendered install: the ClusterRole may then write that API group's
reports by name (get, create, update: publishing never lists or deletes), and without it nothing."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.manifests.objects import one, run_cli
from tests.support.schema import assert_valid
from webhook.manifests import REPORT_RESOURCES, Manifest
from webhook.scan.reports import APIS

REPORTS = {
    "policyreport": ("wgpolicyk8s.io", {"policyreports", "clusterpolicyreports"}),
    "openreports": ("openreports.io", {"reports", "clusterreports"}),
}
REPORT_GROUPS = {group for group, _ in REPORTS.values()}


def render(cert_dir: Path, *flags: str) -> list[Manifest]:
    result = run_cli("--namespace", "gpu-system", "--cert-dir", str(cert_dir), *flags)
    assert result.returncode == 0, result.stderr
    return [doc for doc in yaml.safe_load_all(result.stdout) if doc is not None]


def report_rules(objects: list[Manifest]) -> list[dict[str, Any]]:
    rules: list[dict[str, Any]] = one(objects, "ClusterRole")["rules"]
    return [r for r in rules if set(r["apiGroups"]) & REPORT_GROUPS]


def test_without_publishing_no_report_is_writable(rendered: list[Manifest]) -> None:
    assert report_rules(rendered) == []


@pytest.mark.parametrize("flavour", sorted(REPORTS))
def test_publishing_grants_that_group_s_reports_by_name(cert_dir: Path, flavour: str) -> None:
    objects = render(cert_dir, "--serve-flag", f"scan-publish={flavour}")
    group, resources = REPORTS[flavour]
    (rule,) = report_rules(objects)
    assert rule["apiGroups"] == [group]
    assert set(rule["resources"]) == resources
    assert rule["verbs"] == ["get", "create", "update"]
    assert_valid(one(objects, "ClusterRole"))
    args = one(objects, "StatefulSet")["spec"]["template"]["spec"]["containers"][0]["args"]
    assert f"--scan-publish={flavour}" in args


def test_an_unknown_flavour_is_refused(cert_dir: Path) -> None:
    result = run_cli(
        "--namespace", "gpu-system", "--cert-dir", str(cert_dir), "--serve-flag", "scan-publish=x"
    )
    assert result.returncode != 0
    assert "scan-publish" in result.stderr and "Traceback" not in result.stderr


def test_the_install_grants_the_resources_the_scan_writes() -> None:
    assert {
        flavour: (api.group, (api.plural, api.cluster_plural)) for flavour, api in APIS.items()
    } == REPORT_RESOURCES
