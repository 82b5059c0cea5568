"""The webhook configurations cannot deadlock the cluster or block it on advice."""

from __future__ import annotations

import base64
from pathlib import Path
from typing import Any

import pytest

from tests.manifests.objects import one, webhooks_by_name
from webhook.config import EXEMPT_NAMESPACES
from webhook.manifests import Manifest

GPU_MUTATE = "gpu-pods.mutate.gpuwebhook.io"
NON_GPU_MUTATE = "non-gpu-pods.mutate.gpuwebhook.io"
GPU_PODS = "gpu-pods.validate.gpuwebhook.io"
WORKLOADS = "workloads.validate.gpuwebhook.io"
ADVISORY = "advisory.validate.gpuwebhook.io"
NAMESPACES = "namespaces.validate.gpuwebhook.io"
WORKLOAD_RESOURCES = {("apps", r) for r in ("deployments", "statefulsets", "daemonsets", "replicasets")} | {
    ("batch", "jobs"),
    ("batch", "cronjobs"),
    ("", "replicationcontrollers"),
    ("", "podtemplates"),
}

Webhook = dict[str, Any]


@pytest.fixture(scope="module")
def hooks(rendered: list[Manifest]) -> dict[str, Webhook]:
    return webhooks_by_name(rendered)


def test_the_webhooks_are_the_six_we_designed(hooks: dict[str, Webhook], rendered: list[Manifest]) -> None:
    """In this order: the kustomize components patch them by index (guarded by `test` operations)."""
    assert set(hooks) == {GPU_MUTATE, NON_GPU_MUTATE, GPU_PODS, WORKLOADS, ADVISORY, NAMESPACES}
    mutating = [h["name"] for h in one(rendered, "MutatingWebhookConfiguration")["webhooks"]]
    validating = [h["name"] for h in one(rendered, "ValidatingWebhookConfiguration")["webhooks"]]
    assert mutating == [GPU_MUTATE, NON_GPU_MUTATE]
    assert validating == [GPU_PODS, WORKLOADS, ADVISORY, NAMESPACES]


@pytest.mark.parametrize(
    ("name", "failure_policy", "timeout", "path"),
    [
        (GPU_MUTATE, "Fail", 3, "/mutate"),
        (NON_GPU_MUTATE, "Fail", 3, "/mutate"),
        (GPU_PODS, "Fail", 5, "/validate"),
        (WORKLOADS, "Fail", 5, "/validate"),
        (ADVISORY, "Ignore", 5, "/validate-advisory"),
        (NAMESPACES, "Fail", 5, "/validate"),
    ],
)
def test_failure_policy_timeout_and_path(
    hooks: dict[str, Webhook], name: str, failure_policy: str, timeout: int, path: str
) -> None:
    hook = hooks[name]
    assert hook["failurePolicy"] == failure_policy
    assert hook["timeoutSeconds"] == timeout <= 10
    assert hook["clientConfig"]["service"] == {
        "name": "gpu-webhook",
        "namespace": "gpu-system",
        "path": path,
        "port": 443,
    }


@pytest.mark.parametrize("name", [GPU_MUTATE, NON_GPU_MUTATE, GPU_PODS, WORKLOADS, ADVISORY])
def test_common_settings(hooks: dict[str, Webhook], name: str) -> None:
    hook = hooks[name]
    assert hook["sideEffects"] == "NoneOnDryRun"
    assert hook["admissionReviewVersions"] == ["v1"]
    assert hook["matchPolicy"] == "Equivalent"
    assert all(rule["scope"] == "Namespaced" for rule in hook["rules"])


@pytest.mark.parametrize("name", [GPU_MUTATE, NON_GPU_MUTATE, GPU_PODS, WORKLOADS, ADVISORY])
def test_system_our_own_and_opted_out_namespaces_are_excluded(hooks: dict[str, Webhook], name: str) -> None:
    """NotIn also matches namespaces without the label, so everything else stays covered."""
    expressions = hooks[name]["namespaceSelector"]["matchExpressions"]
    assert {
        "key": "kubernetes.io/metadata.name",
        "operator": "NotIn",
        "values": list(EXEMPT_NAMESPACES),
    } in (expressions)
    assert {"key": "gpuwebhook.io/ignore", "operator": "NotIn", "values": ["true"]} in expressions
    assert "matchLabels" not in hooks[name]["namespaceSelector"]
    assert "objectSelector" not in hooks[name]


POD_CREATE = {
    "apiGroups": [""],
    "apiVersions": ["v1"],
    "operations": ["CREATE"],
    "resources": ["pods"],
    "scope": "Namespaced",
}
DEBUG_CONTAINERS = {
    "apiGroups": [""],
    "apiVersions": ["v1"],
    "operations": ["UPDATE"],
    "resources": ["pods/ephemeralcontainers"],
    "scope": "Namespaced",
}


def test_mutation_sees_every_pod_creation_and_debug_container_and_is_reinvoked(
    hooks: dict[str, Webhook],
) -> None:
    """Between them, the two mutating webhooks see every pod creation (tests/manifests/
    test_match_conditions.py: each pod reaches exactly one) and every debug container."""
    assert hooks[GPU_MUTATE]["rules"] == [POD_CREATE]
    assert hooks[NON_GPU_MUTATE]["rules"] == [POD_CREATE, DEBUG_CONTAINERS]
    for name, condition in ((GPU_MUTATE, "gpu-pod"), (NON_GPU_MUTATE, "not-a-gpu-pod")):
        assert hooks[name]["reinvocationPolicy"] == "IfNeeded"
        assert [c["name"] for c in hooks[name]["matchConditions"]] == ["not-a-mirror-pod", condition]
    mirror = [
        {**c, "name": None} for c in hooks[GPU_MUTATE]["matchConditions"] if c["name"] == "not-a-mirror-pod"
    ]
    assert mirror == [
        {**c, "name": None}
        for c in hooks[NON_GPU_MUTATE]["matchConditions"]
        if c["name"] == "not-a-mirror-pod"
    ]


def _conditions(hook: Webhook) -> dict[str, str]:
    return {c["name"]: " ".join(c["expression"].split()) for c in hook["matchConditions"]}


def test_the_mutating_webhooks_split_pods_by_the_validating_gpu_condition(hooks: dict[str, Webhook]) -> None:
    """The same GPU test as gpu-pods.validate (less its ResourceClaim clause, which /mutate never
    sees), negated for the other: no pod is mutated twice, none is left out."""
    gpu_pod = _conditions(hooks[GPU_MUTATE])["gpu-pod"]
    claims_and_bindings = "request.resource.group == 'resource.k8s.io' || request.subResource == 'binding'"
    assert _conditions(hooks[GPU_PODS])["gpu-pod"] == f"{claims_and_bindings} || {gpu_pod}"
    assert _conditions(hooks[NON_GPU_MUTATE])["not-a-gpu-pod"] == f"request.subResource != '' || !({gpu_pod})"


def test_the_gpu_webhooks_split_pods_by_one_gpu_condition(hooks: dict[str, Webhook]) -> None:
    """Same text, negated: GPU pods go to the fail-closed webhook and are never reviewed twice."""
    conditions = {c["name"]: c["expression"] for c in hooks[GPU_PODS]["matchConditions"]}
    assert set(conditions) == {"gpu-pod", "pod-update-worth-reviewing", "binding-writes-annotations"}
    workloads = {c["name"]: c["expression"] for c in hooks[WORKLOADS]["matchConditions"]}
    assert workloads["not-a-gpu-pod"].endswith(f"!({conditions['gpu-pod']})")
    assert workloads["pod-update-worth-reviewing"] == conditions["pod-update-worth-reviewing"]


def test_the_subresources_that_change_metadata_reach_one_enforcing_webhook(hooks: dict[str, Webhook]) -> None:
    """pods/status keeps the labels and annotations it is sent (kubernetes/kubernetes
    pkg/registry/core/pod/strategy.go, podStatusStrategy.PrepareForUpdate); a pods/binding copies
    its annotations onto the pod (pkg/registry/core/pod/storage/storage.go, setPodHostAndAnnotations).
    Status updates split by the pod's GPUs like pod updates; a Binding names no GPUs, so every
    binding goes to the fail-closed gpu-pods."""
    assert ("", "pods/status") in _resources(hooks[GPU_PODS], "UPDATE")
    assert ("", "pods/status") in _resources(hooks[WORKLOADS], "UPDATE")
    assert ("", "pods/binding") in _resources(hooks[GPU_PODS], "CREATE")
    assert ("", "pods/binding") not in _resources(hooks[WORKLOADS], "CREATE")
    assert _resources(hooks[NON_GPU_MUTATE], "UPDATE") == {("", "pods/ephemeralcontainers")}


def _resources(hook: Webhook, operation: str) -> set[tuple[str, str]]:
    return {
        (group, resource)
        for rule in hook["rules"]
        if operation in rule["operations"]
        for group in rule["apiGroups"]
        for resource in rule["resources"]
    }


CLAIMS = {("resource.k8s.io", "resourceclaims"), ("resource.k8s.io", "resourceclaimtemplates")}


BINDINGS = {("", "pods/binding")}


@pytest.mark.parametrize(("name", "claims"), [(WORKLOADS, set()), (ADVISORY, CLAIMS | BINDINGS)])
def test_workload_templates_and_all_pods_are_covered(
    hooks: dict[str, Webhook], name: str, claims: set[tuple[str, str]]
) -> None:
    hook = hooks[name]
    assert _resources(hook, "CREATE") == WORKLOAD_RESOURCES | {("", "pods")} | claims
    pods = {("", "pods"), ("", "pods/ephemeralcontainers"), ("", "pods/status")}
    assert _resources(hook, "UPDATE") == WORKLOAD_RESOURCES | pods
    assert _resources(hook, "DELETE") == set()
    for rule in hook["rules"]:
        for key in ("apiGroups", "apiVersions", "operations", "resources"):
            assert "*" not in rule[key] and all("*" not in value for value in rule[key])


def test_advisory_rules_are_the_workloads_and_the_claims(hooks: dict[str, Webhook]) -> None:
    """Warn and dryrun constraints may match anything an enforcing webhook receives."""
    (claims,) = [r for r in hooks[GPU_PODS]["rules"] if r["apiGroups"] == ["resource.k8s.io"]]
    (binding,) = [r for r in hooks[GPU_PODS]["rules"] if r["resources"] == ["pods/binding"]]
    assert hooks[ADVISORY]["rules"] == [*hooks[WORKLOADS]["rules"], binding, claims]
    advisory = {c["name"]: c["expression"] for c in hooks[ADVISORY]["matchConditions"]}
    workloads = {c["name"]: c["expression"] for c in hooks[WORKLOADS]["matchConditions"]}
    gpu_pods = {c["name"]: c["expression"] for c in hooks[GPU_PODS]["matchConditions"]}
    assert advisory == {
        **{name: workloads[name] for name in ("template-changed", "pod-update-worth-reviewing")},
        "binding-writes-annotations": gpu_pods["binding-writes-annotations"],
    }


def test_ca_bundle_is_the_ca_certificate(hooks: dict[str, Webhook], cert_dir: Path) -> None:
    for hook in hooks.values():
        assert base64.b64decode(hook["clientConfig"]["caBundle"]) == (cert_dir / "ca.crt").read_bytes()


def test_tls_secret_holds_the_certificate_files(rendered: list[Manifest], cert_dir: Path) -> None:
    secret = one(rendered, "Secret")
    assert secret["type"] == "kubernetes.io/tls"
    assert secret["metadata"] == {
        "name": "gpu-webhook-tls",
        "namespace": "gpu-system",
        "labels": {"app.kubernetes.io/name": "gpu-webhook"},
    }
    decoded = {key: base64.b64decode(value) for key, value in secret["data"].items()}
    assert decoded == {name: (cert_dir / name).read_bytes() for name in ("ca.crt", "tls.crt", "tls.key")}


def test_only_the_webhook_configurations_carry_the_component_label(rendered: list[Manifest]) -> None:
    """`kubectl apply -l 'app.kubernetes.io/component!=admission-configuration'` installs the server first."""
    labelled = {
        obj["kind"]
        for obj in rendered
        if obj["metadata"].get("labels", {}).get("app.kubernetes.io/component") == "admission-configuration"
    }
    assert labelled == {"MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"}


def test_the_ignore_label_guard_cannot_be_bypassed_by_the_label_itself(hooks: dict[str, Webhook]) -> None:
    """On UPDATE the selector sees the new labels: excluding ignored namespaces would let anyone add one."""
    hook = hooks[NAMESPACES]
    assert all(e["key"] != "gpuwebhook.io/ignore" for e in hook["namespaceSelector"]["matchExpressions"])
    # Status and finalize keep the labels they are sent (kubernetes/kubernetes
    # pkg/registry/core/namespace/strategy.go, namespaceStatusStrategy and namespaceFinalizeStrategy).
    assert hook["rules"] == [
        {
            "apiGroups": [""],
            "apiVersions": ["v1"],
            "operations": ["CREATE", "UPDATE"],
            "resources": ["namespaces"],
            "scope": "Cluster",
        },
        {
            "apiGroups": [""],
            "apiVersions": ["v1"],
            "operations": ["UPDATE"],
            "resources": ["namespaces/status", "namespaces/finalize"],
            "scope": "Cluster",
        },
    ]
