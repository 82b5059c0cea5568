"""Installing into a running cluster: node agents that need host access, and the way through.

The rollout path documented in docs/security.md: serve with `--enforcement warn`, list the
offenders with `scan`, let the agents through (a namespace exemption, or a narrow parameter),
then enforce. Each step goes through the installed webhook configurations as kube-apiserver
dispatches them.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest
import yaml

from tests.conftest import BUNDLED_POLICIES
from tests.support import cli
from tests.support.apiserver import check_reply
from tests.support.cel import CelProcess
from tests.support.dispatch import Dispatcher, Request, in_process
from tests.support.policies import bundled_policies
from tests.support.reviews import make_review
from tests.support.server import start_server
from webhook.config import Enforcement
from webhook.policy.loader import load_directory
from webhook.policy.model import PolicySet
from webhook.review import ReviewDeps, ReviewSettings

REPO = Path(__file__).resolve().parents[2]
CONFIGURATIONS = [
    yaml.safe_load((REPO / "manifests" / "base" / name).read_text())
    for name in ("mutatingwebhook.yaml", "validatingwebhook.yaml")
]
SECURITY = BUNDLED_POLICIES / "security"


def agent(name: str, volumes: dict[str, str], **spec: Any) -> dict[str, Any]:
    """A node agent's pod as its DaemonSet creates it: host paths mounted read-only."""
    mounts = [{"name": v, "mountPath": path, "readOnly": True} for v, path in volumes.items()]
    main = {"name": name, "image": f"registry.example.com/{name}:1", "volumeMounts": mounts}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": f"{name}-x7k2p", "namespace": "monitoring"},
        "spec": {
            "containers": [main],
            "volumes": [{"name": v, "hostPath": {"path": path}} for v, path in volumes.items()],
            **spec,
        },
    }


NODE_EXPORTER = agent("node-exporter", {"proc": "/proc", "sys": "/sys"}, hostPID=True, hostNetwork=True)
LOG_SHIPPER = agent("fluent-bit", {"varlog": "/var/log"})
CSI_DRIVER = agent(
    "csi-node",
    {"kubelet": "/var/lib/kubelet", "dev": "/dev"},
    containers=[
        {"name": "csi-node", "image": "registry.example.com/csi:1", "securityContext": {"privileged": True}}
    ],
)
AGENTS = [
    ("node-exporter", NODE_EXPORTER, {"gpu-no-host-namespaces", "gpu-host-paths-allow-list"}),
    ("log shipper", LOG_SHIPPER, {"gpu-host-paths-allow-list"}),
    ("CSI node driver", CSI_DRIVER, {"gpu-no-privileged-containers", "gpu-host-paths-allow-list"}),
]
AGENT_PARAMS = [pytest.param(obj, rules, id=name) for name, obj, rules in AGENTS]


@pytest.fixture(scope="module")
def cel() -> Iterator[CelProcess]:
    process = CelProcess()
    yield process
    process.close()


@pytest.fixture(scope="module")
def bundle() -> PolicySet:
    return bundled_policies()


def dispatcher(cel: CelProcess, policies: PolicySet, enforcement: Enforcement = "policy") -> Dispatcher:
    deps = ReviewDeps(policies=policies, settings=ReviewSettings(enforcement=enforcement))
    return Dispatcher(CONFIGURATIONS, cel, in_process(deps))


def _rules(texts: list[str]) -> set[str]:
    """The constraint names that messages or warnings start with ("[name] …" or "name: …")."""
    return {text.lstrip("[").split("]")[0].split(":")[0] for text in texts}


@pytest.mark.parametrize(("obj", "rules"), AGENT_PARAMS)
def test_enforcing_denies_node_agents_by_their_rules(
    cel: CelProcess, bundle: PolicySet, obj: dict[str, Any], rules: set[str]
) -> None:
    outcome = dispatcher(cel, bundle).admit(Request("CREATE", obj))
    assert not outcome.allowed
    assert _rules(outcome.message.split("\n")) == rules


@pytest.mark.parametrize(("obj", "rules"), AGENT_PARAMS)
def test_warn_admits_node_agents_and_names_what_would_deny(
    cel: CelProcess, bundle: PolicySet, obj: dict[str, Any], rules: set[str]
) -> None:
    outcome = dispatcher(cel, bundle, "warn").admit(Request("CREATE", obj))
    assert outcome.allowed
    assert _rules(outcome.warnings) == rules


def test_warn_leaves_the_gpu_checks_that_are_not_constraints_enforced(
    cel: CelProcess, bundle: PolicySet
) -> None:
    malformed = {**LOG_SHIPPER, "spec": {**LOG_SHIPPER["spec"], "hostPID": "yes"}}
    assert not dispatcher(cel, bundle, "warn").admit(Request("CREATE", malformed)).allowed


@pytest.mark.parametrize(("obj", "rules"), AGENT_PARAMS)
def test_an_exempt_namespace_is_never_sent_to_the_webhook(
    cel: CelProcess, bundle: PolicySet, obj: dict[str, Any], rules: set[str]
) -> None:
    labelled = Request("CREATE", obj, namespace_labels={"gpuwebhook.io/ignore": "true"})
    outcome = dispatcher(cel, bundle).admit(labelled)
    assert outcome.allowed and outcome.called == []


def test_a_narrow_allowance_lets_one_agent_through_and_no_more(cel: CelProcess, tmp_path: Path) -> None:
    policies = tmp_path / "policies"
    shutil.copytree(BUNDLED_POLICIES, policies)
    constraint = policies / "security" / "gpu-host-paths" / "constraint.yaml"
    document = yaml.safe_load(constraint.read_text())
    document["spec"]["parameters"]["allowedHostPaths"] = [{"pathPrefix": "/var/log", "readOnly": True}]
    constraint.write_text(yaml.safe_dump(document))
    allowing = dispatcher(cel, load_directory(policies))
    assert allowing.admit(Request("CREATE", LOG_SHIPPER)).allowed
    writable = agent("fluent-bit", {"varlog": "/var/log"})
    writable["spec"]["containers"][0]["volumeMounts"][0]["readOnly"] = False
    assert not allowing.admit(Request("CREATE", writable)).allowed
    sibling = agent("fluent-bit", {"varlog": "/var/log/../lib/kubelet"})
    assert not allowing.admit(Request("CREATE", sibling)).allowed


def test_scan_lists_the_agents_that_enforcing_would_deny(tmp_path: Path) -> None:
    inventory = tmp_path / "inventory.yaml"
    inventory.write_text(yaml.safe_dump_all([obj for _, obj, _ in AGENTS]))
    result = cli.gpu_webhook("scan", "--policies", str(SECURITY), "--inventory", str(inventory), "-o", "json")
    assert result.returncode == 1, result.stderr
    found = {
        o["name"]: {(f["policy"], f["action"]) for f in o["findings"]}
        for o in orjson.loads(result.stdout)["objects"]
    }
    assert found == {obj["metadata"]["name"]: {(rule, "deny") for rule in rules} for _, obj, rules in AGENTS}


def test_a_server_in_warn_mode_admits_with_warnings_over_https(cert_dir: Path, tmp_path: Path) -> None:
    args = ["--cert-dir", str(cert_dir), "--policies", str(BUNDLED_POLICIES), "--enforcement", "warn"]
    server = start_server([*args, "--audit-log", str(tmp_path / "audit.log")], ca_file=cert_dir / "ca.crt")
    try:
        review = make_review(NODE_EXPORTER)
        response = check_reply(review, server.client().post_json("/validate", review), "validate")
    finally:
        server.stop_gracefully()
    assert response["allowed"] is True
    assert _rules(response["warnings"]) == AGENTS[0][2]
    records = [orjson.loads(line) for line in (tmp_path / "audit.log").read_text().splitlines()]
    (record,) = [r for r in records if r["type"] == "decision"]  # after the worker's `start` record
    assert record["decision"] == "warned"
