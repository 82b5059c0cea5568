"""Claims through the installed webhook configurations, as kube-apiserver dispatches them, against
review() given the claims and templates as its inventory (what `serve --inventory` reads)."""

from __future__ import annotations

import dataclasses
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.conftest import BUNDLED_POLICIES
from tests.dra.objects import NS, claim, pod, request, template
from tests.support.dispatch import Dispatcher, Request, installed
from tests.support.policies import bundled_policies
from tests.support.schema import assert_valid
from webhook.inventory import Inventory
from webhook.offline import offline_deps
from webhook.policy.loader import load_directory
from webhook.quota.policy import parse_quota

# k8s.io/api resource/v1 types.go DRAAdminNamespaceLabelKey: kube-apiserver itself admits adminAccess
# only in namespaces labelled so.
KUBERNETES_ADMIN = "resource.kubernetes.io/admin-access"
# The Kubernetes documentation's admin-access example (concepts/scheduling-eviction/
# dynamic-resource-allocation, "Admin access"): every device of a fictional driver's class.
DOCS_ADMIN_TEMPLATE = template(
    "large-black-cat-claim-template",
    request("req-0", "resource.example.com", allocationMode="All", adminAccess=True),
    namespace="monitoring",
)

INVENTORY = Inventory(
    "dra",
    (
        claim("two", request(count=2)),
        claim("eight", request(count=8)),
        claim("nine", request(count=9)),
        claim("one", namespace="example-mig"),
        claim("one", namespace="example-training"),
        template("single-gpu"),
        # One pod already holds a GPU through a shared claim.
        claim("shared"),
        pod("holder", claim_name="shared"),
        # The server reads namespace labels from its cluster state (here the inventory).
        {
            "apiVersion": "v1",
            "kind": "Namespace",
            "metadata": {"name": "admins", "labels": {"gpuwebhook.io/dra-admin-access": "true"}},
        },
        {
            "apiVersion": "v1",
            "kind": "Namespace",
            "metadata": {"name": "monitoring", "labels": {KUBERNETES_ADMIN: "true"}},
        },
        {
            "apiVersion": "v1",
            "kind": "Namespace",
            "metadata": {"name": "shouting", "labels": {KUBERNETES_ADMIN: "True"}},
        },
        claim("watch-all", request(allocationMode="All", adminAccess=True), namespace="monitoring"),
    ),
)
QUOTA = {
    "apiVersion": "gpuwebhook.io/v1alpha1",
    "kind": "GPUQuota",
    "metadata": {"name": "team-a"},
    "spec": {"match": {"namespaces": [NS]}, "limits": {"gpus": 3}},
}


@pytest.fixture(scope="module")
def dispatcher() -> Iterator[Dispatcher]:
    policies = bundled_policies()
    quota = parse_quota(QUOTA, "quota.yaml", lambda _: 1)
    policies = dataclasses.replace(policies, quotas=(*policies.quotas, quota))
    with installed(offline_deps(policies, INVENTORY)) as dispatcher:
        yield dispatcher


def create(obj: dict[str, Any], **labels: str) -> Request:
    resource = {
        "Pod": "pods",
        "ResourceClaim": "resourceclaims",
        "ResourceClaimTemplate": "resourceclaimtemplates",
    }
    return Request("CREATE", obj, resource=resource[obj["kind"]], namespace_labels=labels)


POD_CASES = [
    ("a claim of 2 fits the quota (1 of 3 in use)", pod(claim_name="two"), True, None),
    ("a claim of 8 passes no 3-GPU quota", pod(claim_name="eight"), False, 'GPU quota "team-a" exceeded'),
    ("a claim of 9 passes no max-per-pod of 8", pod(claim_name="nine"), False, "gpu-max-per-pod"),
    ("a template's GPU fits", pod(template_name="single-gpu"), True, None),
    ("the shared claim is counted already", pod(claim_name="shared"), True, None),
    (
        "a claim that does not exist is named",
        pod(claim_name="nowhere"),
        False,
        "ResourceClaim team-a/nowhere",
    ),
    (
        "a privileged pod with a claim",
        pod(
            claim_name="two",
            containers=[
                {
                    "name": "ctr",
                    "image": "registry.example.com/cuda:12",
                    "securityContext": {"privileged": True},
                    "resources": {"claims": [{"name": "gpu"}]},
                }
            ],
        ),
        False,
        "privileged",
    ),
]


@pytest.mark.parametrize(("case", "shown", "allowed", "needle"), POD_CASES, ids=[c[0] for c in POD_CASES])
def test_pods_holding_claims(
    dispatcher: Dispatcher, case: str, shown: dict[str, Any], allowed: bool, needle: str | None
) -> None:
    assert_valid(shown)
    outcome = dispatcher.admit(create(shown))
    assert outcome.allowed is allowed, (case, outcome.message)
    if needle:
        assert needle in outcome.message


def test_sharing_policies_see_claimed_gpus(dispatcher: Dispatcher) -> None:
    """Policy matching applies (the exclusive policy stamps the pod), and a claim sidesteps a
    policy that shares GPUs some other way (MIG here): policies/examples."""
    training = pod(claim_name="one", namespace="example-training")
    training["metadata"]["labels"] = {"gpuwebhook.io/workload": "training"}
    exclusive = dispatcher.admit(create(training))
    assert exclusive.allowed, exclusive.message
    assert exclusive.object is not None
    assert "gpuwebhook.io/applied" in exclusive.object["metadata"]["annotations"]
    mig = dispatcher.admit(create(pod(claim_name="one", namespace="example-mig")))
    assert not mig.allowed
    assert "[gpu-builtin/sharing-enforced]" in mig.message and "ResourceClaim example-mig/one" in mig.message


def test_a_pod_holding_an_admin_claim_on_every_gpu_is_admitted(dispatcher: Dispatcher) -> None:
    monitor = pod("dcgm", claim_name="watch-all", namespace="monitoring")
    outcome = dispatcher.admit(create(monitor, **{KUBERNETES_ADMIN: "true"}))
    assert outcome.allowed, outcome.message


def test_quota_counts_claims(dispatcher: Dispatcher) -> None:
    over = pod("big", claim_name="two", limits={"nvidia.com/gpu": "1"})  # 1 in use + 3 > 3
    outcome = dispatcher.admit(create(over))
    assert not outcome.allowed and 'GPU quota "team-a" exceeded' in outcome.message


CLAIM_CASES = [
    ("a count of 1", claim("one"), {}, True, None),
    ("allocationMode All", claim("all", request(allocationMode="All")), {}, False, "allocationMode All"),
    ("all, in a template", template("all", request(allocationMode="All")), {}, False, "allocationMode All"),
    ("adminAccess", claim("admin", request(adminAccess=True)), {}, False, "dra-admin-access"),
    (
        "adminAccess where the namespace allows it",
        claim("admin", request(adminAccess=True), namespace="admins"),
        {"gpuwebhook.io/dra-admin-access": "true"},
        True,
        None,
    ),
    (
        "the Kubernetes docs' admin-access template, in a namespace labelled as Kubernetes asks",
        DOCS_ADMIN_TEMPLATE,
        {KUBERNETES_ADMIN: "true"},
        True,
        None,
    ),
    (
        "adminAccess on every GPU of a node, in a namespace labelled as Kubernetes asks",
        claim("watch", request(allocationMode="All", adminAccess=True), namespace="monitoring"),
        {KUBERNETES_ADMIN: "true"},
        True,
        None,
    ),
    (
        "adminAccess on every GPU of a node, unlabelled",
        claim("watch", request(allocationMode="All", adminAccess=True)),
        {},
        False,
        "lacks the label resource.kubernetes.io/admin-access=true",
    ),
    (
        "the label is case-sensitive",
        claim("watch", request(adminAccess=True), namespace="shouting"),
        {KUBERNETES_ADMIN: "True"},
        False,
        "adminAccess",
    ),
    (
        "allocationMode All without adminAccess, in a labelled namespace",
        claim("all", request(allocationMode="All"), namespace="monitoring"),
        {KUBERNETES_ADMIN: "true"},
        False,
        "allocationMode All",
    ),
    ("more than max-per-pod", claim("many", request(count=9)), {}, False, "gpu-max-per-pod"),
    ("max-per-pod in a template", template("many", request(count=9)), {}, False, "gpu-max-per-pod"),
    (
        "all of a class that is no GPU",
        claim("nics", request("nic", "nic.example.com", allocationMode="All")),
        {},
        True,
        None,
    ),
]


@pytest.mark.parametrize(
    ("case", "shown", "labels", "allowed", "needle"), CLAIM_CASES, ids=[c[0] for c in CLAIM_CASES]
)
def test_claims_are_judged_themselves(
    dispatcher: Dispatcher,
    case: str,
    shown: dict[str, Any],
    labels: dict[str, str],
    allowed: bool,
    needle: str | None,
) -> None:
    assert_valid(shown)
    outcome = dispatcher.admit(create(shown, **labels))
    assert outcome.allowed is allowed, (case, outcome.message)
    if needle:
        assert needle in outcome.message


def test_claims_in_exempt_namespaces_are_never_sent(dispatcher: Dispatcher) -> None:
    outcome = dispatcher.admit(create(claim("all", request(allocationMode="All"), namespace="kube-system")))
    assert outcome.allowed and not outcome.called


WARN_ON_CLASSES = {
    "apiVersion": "constraints.gatekeeper.sh/v1beta1",
    "kind": "GpuDraDeviceClasses",
    "metadata": {"name": "team-a-whole-gpus-advised"},
    "spec": {
        "enforcementAction": "warn",
        "match": {
            "namespaces": [NS],
            "kinds": [
                {"apiGroups": ["resource.k8s.io"], "kinds": ["ResourceClaim", "ResourceClaimTemplate"]}
            ],
        },
        "parameters": {"allowedClasses": ["gpu.nvidia.com"]},
    },
}


def test_warn_constraints_on_claims_reach_the_advisory_webhook(tmp_path: Path) -> None:
    """The server runs with --advisory-webhook: /validate enforces, /validate-advisory warns."""
    shutil.copytree(BUNDLED_POLICIES, tmp_path / "policies")
    (tmp_path / "policies" / "advice.yaml").write_text(yaml.safe_dump(WARN_ON_CLASSES))
    deps = offline_deps(load_directory(tmp_path / "policies"), INVENTORY)
    deps = dataclasses.replace(deps, settings=dataclasses.replace(deps.settings, advisory_webhook=True))
    with installed(deps) as dispatcher:
        outcome = dispatcher.admit(create(claim("slices", request(device_class="mig.nvidia.com"))))
    assert outcome.allowed, outcome.message
    assert "advisory.validate.gpuwebhook.io" in outcome.called
    assert any("mig.nvidia.com" in w for w in outcome.warnings), outcome.warnings
