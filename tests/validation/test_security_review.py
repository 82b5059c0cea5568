"""The default GPU security bundle through review() and over HTTPS, as `make run` serves it."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import orjson
import pytest

from tests.conftest import BUNDLED_POLICIES
from tests.support.apiserver import check_reply
from tests.support.policies import bundled_policies
from tests.support.reviews import make_review
from tests.support.server import ServerProcess
from webhook.admission import parse_review
from webhook.decision import Decision
from webhook.policy.loader import load_directory
from webhook.policy.model import PolicySet
from webhook.review import ReviewDeps, ReviewSettings, review


@pytest.fixture(scope="module")
def bundled() -> PolicySet:
    return bundled_policies()


def container(**extra: Any) -> dict[str, Any]:
    return {
        "name": "main",
        "image": "registry.example.com/x:1",
        "resources": {"limits": {"nvidia.com/gpu": "1"}},
        **extra,
    }


def pod(
    *containers: dict[str, Any],
    namespace: str = "ml-team",
    annotations: dict[str, str] | None = None,
    **spec: Any,
) -> dict[str, Any]:
    metadata = {"name": "p", "namespace": namespace, "annotations": annotations or {}}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": metadata,
        "spec": {"containers": list(containers), **spec},
    }


def deployment(*containers: dict[str, Any], **spec: Any) -> dict[str, Any]:
    template = {"metadata": {"labels": {"app": "t"}}, "spec": {"containers": list(containers), **spec}}
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "trainer", "namespace": "ml-team"},
        "spec": {"selector": {"matchLabels": {"app": "t"}}, "template": template},
    }


def cpu(**extra: Any) -> dict[str, Any]:
    return {"name": "main", "image": "registry.example.com/x:1", **extra}


CASES: list[tuple[str, dict[str, Any], str | None]] = [
    ("benign GPU pod", pod(container()), None),
    ("benign CPU pod", pod(cpu()), None),
    (
        "privileged GPU container",
        pod(container(securityContext={"privileged": True})),
        "gpu-no-privileged-containers",
    ),
    (
        "privileged CPU container: device access needs no GPU request",
        pod(cpu(securityContext={"privileged": True})),
        "gpu-no-privileged-containers",
    ),
    (
        "NVIDIA_VISIBLE_DEVICES in a CPU pod",
        pod(cpu(env=[{"name": "NVIDIA_VISIBLE_DEVICES", "value": "all"}])),
        "gpu-no-device-environment",
    ),
    (
        "NVIDIA_DRIVER_CAPABILITIES",
        pod(container(env=[{"name": "NVIDIA_DRIVER_CAPABILITIES", "value": "all"}])),
        "gpu-no-device-environment",
    ),
    (
        "NVIDIA_MIG_CONFIG_DEVICES",
        pod(container(env=[{"name": "NVIDIA_MIG_CONFIG_DEVICES", "value": "all"}])),
        "gpu-no-device-environment",
    ),
    (
        "envFrom in a GPU pod",
        pod(container(envFrom=[{"configMapRef": {"name": "c"}}])),
        "gpu-no-device-environment",
    ),
    (
        "hostPath /dev/nvidia0",
        pod(container(), volumes=[{"name": "d", "hostPath": {"path": "/dev/nvidia0"}}]),
        "gpu-host-paths-allow-list",
    ),
    (
        "hostPath /run/nvidia",
        pod(container(), volumes=[{"name": "d", "hostPath": {"path": "/run/nvidia"}}]),
        "gpu-host-paths-allow-list",
    ),
    (
        "SYS_ADMIN",
        pod(container(securityContext={"capabilities": {"add": ["SYS_ADMIN"]}})),
        "gpu-no-host-capabilities",
    ),
    (
        "ALL capabilities",
        pod(container(securityContext={"capabilities": {"add": ["ALL"]}})),
        "gpu-no-host-capabilities",
    ),
    ("hostIPC", pod(container(), hostIPC=True), "gpu-no-host-namespaces"),
    ("preset nodeName", pod(container(), nodeName="gpu-node-1"), "gpu-no-preset-node-name"),
    (
        "forged HAMi allocation",
        pod(container(), annotations={"hami.io/vgpu-node": "n1"}),
        "gpu-scheduler-owned-annotations",
    ),
    (
        "privileged container in a Deployment",
        deployment(container(securityContext={"privileged": True})),
        "gpu-no-privileged-containers",
    ),
    (
        "kube-system is excluded",
        pod(container(securityContext={"privileged": True}), namespace="kube-system"),
        None,
    ),
]


def _validate(
    policies: PolicySet, obj: dict[str, Any], endpoint: str = "validate", **review_args: Any
) -> Decision:
    request = parse_review(orjson.dumps(make_review(obj, **review_args)))
    return review(request, endpoint, ReviewDeps(policies=policies))  # type: ignore[arg-type]


@pytest.mark.parametrize(("obj", "rule"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_escape_routes_are_closed(bundled: PolicySet, obj: dict[str, Any], rule: str | None) -> None:
    decision = _validate(bundled, obj)
    if rule is None:
        assert decision.allowed, decision.message
    else:
        assert not decision.allowed
        assert f"[{rule}] {obj['kind']} {obj['metadata']['name']}" in decision.message


def test_every_violation_is_its_own_line_and_annotated(bundled: PolicySet) -> None:
    obj = pod(
        container(securityContext={"privileged": True, "capabilities": {"add": ["SYS_ADMIN"]}}), hostPID=True
    )
    decision = _validate(bundled, obj)
    lines = decision.message.split("\n")
    assert len(lines) == 3 and all(line.startswith("[gpu-") for line in lines)
    violated = decision.audit_annotations["constraints-violated"].split(",")
    assert violated == ["gpu-no-host-capabilities", "gpu-no-host-namespaces", "gpu-no-privileged-containers"]
    assert int(decision.audit_annotations["constraints-evaluated"]) >= 9


@pytest.mark.parametrize(
    ("user", "groups", "allowed"),
    [("mallory", ["system:authenticated"], False), ("root", ["system:masters"], True)],
)
def test_only_admins_may_exempt_a_namespace(
    bundled: PolicySet, user: str, groups: list[str], allowed: bool
) -> None:
    before = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team-a", "labels": {}}}
    after = {
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": {"name": "team-a", "labels": {"gpuwebhook.io/ignore": "true"}},
    }
    decision = _validate(
        bundled, after, operation="UPDATE", old=before, namespace="", username=user, groups=groups
    )
    assert decision.allowed is allowed


def test_the_scheduler_may_write_its_own_annotations(bundled: PolicySet) -> None:
    obj = pod(container(), annotations={"hami.io/vgpu-node": "n1"})
    assert _validate(bundled, obj, username="system:serviceaccount:kube-system:hami-scheduler").allowed


@pytest.mark.parametrize(("action", "warned"), [("warn", True), ("dryrun", False)])
def test_warn_and_dryrun_constraints_allow(tmp_path: Path, action: str, warned: bool) -> None:
    rule = BUNDLED_POLICIES / "security" / "gpu-privileged"
    shutil.copy(rule / "template.yaml", tmp_path / "template.yaml")
    constraint = (
        (rule / "constraint.yaml")
        .read_text()
        .replace("enforcementAction: deny", f"enforcementAction: {action}")
    )
    (tmp_path / "constraint.yaml").write_text(constraint)
    policies = load_directory(tmp_path)
    decision = _validate(policies, pod(container(securityContext={"privileged": True})))
    assert decision.allowed
    assert bool(decision.warnings) is warned
    assert all(len(w) < 120 for w in decision.warnings)
    assert [f.action for f in decision.findings] == [action]


def test_with_an_advisory_webhook_validate_answers_deny_rules_only(tmp_path: Path) -> None:
    rule = BUNDLED_POLICIES / "security" / "gpu-privileged"
    shutil.copy(rule / "template.yaml", tmp_path / "template.yaml")
    text = (
        (rule / "constraint.yaml").read_text().replace("enforcementAction: deny", "enforcementAction: warn")
    )
    (tmp_path / "constraint.yaml").write_text(text)
    policies = load_directory(tmp_path)
    request = parse_review(orjson.dumps(make_review(pod(container(securityContext={"privileged": True})))))
    split = ReviewDeps(policies=policies, settings=ReviewSettings(advisory_webhook=True))
    assert review(request, "validate", split).warnings == ()
    assert review(request, "advisory", split).warnings


def test_escape_pod_over_https(server: ServerProcess) -> None:
    doc = make_review(pod(container(env=[{"name": "NVIDIA_VISIBLE_DEVICES", "value": "all"}])))
    response = check_reply(doc, server.client().post_json("/validate", doc), "validate")
    assert response["allowed"] is False
    assert (
        "[gpu-no-device-environment] Pod p: container <main> sets NVIDIA_VISIBLE_DEVICES"
        in response["status"]["message"]
    )
    assert response["auditAnnotations"]["constraints-violated"] == "gpu-no-device-environment"
