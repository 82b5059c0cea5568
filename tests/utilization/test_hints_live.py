"""Placement hints from real PromQL answers: through review(), and through a running server."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import jsonpatch
import pytest
import yaml

from tests.support.apiserver import apply_patch, check_reply
from tests.support.patience import PATIENCE
from tests.support.pods import gpu_pod
from tests.support.policies import policy_set, sharing_policy
from tests.support.prometheus import free_port
from tests.support.reviews import make_review
from tests.support.server import ServerProcess, start_server
from tests.support.stubhttp import StubServer
from tests.utilization.conftest import Fleet
from webhook import certs
from webhook.capacity import CapacityView
from webhook.config import PrometheusSettings, UtilizationSettings
from webhook.metrics import Metrics
from webhook.review import ReviewDeps, review
from webhook.utilization.cache import build_cache

PREFERRED = "preferredDuringSchedulingIgnoredDuringExecution"
H100 = "NVIDIA-H100-80GB-HBM3"
HINTS = "preferUnderutilized: {weight: 50, maxNodes: 2}"
POLICIES = {
    "whole": f"match: {{namespaces: [whole]}}\nsharing: {{mode: exclusive}}\ninject: {{{HINTS}}}",
    "h100": f"match: {{namespaces: [h100]}}\nsharing: {{mode: exclusive}}\ninject:\n  {HINTS}\n"
    "  nodeAffinity: {required: [{key: nvidia.com/gpu.product, operator: In, values: [%s]}]}" % H100,
    "mig": f"match: {{namespaces: [mig]}}\nsharing: {{mode: mig, gpuModel: A100-80GB, defaultMemory: 30Gi}}\n"
    f"inject: {{{HINTS}}}",
    "small-mig": f"match: {{namespaces: [small-mig]}}\nsharing: {{mode: mig, gpuModel: A100-80GB}}\n"
    f"inject: {{{HINTS}}}",
    "shared": f"match: {{namespaces: [shared]}}\nsharing: {{mode: timeslice}}\ninject: {{{HINTS}}}",
}


def hinted_nodes(obj: dict[str, Any]) -> list[str] | None:
    terms = obj["spec"].get("affinity", {}).get("nodeAffinity", {}).get(PREFERRED, [])
    hostnames = [
        e["values"]
        for t in terms
        for e in t["preference"]["matchExpressions"]
        if e["key"] == "kubernetes.io/hostname"
    ]
    return hostnames[0] if hostnames else None


@pytest.fixture(scope="module")
def placement(fleet: Fleet) -> CapacityView:
    prometheus = PrometheusSettings(fleet.url, timeout_seconds=PATIENCE)
    cache = build_cache(UtilizationSettings(prometheus, window="1m"), Metrics())
    assert cache.refresh()
    view = cache.view(time.time())
    assert view is not None
    return view


@pytest.mark.parametrize(
    ("namespace", "nodes"),
    [
        ("whole", ["node-b", "node-a"]),  # two free GPUs on node-b, one on node-a, none on node-c
        ("h100", ["node-b"]),  # the policy requires H100s: node-a's A100s are ruled out
        ("mig", ["node-c"]),  # 30Gi is a 3g.40gb: node-c has one free
        ("small-mig", None),  # 10Gi is a 1g.10gb: no node has one free, so no hint
        ("shared", ["node-b", "node-a"]),  # the most idle GPU-equivalents
    ],
)
def test_hints_from_real_promql(placement: CapacityView, namespace: str, nodes: list[str] | None) -> None:
    policies = policy_set(*(sharing_policy(spec, name) for name, spec in POLICIES.items()))
    request = make_review(gpu_pod("p", namespace))["request"]
    decision = review(request, "mutate", ReviewDeps(policies=policies, placement=placement))
    assert decision.allowed
    mutated = jsonpatch.apply_patch(request["object"], list(decision.patch))
    assert hinted_nodes(mutated) == nodes


def _policy_dir(directory: Path) -> Path:
    directory.mkdir()
    document = {
        "apiVersion": "gpuwebhook.io/v1alpha1",
        "kind": "GPUSharingPolicy",
        "metadata": {"name": "whole"},
        "spec": yaml.safe_load(POLICIES["whole"]),
    }
    (directory / "whole.yaml").write_text(yaml.safe_dump(document))
    return directory


def _serve(cert_dir: Path, policies: Path, prometheus_url: str, *extra: str) -> ServerProcess:
    return start_server(
        [
            "--cert-dir",
            str(cert_dir),
            "--policies",
            str(policies),
            "--prometheus-url",
            prometheus_url,
            "--prometheus-timeout",
            f"{PATIENCE:g}",  # no test here is about a slow Prometheus; the hanging one sets its own
            "--utilization-window",
            "1m",
            "--utilization-refresh-seconds",
            "0.2",
            *extra,
        ],
        ca_file=cert_dir / certs.CA_CERT,
    )


def _logged(server: ServerProcess, message: str) -> dict[str, Any]:
    """The first entry whose message starts with `message`, logged already or awaited."""
    for line in server.seen:
        entry = json.loads(line) if line.startswith("{") else {}
        if entry.get("msg", "").startswith(message):
            return dict(entry)
    return server.wait_for_log(lambda e: e.get("msg", "").startswith(message))


def _mutate(server: ServerProcess, obj: dict[str, Any]) -> dict[str, Any]:
    document = make_review(obj)
    response = check_reply(document, server.client().post_json("/mutate", document), "mutate")
    return apply_patch(obj, response)


@pytest.fixture
def policies(tmp_path: Path) -> Path:
    return _policy_dir(tmp_path / "policies")


def test_a_running_server_hints_from_its_background_cache(
    fleet: Fleet, cert_dir: Path, policies: Path
) -> None:
    server = _serve(cert_dir, policies, fleet.url)
    try:
        entry = _logged(server, "utilization source available")
        assert entry["nodes"] == 3
        mutated = _mutate(server, gpu_pod("p", "whole"))
        assert hinted_nodes(mutated) == ["node-b", "node-a"]
        assert mutated["metadata"]["annotations"]["gpuwebhook.io/placement-hints"] == "node-b,node-a"
        ready = server.client().request("GET", "/readyz")
        assert ready.status == 200 and b"fresh" in ready.body
    finally:
        server.stop()


def _metric(server: ServerProcess, name: str) -> float:
    text = server.client().request("GET", "/metrics").body.decode()
    values = [float(line.split()[-1]) for line in text.splitlines() if line.startswith(name + " ")]
    assert values, f"{name} not in /metrics"
    return values[0]


def test_an_unreachable_prometheus_degrades_with_a_log_line_and_a_metric(
    cert_dir: Path, policies: Path
) -> None:
    server = _serve(cert_dir, policies, f"http://127.0.0.1:{free_port()}")
    try:
        entry = _logged(server, "utilization source unavailable")
        assert "cannot reach Prometheus" in entry["error"] and entry["level"] == "warning"
        mutated = _mutate(server, gpu_pod("p", "whole"))
        assert hinted_nodes(mutated) is None and "gpuwebhook.io/applied" in mutated["metadata"]["annotations"]
        assert _metric(server, "gpu_webhook_utilization_refresh_errors_total") >= 1
        assert _metric(server, "gpu_webhook_utilization_up") == 0
        assert server.client().request("GET", "/readyz").status == 200  # never gates readiness
    finally:
        server.stop()


@pytest.fixture
def hanging_prometheus() -> Iterator[StubServer]:
    stub = StubServer(lambda _: (200, b"{}"), hold=True)
    yield stub
    stub.stop()


def test_a_hanging_prometheus_never_holds_up_admission(
    cert_dir: Path, policies: Path, hanging_prometheus: StubServer
) -> None:
    server = _serve(cert_dir, policies, hanging_prometheus.url, "--prometheus-timeout", "60")
    try:
        hanging_prometheus.requests.get(timeout=PATIENCE)  # the refresh is now stuck inside a query
        mutated = _mutate(server, gpu_pod("p", "whole"))
        assert not hanging_prometheus.release.is_set()  # answered while the query still hangs
        assert hinted_nodes(mutated) is None and "gpuwebhook.io/applied" in mutated["metadata"]["annotations"]
    finally:
        server.stop()
