"""Gatekeeper mutators in /mutate: before the GPU mutators, one patch, any kind the webhook is sent."""

from __future__ import annotations

from typing import Any

import jsonpatch
import pytest

from tests.gkmutation.support import assign, mutated, pod, policies
from tests.support.reviews import make_review
from tests.support.schema import assert_valid
from webhook.policy.model import PolicySet
from webhook.review import ReviewDeps, _gpu_mutate
from webhook.types import AdmissionRequest

SECURITY = assign(
    "no-privilege-escalation",
    "spec.containers[name: *].securityContext.allowPrivilegeEscalation",
    "{assign: {value: false}}",
)


def _final(policy_set: PolicySet, obj: dict[str, Any], **request: Any) -> dict[str, Any]:
    decision = mutated(policy_set, obj, **request)
    assert decision.allowed, decision.message
    result = jsonpatch.apply_patch(obj, list(decision.patch))
    assert isinstance(result, dict)
    return result


def test_one_patch_holds_gatekeepers_change_and_the_device_variable() -> None:
    final = _final(policies(SECURITY), pod())
    container = final["spec"]["containers"][0]
    assert container["securityContext"] == {"allowPrivilegeEscalation": False}
    assert {"name": "NVIDIA_VISIBLE_DEVICES", "value": "void"} in container["env"]
    assert_valid(final)


def test_the_gpu_rules_see_what_gatekeeper_wrote() -> None:
    """Gatekeeper first: a GPU limit it adds makes a GPU pod, which keeps its devices (no void)."""
    gpu = assign(
        "one-gpu",
        "spec.containers[name: main].resources.limits.'nvidia.com/gpu'",
        "{assign: {value: '1'}}",
    )
    final = _final(policies(gpu), pod())
    container = final["spec"]["containers"][0]
    assert container["resources"]["limits"] == {"nvidia.com/gpu": "1"}
    assert "env" not in container
    assert_valid(final)


def test_without_gatekeeper_mutators_the_gpu_path_alone_runs() -> None:
    empty = PolicySet()
    assert empty.mutators is None
    request: AdmissionRequest = make_review(pod())["request"]
    deps = ReviewDeps(policies=empty)
    assert mutated(empty, pod()) == _gpu_mutate(request, deps)


def test_other_kinds_and_updates_are_mutated() -> None:
    """Gatekeeper mutates on CREATE and UPDATE, whatever the kind its applyTo names."""
    replicas = assign("two-replicas", "spec.replicas", "{assign: {value: 2}}", kind="Deployment")
    deployment = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "web", "namespace": "default"},
        "spec": {
            "selector": {"matchLabels": {"app": "web"}},
            "template": {
                "metadata": {"labels": {"app": "web"}},
                "spec": {"containers": [{"name": "w", "image": "nginx"}]},
            },
        },
    }
    final = _final(policies(replicas), deployment, operation="UPDATE", old=deployment)
    assert final["spec"]["replicas"] == 2
    assert_valid(final)


@pytest.mark.parametrize(
    ("request_args", "obj"),
    [
        ({"operation": "DELETE"}, pod()),
        ({"namespace": "kube-system"}, pod()),
        (
            {},
            {
                "apiVersion": "constraints.gatekeeper.sh/v1beta1",
                "kind": "K8sRequiredLabels",
                "metadata": {"name": "x"},
            },
        ),
    ],
    ids=["delete", "exempt namespace", "gatekeeper's own resource"],
)
def test_what_gatekeeper_leaves_alone_is_left_alone(
    request_args: dict[str, Any], obj: dict[str, Any]
) -> None:
    loaded = policies(assign("a", "spec.hostname", "{assign: {value: h}}"))
    decision = mutated(loaded, obj, **request_args)
    assert not any(op["path"].startswith("/spec/hostname") for op in decision.patch)


def test_an_object_of_the_wrong_shape_is_refused_with_the_mutator_named() -> None:
    bad = pod()
    bad["spec"]["securityContext"] = ["not", "an", "object"]
    seccomp = assign(
        "seccomp", "spec.securityContext.seccompProfile", "{assign: {value: {type: RuntimeDefault}}}"
    )
    decision = mutated(policies(seccomp), bad)
    assert not decision.allowed and decision.code == 400
    assert "[gatekeeper-mutation] Assign seccomp" in decision.message
