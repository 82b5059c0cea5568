"""Every object we ship validates against the official Kubernetes schemas; CRD objects get shape checks."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml

from tests.conftest import REPO
from tests.manifests.objects import one
from webhook.manifests import Manifest, RenderOptions, render

# matchConditions are GA (on by default) since 1.30: the oldest release we install on.
KUBERNETES_VERSIONS = ["1.30.0", "1.33.0", kubernetes_validate.latest_version()]
EXPECTED_KINDS = {
    "Namespace",
    "ServiceAccount",
    "ClusterRole",
    "ClusterRoleBinding",
    "Role",
    "RoleBinding",
    "ResourceQuota",
    "ConfigMap",
    "Secret",
    "Service",
    "StatefulSet",
    "PodDisruptionBudget",
    "NetworkPolicy",
    "MutatingWebhookConfiguration",
    "ValidatingWebhookConfiguration",
}


def validate(obj: Manifest, version: str) -> None:
    kubernetes_validate.validate(obj, version, strict=True)


@pytest.mark.parametrize("version", KUBERNETES_VERSIONS)
def test_every_rendered_object_is_valid(rendered: list[Manifest], version: str) -> None:
    for obj in rendered:
        validate(obj, version)


def test_the_install_is_complete(rendered: list[Manifest]) -> None:
    assert sorted(obj["kind"] for obj in rendered) == sorted(EXPECTED_KINDS)


def test_the_namespace_comes_first_and_webhooks_last(rendered: list[Manifest]) -> None:
    """`kubectl apply -f -` creates in order: the namespace must exist before its objects."""
    kinds = [obj["kind"] for obj in rendered]
    assert kinds[0] == "Namespace"
    assert set(kinds[-2:]) == {"MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"}


def test_validation_rejects_an_unknown_field(rendered: list[Manifest]) -> None:
    """Strict mode is what makes the check above worth anything."""
    deployment = one(rendered, "StatefulSet")
    broken: dict[str, Any] = {**deployment, "spec": {**deployment["spec"], "replica": 2}}
    with pytest.raises(kubernetes_validate.ValidationError):
        validate(broken, KUBERNETES_VERSIONS[-1])


@pytest.mark.parametrize("version", KUBERNETES_VERSIONS)
def test_a_moved_install_is_valid_too(version: str) -> None:
    options = RenderOptions(namespace="gpu-admission", replicas=5, image="registry.example/gw:1")
    for obj in render(options):
        validate(obj, version)


def _documents(path: Path) -> list[Manifest]:
    return [doc for doc in yaml.safe_load_all(path.read_text()) if doc is not None]


def test_cert_manager_objects_have_the_shape_cert_manager_expects() -> None:
    objects = _documents(REPO / "manifests/overlays/cert-manager/certificates.yaml")
    issuers = {obj["metadata"]["name"]: obj for obj in objects if obj["kind"] == "Issuer"}
    certificates = {obj["metadata"]["name"]: obj for obj in objects if obj["kind"] == "Certificate"}
    for obj in objects:
        assert obj["apiVersion"] == "cert-manager.io/v1"
        assert obj["metadata"]["namespace"] == "gpu-system"
    assert set(issuers["gpu-webhook-selfsigned"]["spec"]) == {"selfSigned"}
    ca = certificates["gpu-webhook-ca"]["spec"]
    assert ca["isCA"] is True
    assert ca["issuerRef"] == {"kind": "Issuer", "name": "gpu-webhook-selfsigned"}
    assert issuers["gpu-webhook-ca"]["spec"] == {"ca": {"secretName": ca["secretName"]}}
    serving = certificates["gpu-webhook-tls"]["spec"]
    assert serving["issuerRef"] == {"kind": "Issuer", "name": "gpu-webhook-ca"}
    assert "isCA" not in serving
    assert set(serving["usages"]) == {"digital signature", "server auth"}
    assert serving["privateKey"]["rotationPolicy"] == "Always"
    for duration in (serving["duration"], serving["renewBefore"], ca["duration"]):
        assert duration.endswith("h") and int(duration[:-1]) > 0


def test_the_service_monitor_has_the_shape_the_operator_expects() -> None:
    (monitor,) = _documents(REPO / "manifests/monitoring/servicemonitor.yaml")
    assert (monitor["apiVersion"], monitor["kind"]) == ("monitoring.coreos.com/v1", "ServiceMonitor")
    assert set(monitor["spec"]) == {"namespaceSelector", "selector", "endpoints"}
    (endpoint,) = monitor["spec"]["endpoints"]
    # honorLabels: an Endpoint field of monitoring.coreos.com/v1 (bool), see test_exported.py.
    allowed = {"port", "scheme", "path", "interval", "scrapeTimeout", "tlsConfig", "honorLabels"}
    assert set(endpoint) <= allowed
    assert set(endpoint["tlsConfig"]) == {"serverName", "ca"}
    assert set(endpoint["tlsConfig"]["ca"]) == {"secret"}
    assert set(endpoint["tlsConfig"]["ca"]["secret"]) == {"name", "key"}
    assert endpoint["interval"].endswith("s") and endpoint["scrapeTimeout"].endswith("s")
