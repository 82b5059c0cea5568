"""All three kinds of mutation in one /mutate call, in the order kube-apiserver calls them:
MutatingAdmissionPolicies (admission plugin MutatingAdmissionPolicy, before any webhook), then
Gatekeeper's webhook (its configuration's name sorts first), then ours."""

from __future__ import annotations

from pathlib import Path
from typing import cast

import jsonpatch

from tests.gkmutation.support import assign, mutated, pod
from tests.support.reviews import make_review
from tests.support.schema import assert_valid
from webhook.policy.loader import load_sources
from webhook.review import ReviewDeps, review
from webhook.types import AdmissionRequest

SIDECAR = Path(__file__).parents[1] / "native_policies" / "policies" / "sidecar.yaml"
# The sidecar policy's binding selects namespaces labelled mesh=on.
NAMESPACE_LABELS = {"mesh": "on"}
NO_ESCALATION = assign(
    "no-privilege-escalation",
    "spec.initContainers[name: *].securityContext.allowPrivilegeEscalation",
    "{assign: {value: false}}",
)


def test_gatekeeper_sees_what_the_native_policy_added_and_ours_has_the_last_word() -> None:
    policy_set = load_sources(
        [(str(SIDECAR), SIDECAR.read_bytes()), ("gatekeeper.yaml", NO_ESCALATION.encode())]
    )
    obj = pod()
    request = cast(AdmissionRequest, make_review(obj)["request"])
    deps = ReviewDeps(policies=policy_set, namespace_labels=lambda _: NAMESPACE_LABELS)
    decision = review(request, "mutate", deps)
    assert decision.allowed, decision.message
    final = jsonpatch.apply_patch(obj, list(decision.patch))
    [sidecar] = final["spec"]["initContainers"]
    assert sidecar["name"] == "mesh-proxy"  # the MutatingAdmissionPolicy's apply configuration
    assert sidecar["securityContext"] == {"allowPrivilegeEscalation": False}  # Gatekeeper's Assign on it
    assert final["metadata"]["labels"]["mesh"] == "enabled"  # the policy's JSON patch
    assert {"name": "NVIDIA_VISIBLE_DEVICES", "value": "void"} in sidecar["env"]  # ours, last
    assert_valid(final)
    again = review(cast(AdmissionRequest, make_review(final)["request"]), "mutate", deps)
    assert again.allowed and not again.patch  # the three together reach a fixed point


def test_without_the_binding_namespace_only_gatekeeper_and_ours_run() -> None:
    policy_set = load_sources(
        [(str(SIDECAR), SIDECAR.read_bytes()), ("gatekeeper.yaml", NO_ESCALATION.encode())]
    )
    decision = mutated(policy_set, pod())
    final = jsonpatch.apply_patch(pod(), list(decision.patch))
    assert "initContainers" not in final["spec"]
    assert {"name": "NVIDIA_VISIBLE_DEVICES", "value": "void"} in final["spec"]["containers"][0]["env"]
