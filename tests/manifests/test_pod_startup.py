"""Start the real server the way the rendered Deployment does, and call every path the cluster will.

The pod's volumes are laid out under a temporary root (Secret and ConfigMap files as kubelet writes
them), the container's arguments are used as rendered, and only the bind address and port are
changed for the test machine.
"""

from __future__ import annotations

import base64
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import BUNDLED_POLICIES
from tests.manifests.objects import one, webhooks_by_name
from tests.support.apiserver import check_reply
from tests.support.reviews import load_example, make_review
from tests.support.server import ServerProcess, start_server
from webhook.manifests import Manifest, RenderOptions, policies_data, render, set_flag


@pytest.fixture(scope="module")
def install(cert_dir: Path) -> list[Manifest]:
    return render(RenderOptions(cert_dir=cert_dir, policies=policies_data(BUNDLED_POLICIES)))


def _lay_out_volumes(install: list[Manifest], root: Path) -> dict[str, Path]:
    """Write each mounted volume's files under root; return mountPath -> local directory."""
    spec = one(install, "StatefulSet")["spec"]["template"]["spec"]
    volumes = {volume["name"]: volume for volume in spec["volumes"]}
    local: dict[str, Path] = {}
    for mount in spec["containers"][0]["volumeMounts"]:
        directory = root / mount["mountPath"].lstrip("/")
        directory.mkdir(parents=True)
        volume = volumes[mount["name"]]
        files: dict[str, Any] = {}
        if "secret" in volume:
            files = {k: base64.b64decode(v) for k, v in one(install, "Secret")["data"].items()}
        elif "configMap" in volume:
            files = {k: v.encode() for k, v in one(install, "ConfigMap")["data"].items()}
        for name, content in files.items():
            (directory / name).write_bytes(content)
        local[mount["mountPath"]] = directory
    return local


@pytest.fixture(scope="module")
def pod(
    install: list[Manifest], cert_dir: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ServerProcess]:
    local = _lay_out_volumes(install, tmp_path_factory.mktemp("pod"))
    args: list[str] = one(install, "StatefulSet")["spec"]["template"]["spec"]["containers"][0]["args"]
    for arg in list(args):
        flag, _, value = arg.partition("=")
        for mount_path, directory in local.items():
            if value.startswith(mount_path + "/") or value == mount_path:
                args = set_flag(args, flag, str(directory) + value.removeprefix(mount_path))
    args = set_flag(set_flag(args, "host", "127.0.0.1"), "port", "0")
    server = start_server(args, ca_file=cert_dir / "ca.crt")
    yield server
    server.stop()


@pytest.mark.parametrize("path", ["/healthz", "/readyz"])
def test_probes_answer(install: list[Manifest], pod: ServerProcess, path: str) -> None:
    container = one(install, "StatefulSet")["spec"]["template"]["spec"]["containers"][0]
    assert path in {container[p]["httpGet"]["path"] for p in ("readinessProbe", "livenessProbe")}
    reply = pod.client().request("GET", path)
    assert reply.status == 200, reply.body


def _review_for(path: str) -> tuple[dict[str, Any], str]:
    endpoint = "mutate" if path == "/mutate" else "validate"
    return make_review(load_example("pod-gpu-training.yaml")), endpoint


@pytest.mark.parametrize(
    "webhook",
    [
        "pods.mutate.gpuwebhook.io",
        "gpu-pods.validate.gpuwebhook.io",
        "workloads.validate.gpuwebhook.io",
        "advisory.validate.gpuwebhook.io",
    ],
)
def test_every_webhook_path_is_served(install: list[Manifest], pod: ServerProcess, webhook: str) -> None:
    path = webhooks_by_name(install)[webhook]["clientConfig"]["service"]["path"]
    review, endpoint = _review_for(path)
    check_reply(review, pod.client().post_json(path, review), endpoint)
