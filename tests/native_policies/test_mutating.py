"""MutatingAdmissionPolicy through review(): the patch, applied, gives the documented object
(kubernetes/kubernetes staging/src/k8s.io/apiserver/pkg/admission/plugin/policy/mutating/)."""

from __future__ import annotations

import jsonpatch
import pytest

from tests.native_policies.support import bundled, deps, pod, policies, request
from tests.support.schema import assert_valid
from webhook.native.apply import merge
from webhook.review import review

SIDECAR = {
    "name": "mesh-proxy",
    "image": "mesh/proxy:v1.0.0",
    "args": ["proxy", "sidecar"],
    "restartPolicy": "Always",
}


def mutated(obj: dict, patch: tuple) -> dict:  # type: ignore[type-arg]
    result: dict = jsonpatch.apply_patch(obj, list(patch))  # type: ignore[type-arg]
    return result


@pytest.mark.parametrize("labels", [None, {"app": "web"}], ids=["no-labels", "labels"])
def test_documented_sidecar(labels: dict[str, str] | None) -> None:
    """The apply configuration adds the init container; the JSON patch, run next on its result,
    the label. The GPU mutators run after (kube-apiserver runs policies before webhooks), so the
    sidecar, which gets no GPU, is given NVIDIA_VISIBLE_DEVICES=void like every such container."""
    submitted = pod(labels=labels)
    decision = review(request(submitted), "mutate", deps(bundled()))
    assert decision.allowed
    final = mutated(submitted, decision.patch)
    assert_valid(final)
    assert final["metadata"]["labels"] == {**(labels or {}), "mesh": "enabled"}
    (sidecar,) = final["spec"]["initContainers"]
    assert {k: v for k, v in sidecar.items() if k != "env"} == SIDECAR
    assert sidecar["env"] == [{"name": "NVIDIA_VISIBLE_DEVICES", "value": "void"}]
    assert final["spec"]["containers"][0]["env"] == [{"name": "NVIDIA_VISIBLE_DEVICES", "value": "void"}]


def test_policy_not_bound_to_namespace() -> None:
    submitted = pod(namespace="plain")
    final = mutated(submitted, review(request(submitted), "mutate", deps(bundled())).patch)
    assert "initContainers" not in final["spec"]


def test_match_condition_keeps_it_idempotent() -> None:
    """A pod that has the sidecar already is left alone by the policy."""
    submitted = pod()
    submitted["spec"]["initContainers"] = [dict(SIDECAR)]
    final = mutated(submitted, review(request(submitted), "mutate", deps(bundled())).patch)
    assert [c["name"] for c in final["spec"]["initContainers"]] == ["mesh-proxy"]
    assert "mesh" not in final["metadata"].get("labels", {})


FAILING = """
apiVersion: admissionregistration.k8s.io/v1
kind: MutatingAdmissionPolicy
metadata: {name: m.example.com}
spec:
  failurePolicy: FAILURE
  matchConstraints:
    resourceRules:
      - {apiGroups: [""], apiVersions: [v1], operations: [CREATE], resources: [pods]}
  mutations:
    - patchType: JSONPatch
      jsonPatch:
        expression: '[JSONPatch{op: "test", path: "/metadata/name", value: "other"}]'
---
apiVersion: admissionregistration.k8s.io/v1
kind: MutatingAdmissionPolicyBinding
metadata: {name: mb.example.com}
spec:
  policyName: m.example.com
"""


@pytest.mark.parametrize(("failure", "allowed"), [("Fail", False), ("Ignore", True)])
def test_failed_patch_follows_failure_policy(failure: str, allowed: bool) -> None:
    decision = review(request(pod()), "mutate", deps(policies(FAILING.replace("FAILURE", failure))))
    assert decision.allowed is allowed
    if not allowed:
        assert "policy 'm.example.com' with binding 'mb.example.com' denied request" in decision.message


@pytest.mark.parametrize(
    ("current", "applied", "expected"),
    [
        ({"a": {"b": 1, "c": 2}}, {"a": {"b": 3}}, {"a": {"b": 3, "c": 2}}),
        ({"args": ["x", "y"]}, {"args": ["z"]}, {"args": ["z"]}),
        (
            {"containers": [{"name": "a", "image": "1"}, {"name": "b", "image": "2"}]},
            {"containers": [{"name": "b", "image": "3"}, {"name": "c", "image": "4"}]},
            {
                "containers": [
                    {"name": "a", "image": "1"},
                    {"name": "b", "image": "3"},
                    {"name": "c", "image": "4"},
                ]
            },
        ),
        ({"finalizers": ["a"]}, {"finalizers": ["a", "b"]}, {"finalizers": ["a", "b"]}),
        (
            {"ports": [{"containerPort": 80, "name": "http"}]},
            {"ports": [{"containerPort": 80, "protocol": "TCP", "name": "web"}]},
            {"ports": [{"containerPort": 80, "name": "web", "protocol": "TCP"}]},
        ),
    ],
    ids=["maps-merge", "atomic-list-replaced", "list-map-by-name", "set-union", "port-key-defaults-tcp"],
)
def test_apply_configuration_merge(current: dict, applied: dict, expected: dict) -> None:  # type: ignore[type-arg]
    """Server-side apply's merge (mutating/patch/smd.go) over core/v1's list types."""
    assert merge(current, applied) == expected
