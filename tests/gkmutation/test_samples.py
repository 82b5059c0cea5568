"""The gatekeeper-library's mutation samples (mutation/pod-security-policy/*/samples), each
through review() on its example pod: the documented result, and a valid Pod."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import jsonpatch
import pytest

from tests.gkmutation.support import mutated
from tests.support.schema import assert_valid
from webhook.policy.loader import load_sources

SAMPLES = Path(__file__).parent / "samples"


def _example(name: str, security_context: dict[str, Any] | None = None) -> dict[str, Any]:
    """The library's example pods: one nginx container named nginx, labelled app: <name>."""
    container: dict[str, Any] = {"name": "nginx", "image": "nginx"}
    if security_context is not None:
        container["securityContext"] = security_context
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default", "labels": {"app": name}},
        "spec": {"containers": [container]},
    }


CASES: list[tuple[str, dict[str, Any], dict[str, Any], dict[str, Any]]] = [
    # (sample file, example pod, expected container securityContext, expected pod securityContext)
    (
        "allow-privilege-escalation.yaml",
        _example("nginx-default-privilege-escalation"),
        {"allowPrivilegeEscalation": False},
        {},
    ),
    (
        "capabilities-assign.yaml",
        _example("nginx-default-add-capabilities"),
        {"capabilities": {"add": ["NEW_CAPABILITY"]}},
        {},
    ),
    (
        "capabilities-modifyset.yaml",
        _example("nginx-default-add-capabilities"),
        {"capabilities": {"add": ["NEW_CAPABILITY"]}},
        {},
    ),
    (
        "read-only-root-filesystem.yaml",
        _example("nginx-readonlyrootfs"),
        {"readOnlyRootFilesystem": True},
        {},
    ),
    ("seccomp.yaml", _example("nginx-default-seccomp"), {}, {"seccompProfile": {"type": "RuntimeDefault"}}),
    (
        "selinux.yaml",
        _example("nginx-default-selinux"),
        {
            "seLinuxOptions": {
                "level": "s1:c234,c567",
                "user": "sysadm_u",
                "role": "sysadm_r",
                "type": "svirt_lxc_net_t",
            }
        },
        {},
    ),
    (
        "users.yaml",
        _example("nginx-users"),
        {"runAsNonRoot": True, "runAsGroup": 2000, "runAsUser": 1000},
        {"fsGroup": 3000, "supplementalGroups": [3000]},
    ),
    (
        # users/samples/users/example-nomutation.yaml: what the pod sets is kept (MustNotExist).
        "users.yaml",
        _example("nginx-run-as-root", {"runAsUser": 0, "runAsNonRoot": False}),
        {"runAsUser": 0, "runAsNonRoot": False, "runAsGroup": 2000},
        {"fsGroup": 3000, "supplementalGroups": [3000]},
    ),
]


@pytest.mark.parametrize(
    ("sample", "pod", "container", "pod_context"),
    CASES,
    ids=[c[0] + ":" + c[1]["metadata"]["name"] for c in CASES],
)
def test_library_sample(
    sample: str, pod: dict[str, Any], container: dict[str, Any], pod_context: dict[str, Any]
) -> None:
    path = SAMPLES / sample
    policies = load_sources([(str(path), path.read_bytes())])
    decision = mutated(policies, pod)
    assert decision.allowed, decision.message
    final = jsonpatch.apply_patch(pod, list(decision.patch))
    assert final["spec"]["containers"][0].get("securityContext", {}) == container
    assert final["spec"].get("securityContext", {}) == pod_context
    assert_valid(final)
