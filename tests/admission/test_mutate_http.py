"""Pods for every mode over HTTPS, patches applied the way kube-apiserver applies them."""

from __future__ import annotations

import base64
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import BUNDLED_POLICIES
from tests.support.apiserver import apply_patch, check_reply
from tests.support.reviews import make_review
from tests.support.schema import assert_valid
from tests.support.server import ServerProcess


def gpu_pod(namespace: str, memory: str | None = None, **spec: Any) -> dict[str, Any]:
    annotations = {"gpuwebhook.io/gpu-memory": memory} if memory else {}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": "p",
            "namespace": namespace,
            "annotations": annotations,
            "labels": {"gpuwebhook.io/workload": "training"},
        },
        "spec": {
            "initContainers": [
                {"name": "prep", "image": "x", "resources": {"limits": {"nvidia.com/gpu": "1"}}}
            ],
            "containers": [
                {
                    "name": "main",
                    "image": "x",
                    "resources": {"limits": {"nvidia.com/gpu": "1"}, "requests": {"nvidia.com/gpu": "1"}},
                },
                {"name": "log", "image": "y"},
            ],
            **spec,
        },
    }


def _mutate(server: ServerProcess, obj: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    review = make_review(obj)
    response = check_reply(review, server.client().post_json("/mutate", review), "mutate")
    return response, apply_patch(obj, response)


MODES = [
    # (namespace, memory, expected limits of the main container)
    ("example-mig", "15Gi", {"nvidia.com/mig-1g.20gb": "1"}),
    ("example-mig", "30Gi", {"nvidia.com/mig-3g.40gb": "1"}),
    ("example-timeslice", None, {"nvidia.com/gpu.shared": "1"}),
    ("example-mps", None, {"nvidia.com/gpu.shared": "1"}),
    (
        "example-hami",
        "12Gi",
        {"nvidia.com/gpu": "1", "nvidia.com/gpumem": "12288", "nvidia.com/gpucores": "25"},
    ),
    ("example-training", None, {"nvidia.com/gpu": "1"}),
]


@pytest.mark.parametrize(("namespace", "memory", "limits"), MODES)
def test_each_mode_over_https(
    server: ServerProcess, namespace: str, memory: str | None, limits: dict[str, str]
) -> None:
    response, admitted = _mutate(server, gpu_pod(namespace, memory))
    assert response["allowed"] is True
    assert admitted["spec"]["containers"][0]["resources"]["limits"] == limits
    # A checkpoint agent, where the policy has one, starts before the GPU init container.
    init = [c for c in admitted["spec"]["initContainers"] if c["name"] != "gpuwebhook-checkpoint"]
    assert init[0]["resources"]["limits"].keys() == limits.keys()
    assert admitted["metadata"]["annotations"]["gpuwebhook.io/applied"].endswith(
        "mode=" + response["auditAnnotations"]["sharing-mode"]
    )
    assert_valid(admitted)
    again, _ = _mutate(server, admitted)
    assert "patch" not in again  # reinvocation is a no-op


def test_kai_over_https_has_a_native_checkpoint_sidecar(server: ServerProcess) -> None:
    obj = gpu_pod("example-kai")
    obj["spec"]["initContainers"][0]["resources"] = {}
    _, admitted = _mutate(server, obj)
    assert admitted["metadata"]["annotations"]["gpu-memory"] == "40960"
    sidecar = admitted["spec"]["initContainers"][-1]
    assert (sidecar["name"], sidecar["restartPolicy"]) == ("gpuwebhook-checkpoint", "Always")
    assert admitted["spec"]["schedulerName"] == "kai-scheduler"
    assert_valid(admitted)


def test_too_large_for_mig_is_denied_over_https(server: ServerProcess) -> None:
    review = make_review(gpu_pod("example-mig", "100Gi"))
    response = check_reply(review, server.client().post_json("/mutate", review), "mutate")
    assert response["allowed"] is False
    assert "100Gi" in response["status"]["message"] and "7g.80gb" in response["status"]["message"]


VOID = {"op": "add", "value": [{"name": "NVIDIA_VISIBLE_DEVICES", "value": "void"}]}


@pytest.mark.parametrize(
    ("obj", "voided"),
    [
        (
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {"name": "web", "namespace": "example-mig"},
                "spec": {"containers": [{"name": "c", "image": "x"}]},
            },
            ["/spec/containers/0/env"],
        ),
        (gpu_pod("no-policy-here"), ["/spec/containers/1/env"]),
        (gpu_pod("kube-system"), []),
        (
            {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c", "namespace": "example-mig"}},
            [],
        ),
    ],
    ids=["no GPU", "no matching policy", "excluded namespace", "not a pod"],
)
def test_without_a_policy_only_containers_without_gpus_are_voided(
    server: ServerProcess, obj: dict[str, Any], voided: list[str]
) -> None:
    review = make_review(obj)
    response = check_reply(review, server.client().post_json("/mutate", review), "mutate")
    assert response["allowed"] is True
    patch = json.loads(base64.b64decode(response["patch"])) if "patch" in response else []
    assert patch == [{**VOID, "path": path} for path in voided]


def test_server_and_offline_review_agree(server: ServerProcess, tmp_path: Path) -> None:
    obj = gpu_pod("example-mig", "15Gi")
    manifest = tmp_path / "pod.json"
    manifest.write_text(json.dumps(obj))
    offline = subprocess.run(
        [
            sys.executable,
            "-m",
            "webhook",
            "review",
            str(manifest),
            "--policies",
            str(BUNDLED_POLICIES),
            "-o",
            "json",
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    [entry] = json.loads(offline.stdout)
    _, admitted = _mutate(server, obj)
    assert entry["object"] == admitted
    assert entry["allowed"] is True
