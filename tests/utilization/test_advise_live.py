"""`advise` against a real Prometheus scraping the synthetic fleet: the idle namespaces, and nothing busy."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.support.cli import gpu_webhook
from tests.support.patience import PATIENCE
from tests.support.reviews import make_review
from tests.utilization.conftest import Fleet
from tests.utilization.fleet import BUSY_NAMESPACE, IDLE_NAMESPACES
from webhook.config import PrometheusSettings
from webhook.policy.loader import load_directory
from webhook.review import ReviewDeps, review
from webhook.utilization.advice import Capabilities
from webhook.utilization.analysis import Thresholds
from webhook.utilization.owners import OwnerIndex
from webhook.utilization.prometheus import PrometheusClient
from webhook.utilization.promql import Window
from webhook.utilization.report import Report, build_report
from webhook.utilization.source import read_fleet

WINDOW = "5m"


def report(fleet: Fleet, inventory: list[dict[str, Any]] | None = None) -> Report:
    client = PrometheusClient(PrometheusSettings(fleet.url, timeout_seconds=PATIENCE))
    reading = read_fleet(client, Window.parse(WINDOW))
    return build_report(reading, OwnerIndex(inventory or []), Thresholds(), Capabilities(), client.url)


def patient(fleet: Fleet) -> tuple[str, ...]:
    """`advise` at the fleet, waiting for Prometheus as long as a hung test would."""
    return ("--prometheus-url", fleet.url, "--prometheus-timeout", f"{PATIENCE:g}")


def write_policies(found: Report, directory: Path) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    for rec in found.recommendations:
        (directory / f"{rec.name}.yaml").write_text(yaml.safe_dump(rec.policy))
    return directory


def test_idle_namespaces_are_singled_out_and_busy_work_is_left_alone(fleet: Fleet) -> None:
    found = report(fleet)
    assert found.idle_namespaces == IDLE_NAMESPACES
    assert [n.namespace for n in found.namespaces][:2] == list(IDLE_NAMESPACES)
    fits = {
        r.namespace: (r.fit.describe(), round(r.gpus_reserved, 3), round(r.gpus_freed, 3))
        for r in found.recommendations
    }
    assert fits == {
        "research": ("mig 1g.5gb", 2.0, round(2 - 2 / 7, 3)),  # two idle A100-40GB notebooks
        # A slice is its compute slices over the card's seven, as GPUQuota counts it.
        "sandbox": ("mig 1g.10gb", round(3 / 7, 3), round(3 / 7 - 1 / 7, 3)),  # an idle 3g.40gb, right-sized
        "inference": ("mig 2g.20gb", 1.0, round(1 - 2 / 7, 3)),  # 20% of an H100, 12 GiB
    }
    training = next(n for n in found.namespaces if n.namespace == BUSY_NAMESPACE)
    assert {w.workload.describe(): w.state for w in training.workloads} == {
        "StatefulSet/trainer": "busy",
        "Pod/debug-shell": "idle",
    }
    assert len(training.workloads[1].devices) == 3 and training.gpus_reserved == 4
    assert [
        n for n in found.notes if "debug-shell" in n
    ]  # a candidate among busy neighbours: named, not touched
    assert [d.describe() for d in found.unallocated] == [
        "node-a GPU 3",
        "node-b GPU 3",
        "node-b GPU 4",
        "node-c GPU 0 MIG 3g.40gb #2",
    ]


def test_every_recommendation_passes_the_policy_loader(fleet: Fleet, tmp_path: Path) -> None:
    policies = load_directory(write_policies(report(fleet), tmp_path / "advice"))
    assert {p.name for p in policies.sharing} == {"advise-research", "advise-sandbox", "advise-inference"}


def _pod(name: str, namespace: str, labels: dict[str, str]) -> dict[str, Any]:
    container = {"name": "main", "image": "x", "resources": {"limits": {"nvidia.com/gpu": "1"}}}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace, "labels": labels},
        "spec": {"containers": [container]},
    }


def test_with_an_inventory_the_idle_pod_among_busy_trainers_is_selected_by_label(
    fleet: Fleet, tmp_path: Path
) -> None:
    inventory = [
        _pod("debug-shell", "training", {"app": "debug-shell"}),
        *(
            _pod(f"trainer-{i}", "training", {"app": "trainer", "controller-revision-hash": "x"})
            for i in range(3)
        ),
    ]
    found = report(fleet, inventory)
    [rec] = [r for r in found.recommendations if r.namespace == BUSY_NAMESPACE]
    assert rec.selector == {"app": "debug-shell"} and not found.notes
    deps = ReviewDeps(policies=load_directory(write_policies(found, tmp_path / "advice")))
    trainer = review(
        make_review(_pod("trainer-3", "training", {"app": "trainer"}))["request"], "mutate", deps
    )
    debug = review(
        make_review(_pod("debug-shell", "training", {"app": "debug-shell"}))["request"], "mutate", deps
    )
    assert trainer.allowed and trainer.patch == ()  # the busy trainers keep whole GPUs
    assert any(op["path"].endswith("nvidia.com~1mig-1g.10gb") for op in debug.patch)


def test_the_command_writes_json_html_and_policies_that_policies_check_accepts(
    fleet: Fleet, tmp_path: Path
) -> None:
    html, policies = tmp_path / "report.html", tmp_path / "policies"
    # A short window, so its timeline (60 steps) has several points within the fleet's few seconds.
    result = gpu_webhook(
        "advise",
        *patient(fleet),
        "--window",
        "20s",
        "-o",
        "json",
        "--html",
        str(html),
        "--policies-out",
        str(policies),
    )
    assert result.returncode == 0, result.stderr
    document = json.loads(result.stdout)
    assert document["idleNamespaces"] == list(IDLE_NAMESPACES)
    assert {r["namespace"] for r in document["recommendations"]} == {"research", "sandbox", "inference"}
    assert all(
        BUSY_NAMESPACE not in r["policy"]["spec"]["match"]["namespaces"] for r in document["recommendations"]
    )
    check = gpu_webhook("policies", "check", str(policies))
    assert check.returncode == 0 and "3 GPU sharing policies" in check.stdout, check.stderr
    page = html.read_text()
    assert page.count("<svg") >= 1 + 4  # the usage bars and a timeline per namespace
    assert "research" in page and "advise-research" in page
    for fetch in (r"\bsrc=", r"\bhref=", r"url\(", "@import", "<script", "<link"):
        assert not re.search(fetch, page), fetch
    assert "Content-Security-Policy" in page and "default-src 'none'" in page


def test_the_table_prints_each_policy_ready_to_apply(fleet: Fleet, tmp_path: Path) -> None:
    result = gpu_webhook("advise", *patient(fleet), "--window", WINDOW)
    assert result.returncode == 0, result.stderr
    assert re.search(r"^research \(IDLE\)\s+2\.00", result.stdout, re.MULTILINE)
    assert re.search(
        r"^training/StatefulSet/trainer\s+3\.00\s+exclusive\s+busy\b.*-$", result.stdout, re.MULTILINE
    )
    documents = [d for d in yaml.safe_load_all(result.stdout.split("Recommended policies (3):\n", 1)[1]) if d]
    write = tmp_path / "from-table"
    write.mkdir()
    for document in documents:
        (write / f"{document['metadata']['name']}.yaml").write_text(yaml.safe_dump(document))
    assert len(load_directory(write).sharing) == 3


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ((), "needs --prometheus-url"),
        (("--prometheus-url", "http://127.0.0.1:1", "--window", "7 days"), "is not a Prometheus duration"),
        (("--prometheus-url", "http://127.0.0.1:1", "--modes", "mig,magic"), "'magic' is not a sharing mode"),
        (("--prometheus-url", "http://127.0.0.1:1", "--headroom", "0.5"), "--headroom must be at least 1"),
        (("--prometheus-url", "http://127.0.0.1:1", "--idle-below", "60"), "--idle-below <= --busy-above"),
        (("--prometheus-url", "http://127.0.0.1:1", "--prometheus-timeout", "1"), "cannot reach Prometheus"),
    ],
)
def test_the_command_explains_what_is_wrong(args: tuple[str, ...], message: str) -> None:
    result = gpu_webhook("advise", *args)
    assert result.returncode == 2 and message in result.stderr, result.stderr
