"""Every metric and label the PrometheusRule and the Grafana dashboard use is one a real server
exports: a `gpu-webhook serve` with a (fake) cluster, a quota, the audit log and some traffic is
scraped over TLS, and each query is read for the metrics it selects, the labels it matches,
groups or joins by, and the labels its annotations print."""

from __future__ import annotations

import json
import re
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from prometheus_client.parser import text_string_to_metric_families

from tests.conftest import BUNDLED_POLICIES
from tests.monitoring.test_monitoring import MONITORING, dashboard_queries, rules
from tests.support.apiserver import check_reply
from tests.support.fakekube import FakeKube
from tests.support.pods import gpu_pod, namespace, quota_doc
from tests.support.reviews import load_example, make_review
from tests.support.server import start_server

Exported = dict[str, set[str]]  # series name -> the label names its samples carry
# Labels Prometheus adds to every series it scrapes (job, instance; the operator's pod, service,
# container). `namespace` and `endpoint` are target labels too, but ours collide with them: see
# test_the_service_monitor_keeps_our_labels.
TARGET_LABELS = {"job", "instance", "pod", "service", "container"}
OPERATOR_TARGET_LABELS = TARGET_LABELS | {"namespace", "endpoint"}
_METRIC = re.compile(r"\b(gpu_webhook_[a-z0-9_]+)\b(?:\{([^}]*)\})?")
_GROUPING = re.compile(r"\b(?:by|on|without|ignoring|group_left|group_right)\s*\(([^)]*)\)")
_MATCHER = re.compile(r"([a-zA-Z_][a-zA-Z0-9_]*)\s*(?:=~|!~|!=|=)")
_PRINTED = re.compile(r"\$labels\.([a-zA-Z_][a-zA-Z0-9_]*)")


@pytest.fixture(scope="module")
def exported(cert_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Exported]:
    root = tmp_path_factory.mktemp("exported")
    policies = root / "policies"
    shutil.copytree(BUNDLED_POLICIES, policies)
    (policies / "quota.yaml").write_text(
        yaml.safe_dump(quota_doc("ml-team", {"gpus": 8}, match={"namespaces": ["ml-team"]}))
    )
    fake = FakeKube().start()
    try:
        fake.create("namespaces", namespace("ml-team"))
        fake.create("pods", gpu_pod("a", gpus=2))
        kubeconfig = fake.write_kubeconfig(root / "kubeconfig")
        args = ["--cert-dir", str(cert_dir), "--policies", str(policies), "--kubeconfig", str(kubeconfig)]
        server = start_server(
            [*args, "--audit-log", str(root / "audit.log")],
            ca_file=cert_dir / "ca.crt",
            env={"HOME": str(root), "KUBECONFIG": ""},
        )
        try:
            while not {"pods", "namespaces"} <= _synced_kinds(server.output()):  # nodes and DRA log too
                server.wait_for_log(lambda e: e.get("msg") == "cache synced")
            for endpoint in ("mutate", "validate"):
                review = make_review(load_example("pod-gpu-training.yaml"))
                check_reply(review, server.client().post_json(f"/{endpoint}", review), endpoint)
            server.client().post_json("/validate", {"not": "a review"})  # a rejected request
            yield _parse(server.client().request("GET", "/metrics").body.decode())
        finally:
            server.stop()
    finally:
        fake.stop()


def _synced_kinds(output: str) -> set[str]:
    lines = (json.loads(line) for line in output.splitlines() if '"msg":"cache synced"' in line)
    return {str(entry.get("kind")) for entry in lines}


def _parse(text: str) -> Exported:
    found: Exported = {}
    for family in text_string_to_metric_families(text):
        suffixes = {
            "counter": ("_total",),
            "histogram": ("_bucket", "_sum", "_count"),
        }.get(family.type, ("",))
        for suffix in suffixes:  # a family without samples yet still names its series
            found.setdefault(family.name + suffix, set())
        for sample in family.samples:
            found.setdefault(sample.name, set()).update(sample.labels)
    return found


def _queries() -> list[tuple[str, str, str]]:
    """(where, expression, annotation text) for every rule and dashboard panel query."""
    found = []
    for rule in rules():
        where = rule.get("alert") or rule["record"]
        found.append((where, rule["expr"], " ".join(rule.get("annotations", {}).values())))
    found += [(f"dashboard query {i}", q, "") for i, q in enumerate(dashboard_queries())]
    return found


def _ours(expr: str) -> bool:
    """Expressions over our own metrics only (DCGM and kube-apiserver metrics are not ours to export)."""
    names = set(re.findall(r"\b([a-zA-Z_:][a-zA-Z0-9_:]*)\s*[{(\[]", expr)) | {
        m.group(1) for m in _METRIC.finditer(expr)
    }
    functions = {
        "sum",
        "max",
        "min",
        "avg",
        "rate",
        "increase",
        "histogram_quantile",
        "count",
        "time",
        "sort",
    }
    return bool(_METRIC.search(expr)) and all(n.startswith("gpu_webhook_") or n in functions for n in names)


QUERIES = _queries()


@pytest.mark.parametrize(("where", "expr", "printed"), QUERIES, ids=[q[0] for q in QUERIES])
def test_every_metric_used_is_exported(exported: Exported, where: str, expr: str, printed: str) -> None:
    for match in _METRIC.finditer(expr):
        assert match.group(1) in exported, f"{where}: {match.group(1)} is not exported"


@pytest.mark.parametrize(
    ("where", "expr", "printed"),
    [q for q in QUERIES if _ours(q[1])],
    ids=[q[0] for q in QUERIES if _ours(q[1])],
)
def test_every_label_used_is_exported(exported: Exported, where: str, expr: str, printed: str) -> None:
    metrics = {m.group(1) for m in _METRIC.finditer(expr)}
    for match in _METRIC.finditer(expr):
        for label in _MATCHER.findall(match.group(2) or ""):
            assert label in exported[match.group(1)] | TARGET_LABELS, (
                f"{where}: {match.group(1)} has no {label}"
            )
    available = set().union(*(exported[m] for m in metrics)) | TARGET_LABELS
    grouped = {
        label.strip() for group in _GROUPING.findall(expr) for label in group.split(",") if label.strip()
    }
    assert grouped <= available, f"{where}: grouped by {grouped - available}, which no series it reads has"
    assert set(_PRINTED.findall(printed)) <= grouped | available, f"{where}: prints a label it does not keep"


def test_the_alerts_the_issue_found_silent_read_exported_series(exported: Exported) -> None:
    stale = next(rule for rule in rules() if rule.get("alert") == "GpuWebhookClusterCacheStale")
    assert "gpu_webhook_cluster_staleness_seconds" in stale["expr"]
    assert exported["gpu_webhook_cluster_staleness_seconds"] == set()  # one series per replica
    assert {"namespace", "resource"} <= exported["gpu_webhook_quota_used"]


def test_the_service_monitor_keeps_our_labels(exported: Exported) -> None:
    """Prometheus renames a scraped label that collides with a target label (`namespace`,
    `endpoint` from the operator) to exported_*, unless the endpoint honours ours."""
    ours = set().union(*exported.values())
    (monitor,) = yaml.safe_load_all((MONITORING / "servicemonitor.yaml").read_text())
    (endpoint,) = monitor["spec"]["endpoints"]
    assert ours & OPERATOR_TARGET_LABELS == {"namespace", "endpoint"}
    assert endpoint.get("honorLabels") is True
