"""The optional policy that guards the gpuwebhook.io/ignore label and the DRA admin-access labels,
evaluated like kube-apiserver would."""

from __future__ import annotations

from typing import Any

import kubernetes_validate
import pytest
import yaml

from tests.manifests.objects import REPO
from tests.support.cel import CelProcess
from webhook.manifests import Manifest

POLICY_FILE = REPO / "manifests/extras/protect-ignore-label.yaml"


@pytest.fixture(scope="module")
def objects() -> list[Manifest]:
    return [doc for doc in yaml.safe_load_all(POLICY_FILE.read_text()) if doc is not None]


def test_the_policy_and_binding_are_valid_and_bound(objects: list[Manifest]) -> None:
    policy, binding = objects
    for obj in objects:
        kubernetes_validate.validate(obj, "1.30.0", strict=True)
    assert binding["spec"] == {"policyName": policy["metadata"]["name"], "validationActions": ["Deny"]}
    assert policy["spec"]["failurePolicy"] == "Fail"


def _namespace(labels: dict[str, str] | None) -> dict[str, Any]:
    metadata: dict[str, Any] = {"name": "team-a"}
    if labels is not None:
        metadata["labels"] = labels
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": metadata}


def admitted(cel: CelProcess, policy: Manifest, groups: list[str], new: Any, old: Any = None) -> bool:
    return refusal(cel, policy, groups, new, old) is None


def refusal(cel: CelProcess, policy: Manifest, groups: list[str], new: Any, old: Any = None) -> str | None:
    """The message kube-apiserver would deny with, or None when the policy admits the request."""
    spec = policy["spec"]
    activation: dict[str, Any] = {
        "object": new,
        "oldObject": old,
        "request": {
            "operation": "UPDATE" if old else "CREATE",
            "userInfo": {"username": "u", "groups": groups},
        },
    }
    if not all(cel.evaluate(c["expression"], activation) for c in spec["matchConditions"]):
        return None
    activation["variables"] = {v["name"]: cel.value(v["expression"], activation) for v in spec["variables"]}
    for validation in spec["validations"]:
        if not cel.evaluate(validation["expression"], activation):
            return str(validation["message"])
    return None


IGNORE = {"gpuwebhook.io/ignore": "true"}
DRA_ADMIN = {"gpuwebhook.io/dra-admin-access": "true"}
# k8s.io/api resource/v1/types.go DRAAdminNamespaceLabelKey
KUBERNETES_ADMIN = {"resource.kubernetes.io/admin-access": "true"}
USERS = ["system:authenticated"]
ADMINS = ["system:authenticated", "gpu-webhook-admins"]


@pytest.mark.parametrize(
    ("case", "groups", "new", "old", "allowed"),
    [
        ("user creates a plain namespace", USERS, _namespace(None), None, True),
        ("user creates an opted-out namespace", USERS, _namespace(IGNORE), None, False),
        ("user adds the label", USERS, _namespace(IGNORE), _namespace({"team": "a"}), False),
        ("user removes the label", USERS, _namespace({}), _namespace(IGNORE), False),
        (
            "user flips the label",
            USERS,
            _namespace({"gpuwebhook.io/ignore": "false"}),
            _namespace(IGNORE),
            False,
        ),
        ("user edits other labels", USERS, _namespace({**IGNORE, "team": "b"}), _namespace(IGNORE), True),
        ("admin adds the label", ADMINS, _namespace(IGNORE), _namespace(None), True),
        ("admin creates an opted-out namespace", ADMINS, _namespace(IGNORE), None, True),
        ("user adds dra-admin-access", USERS, _namespace(DRA_ADMIN), _namespace({}), False),
        ("user adds Kubernetes' admin-access", USERS, _namespace(KUBERNETES_ADMIN), _namespace(None), False),
        ("user removes Kubernetes' label", USERS, _namespace(None), _namespace(KUBERNETES_ADMIN), False),
        ("user creates an admin-access namespace", USERS, _namespace(KUBERNETES_ADMIN), None, False),
        ("user keeps admin-access", USERS, _namespace({**DRA_ADMIN, "a": "b"}), _namespace(DRA_ADMIN), True),
        ("admin adds both labels", ADMINS, _namespace({**DRA_ADMIN, **KUBERNETES_ADMIN}), None, True),
    ],
)
def test_only_administrators_may_touch_the_label(
    cel: CelProcess, objects: list[Manifest], case: str, groups: list[str], new: Any, old: Any, allowed: bool
) -> None:
    assert admitted(cel, objects[0], groups, new, old) is allowed, case


def test_the_refusal_names_the_guarded_labels(cel: CelProcess, objects: list[Manifest]) -> None:
    message = refusal(cel, objects[0], USERS, _namespace(KUBERNETES_ADMIN), _namespace({}))
    assert message is not None
    for label in (*IGNORE, *DRA_ADMIN, *KUBERNETES_ADMIN):
        assert label in " ".join(message.split())


def test_the_subresources_that_change_labels_are_matched(objects: list[Manifest]) -> None:
    """kube-apiserver's namespace status and finalize strategies keep the labels a request sends
    (kubernetes/kubernetes pkg/registry/core/namespace/strategy.go, PrepareForUpdate)."""
    (rule,) = objects[0]["spec"]["matchConstraints"]["resourceRules"]
    assert rule["resources"] == ["namespaces", "namespaces/status", "namespaces/finalize"]
