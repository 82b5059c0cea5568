"""kustomize builds of the base and overlays agree with `gpu-webhook manifests`.

Needs `kustomize` or `kubectl` (which embeds kustomize); without either these tests skip and say so.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml

from tests.docs.blocks import blocks
from tests.manifests.objects import REPO, one, webhooks_by_name
from webhook import certs
from webhook.bundle import ship
from webhook.manifests import Manifest, RenderOptions, render, to_yaml

Identity = tuple[str, str, str, str]


def _kustomize_command() -> list[str] | None:
    if shutil.which("kustomize"):
        return ["kustomize", "build"]
    if shutil.which("kubectl"):
        return ["kubectl", "kustomize"]
    return None


KUSTOMIZE = _kustomize_command()
pytestmark = pytest.mark.skipif(
    KUSTOMIZE is None, reason="neither kustomize nor kubectl is on PATH; kustomize builds not checked"
)


def build(directory: Path) -> list[Manifest]:
    assert KUSTOMIZE is not None
    result = subprocess.run(
        [*KUSTOMIZE, str(directory)], capture_output=True, text=True, timeout=120, check=False
    )
    assert result.returncode == 0, result.stderr
    return [doc for doc in yaml.safe_load_all(result.stdout) if doc is not None]


def identity(obj: Manifest) -> Identity:
    metadata = obj["metadata"]
    return (obj["apiVersion"], obj["kind"], metadata.get("namespace", ""), metadata["name"])


def _unwrapped(node: Any) -> Any:
    """kustomize wraps the base64 it generates at 70 columns; kube-apiserver ignores the newlines."""
    if isinstance(node, dict):
        return {key: _unwrapped(value) for key, value in node.items()}
    if isinstance(node, list):
        return [_unwrapped(item) for item in node]
    if isinstance(node, str) and node.endswith("\n") and " " not in node:
        return node.replace("\n", "")
    return node


def by_identity(objects: list[Manifest]) -> dict[Identity, Any]:
    return {identity(obj): _unwrapped(obj) for obj in objects}


def test_the_base_builds_to_what_the_cli_renders() -> None:
    assert by_identity(build(REPO / "manifests/base")) == by_identity(render(RenderOptions()))


@pytest.fixture
def manifests_copy(tmp_path: Path) -> Path:
    shutil.copytree(REPO / "manifests", tmp_path / "manifests", ignore=shutil.ignore_patterns("certs"))
    return tmp_path / "manifests"


def test_the_self_signed_overlay_builds_to_what_the_cli_renders(manifests_copy: Path, cert_dir: Path) -> None:
    overlay = manifests_copy / "overlays/self-signed"
    shutil.copytree(cert_dir, overlay / "certs")
    built = build(overlay)
    assert by_identity(built) == by_identity(render(RenderOptions(cert_dir=cert_dir)))


def test_the_self_signed_overlay_needs_certificates_first(manifests_copy: Path) -> None:
    assert KUSTOMIZE is not None
    result = subprocess.run(
        [*KUSTOMIZE, str(manifests_copy / "overlays/self-signed")],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode != 0
    assert "ca.crt" in result.stderr


@pytest.fixture(scope="module")
def cert_manager_install() -> list[Manifest]:
    return build(REPO / "manifests/overlays/cert-manager")


def test_cert_manager_overlay_is_the_base_plus_certificates(cert_manager_install: list[Manifest]) -> None:
    base = by_identity(render(RenderOptions()))
    built = by_identity(cert_manager_install)
    added = {key[1] for key in set(built) - set(base)}
    assert added == {"Issuer", "Certificate"}
    assert set(base) <= set(built)
    for key, obj in base.items():
        if "WebhookConfiguration" not in key[1]:
            assert built[key] == obj, key


def test_cert_manager_injects_the_serving_ca_into_every_webhook(cert_manager_install: list[Manifest]) -> None:
    serving = {
        obj["metadata"]["name"]: obj
        for obj in cert_manager_install
        if obj["kind"] == "Certificate" and not obj["spec"].get("isCA")
    }
    (name,) = serving
    for kind in ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"):
        annotations = one(cert_manager_install, kind)["metadata"]["annotations"]
        assert annotations == {"cert-manager.io/inject-ca-from": f"gpu-system/{name}"}
    for hook in webhooks_by_name(cert_manager_install).values():
        assert "caBundle" not in hook["clientConfig"]


def test_cert_manager_issues_the_secret_the_deployment_mounts(cert_manager_install: list[Manifest]) -> None:
    spec = one(cert_manager_install, "StatefulSet")["spec"]["template"]["spec"]
    (mounted,) = (v["secret"]["secretName"] for v in spec["volumes"] if "secret" in v)
    certificates = {
        obj["spec"]["secretName"]: obj["spec"] for obj in cert_manager_install if obj["kind"] == "Certificate"
    }
    service = one(cert_manager_install, "Service")["metadata"]
    assert set(certificates[mounted]["dnsNames"]) == set(
        certs.service_dns_names(service["name"], service["namespace"])
    ) - set(certs.LOOPBACK_NAMES)


def test_every_built_object_kubernetes_knows_is_valid(cert_manager_install: list[Manifest]) -> None:
    for obj in cert_manager_install:
        if obj["apiVersion"].startswith("cert-manager.io/"):
            continue
        kubernetes_validate.validate(obj, kubernetes_validate.latest_version(), strict=True)


def test_the_trial_component_opens_every_webhook_to_labelled_namespaces_only(tmp_path: Path) -> None:
    (tmp_path / "install.yaml").write_text(to_yaml(render(RenderOptions())))
    component = Path(os.path.relpath(REPO / "manifests/components/trial", tmp_path))
    (tmp_path / "kustomization.yaml").write_text(
        yaml.safe_dump({"resources": ["install.yaml"], "components": [str(component)]})
    )
    built = build(tmp_path)
    for obj in built:
        kubernetes_validate.validate(obj, kubernetes_validate.latest_version(), strict=True)
    trial = webhooks_by_name(built)
    enforcing = webhooks_by_name(render(RenderOptions()))
    assert set(trial) == set(enforcing)
    requirement = {"key": "gpuwebhook.io/trial", "operator": "In", "values": ["true"]}
    for name, hook in trial.items():
        assert hook["failurePolicy"] == "Ignore", name
        expressions = hook["namespaceSelector"]["matchExpressions"]
        assert expressions == [*enforcing[name]["namespaceSelector"]["matchExpressions"], requirement]
        assert {**hook, "failurePolicy": None, "namespaceSelector": None} == {
            **enforcing[name],
            "failurePolicy": None,
            "namespaceSelector": None,
        }


# Every install path ships the packaged security bundle, and nothing else.


def _overlays() -> list[str]:
    return sorted(p.parent.name for p in (REPO / "manifests/overlays").glob("*/kustomization.yaml"))


@pytest.mark.parametrize("overlay", _overlays())
def test_every_overlay_ships_the_security_bundle_and_nothing_else(
    manifests_copy: Path, cert_dir: Path, overlay: str
) -> None:
    directory = manifests_copy / "overlays" / overlay
    shutil.copytree(cert_dir, directory / "certs", dirs_exist_ok=True)  # for overlays that build a Secret
    (configmap,) = [obj for obj in build(directory) if obj["kind"] == "ConfigMap"]
    assert configmap["metadata"]["name"] == "gpu-webhook-policies"
    assert configmap["data"] == ship([]).data


def _with_components(tmp_path: Path, objects: list[Manifest], *components: str) -> list[Manifest]:
    """`objects` (an install.yaml) built with the named components of manifests/components."""
    (tmp_path / "install.yaml").write_text(to_yaml(objects))
    paths = [os.path.relpath(REPO / "manifests/components" / name, tmp_path) for name in components]
    (tmp_path / "kustomization.yaml").write_text(
        yaml.safe_dump({"resources": ["install.yaml"], "components": paths})
    )
    return build(tmp_path)


def test_the_non_gpu_component_is_what_the_flag_renders(tmp_path: Path) -> None:
    built = _with_components(tmp_path, render(RenderOptions()), "non-gpu-fail-open")
    assert by_identity(built) == by_identity(render(RenderOptions(non_gpu_failure_policy="Ignore")))


def test_the_trial_and_non_gpu_components_combine(tmp_path: Path) -> None:
    built = _with_components(tmp_path, render(RenderOptions()), "trial", "non-gpu-fail-open")
    assert {hook["failurePolicy"] for hook in webhooks_by_name(built).values()} == {"Ignore"}


def test_a_component_refuses_webhooks_that_moved(tmp_path: Path) -> None:
    """The components patch webhooks by index; a `test` operation fails the build if one moved."""
    objects = render(RenderOptions())
    mutating = one(objects, "MutatingWebhookConfiguration")
    mutating["webhooks"].reverse()
    (tmp_path / "install.yaml").write_text(to_yaml(objects))
    component = os.path.relpath(REPO / "manifests/components/non-gpu-fail-open", tmp_path)
    (tmp_path / "kustomization.yaml").write_text(
        yaml.safe_dump({"resources": ["install.yaml"], "components": [component]})
    )
    assert KUSTOMIZE is not None
    result = subprocess.run(
        [*KUSTOMIZE, str(tmp_path)], capture_output=True, text=True, timeout=120, check=False
    )
    assert result.returncode != 0 and "test failed" in result.stderr


PLACEHOLDERS = "# excerpt of your overlay's kustomization.yaml: the three placeholders"


def test_the_documented_overlay_sets_what_the_flags_set(manifests_copy: Path) -> None:
    """docs/operations.md's overlay for the image, the control plane's addresses and the
    StorageClass builds to the install `gpu-webhook manifests` renders with the same values."""
    (block,) = [b for b in blocks(REPO / "docs/operations.md") if b.text.startswith(PLACEHOLDERS)]
    overlay = manifests_copy.parent / "overlays" / "mine"
    overlay.mkdir(parents=True)
    (overlay / "kustomization.yaml").write_text(block.text)
    config = yaml.safe_load(block.text)
    (image,) = config["images"]
    values = {
        patch["target"]["kind"]: yaml.safe_load(patch["patch"])[0]["value"] for patch in config["patches"]
    }
    rendered = render(
        RenderOptions(
            image=f"{image['newName']}:{image['newTag']}",
            control_plane_cidrs=[values["NetworkPolicy"]],
            storage_class=values["StatefulSet"],
        )
    )
    built = build(overlay)
    for kind in ("StatefulSet", "NetworkPolicy"):
        assert one(built, kind) == one(rendered, kind), kind
