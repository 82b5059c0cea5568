"""The scan presents existing objects to Gatekeeper templates as Gatekeeper's audit does.

Upstream: open-policy-agent/gatekeeper pkg/audit/manager.go reviews each listed object as a
target.AugmentedUnstructured (the object, its Namespace, source Original) with no operation;
pkg/target/target.go (augmentedUnstructuredToAdmissionRequest, unstructuredToAdmissionRequest)
turns it into a request of kind, name, namespace and object only. Templates of the
gatekeeper-library that exempt UPDATE (library/pod-security-policy/privileged-containers and its
lib.exclude_update) therefore judge running pods in an audit.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.support.workloads import namespace, pod, workload
from webhook.inventory import parse_inventory
from webhook.policy.loader import load_directory
from webhook.policy.model import PolicySet
from webhook.review import ReviewSettings
from webhook.scan.judge import audit_review, scan_request
from webhook.scan.kinds import scan_kind
from webhook.scan.sources import from_inventory
from webhook.scan.stream import scan_once

# Shaped like gatekeeper-library's privileged-containers template (its Rego engine): the rule is
# skipped on UPDATE because the field is immutable, so only a CREATE or an audit reports it.
TEMPLATE = """
apiVersion: templates.gatekeeper.sh/v1
kind: ConstraintTemplate
metadata:
  name: libprivileged
spec:
  crd:
    spec:
      names:
        kind: LibPrivileged
  targets:
  - target: admission.k8s.gatekeeper.sh
    rego: |
      package libprivileged

      import data.lib.exclude_update.is_update

      violation[{"msg": msg, "details": {}}] {
        not is_update(input.review)
        c := input_containers[_]
        c.securityContext.privileged
        msg := sprintf("Privileged container is not allowed: %v", [c.name])
      }

      input_containers[c] {
        c := input.review.object.spec.containers[_]
      }

      input_containers[c] {
        c := input.review.object.spec.initContainers[_]
      }
    libs:
    - |
      package lib.exclude_update

      is_update(review) {
        review.operation == "UPDATE"
      }
"""
CONSTRAINT = """
apiVersion: constraints.gatekeeper.sh/v1beta1
kind: LibPrivileged
metadata:
  name: psp-privileged-container
spec:
  match:
    kinds:
    - apiGroups: [""]
      kinds: [Pod]
"""
PRIVILEGED = {"securityContext": {"privileged": True}}


@pytest.fixture(scope="module")
def library_policies(tmp_path_factory: pytest.TempPathFactory) -> PolicySet:
    directory = tmp_path_factory.mktemp("library")
    (directory / "template.yaml").write_text(TEMPLATE)
    (directory / "constraint.yaml").write_text(CONSTRAINT)
    return load_directory(directory)


def test_the_audit_review_holds_only_what_gatekeeper_audit_sets() -> None:
    """pkg/target/target.go unstructuredToAdmissionRequest: kind, name, namespace, object; the
    AdmissionRequest's other fields keep Go's zero values (operation "", uid "", userInfo {})."""
    obj = pod("p", "ml")
    kind = scan_kind(obj)
    assert kind is not None
    review = dict(audit_review(scan_request(obj, kind)))
    assert review == {
        "uid": "",
        "kind": {"group": "", "version": "v1", "kind": "Pod"},
        "resource": {"group": "", "version": "", "resource": ""},
        "operation": "",
        "userInfo": {},
        "name": "p",
        "namespace": "ml",
        "object": obj,
        "oldObject": None,
    }


@pytest.mark.parametrize(
    "obj",
    [namespace("team"), workload("Deployment", "web")],
    ids=["cluster-scoped Namespace", "Deployment"],
)
def test_an_object_without_a_namespace_gets_none_and_a_workload_its_own_kind(obj: dict[str, Any]) -> None:
    """obj.GetNamespace() is empty for a Namespace: its review names no namespace."""
    kind = scan_kind(obj)
    assert kind is not None
    review = audit_review(scan_request(obj, kind))
    assert review["kind"]["kind"] == obj["kind"] and review["operation"] == ""
    assert review.get("namespace", "") == obj["metadata"].get("namespace", "")


def test_every_privileged_pod_is_found_by_a_template_that_exempts_updates(
    library_policies: PolicySet, tmp_path: Path
) -> None:
    objects = [
        namespace("ml"),
        pod("trainer", main={"name": "main", "image": "cuda", **PRIVILEGED}),
        pod("debugger", initContainers=[{"name": "setup", "image": "busybox", **PRIVILEGED}]),
        pod("plain"),
    ]
    inventory = parse_inventory(yaml.safe_dump_all(objects), "test")
    outcome = scan_once(from_inventory(inventory), library_policies, ReviewSettings(), keep=True)
    found = {r["name"]: [f["message"] for f in r["findings"]] for r in outcome.objects}
    assert found == {
        "trainer": ["Privileged container is not allowed: main"],
        "debugger": ["Privileged container is not allowed: setup"],
    }
    assert outcome.summary.violations[("psp-privileged-container", "deny")] == 2
