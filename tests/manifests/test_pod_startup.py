"""Start the real server the way the rendered StatefulSet does, and call every path the cluster will.

tests/manifests/pod.py lays out the pod's volumes and runs the container's arguments as rendered.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.manifests.objects import one, webhooks_by_name
from tests.manifests.pod import run_pod
from tests.support.apiserver import check_reply
from tests.support.reviews import load_example, make_review
from tests.support.server import ServerProcess
from webhook import bundle
from webhook.manifests import Manifest, RenderOptions, render


@pytest.fixture(scope="module")
def install(cert_dir: Path) -> list[Manifest]:
    return render(RenderOptions(cert_dir=cert_dir, policies=bundle.ship([]).data))


@pytest.fixture(scope="module")
def pod(
    install: list[Manifest], cert_dir: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ServerProcess]:
    server = run_pod(install, tmp_path_factory.mktemp("pod"), ca_file=cert_dir / "ca.crt")
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
        "gpu-pods.mutate.gpuwebhook.io",
        "non-gpu-pods.mutate.gpuwebhook.io",
        "gpu-pods.validate.gpuwebhook.io",
        "workloads.validate.gpuwebhook.io",
        "advisory.validate.gpuwebhook.io",
    ],
)
def test_every_webhook_path_is_served(install: list[Manifest], pod: ServerProcess, webhook: str) -> None:
    path = webhooks_by_name(install)[webhook]["clientConfig"]["service"]["path"]
    review, endpoint = _review_for(path)
    check_reply(review, pod.client().post_json(path, review), endpoint)
