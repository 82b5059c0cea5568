"""Where the checkpoint agent goes: before the first GPU init container, and never as a native
sidecar on a cluster that would drop `restartPolicy: Always` (before 1.29)."""

from __future__ import annotations

from typing import Any

import pytest

from tests.support.policies import sharing_policy
from tests.support.schema import assert_valid
from webhook.errors import AdmissionDenied
from webhook.mutation.engine import mutate_object

POLICY = sharing_policy(
    "sharing: {mode: timeslice}\n"
    "checkpoint: {image: registry.example.com/ckpt:1, mountPath: /ckpt, nativeSidecar: true}"
)
GPU = {"limits": {"nvidia.com/gpu": "1"}}


def _pod() -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p", "namespace": "ns"},
        "spec": {
            "initContainers": [
                {"name": "fetch", "image": "x"},
                {"name": "warmup", "image": "x", "resources": GPU},
                {"name": "compile", "image": "x", "resources": GPU},
            ],
            "containers": [{"name": "main", "image": "x", "resources": GPU}],
        },
    }


def _names(containers: list[dict[str, Any]]) -> list[str]:
    return [c["name"] for c in containers]


def test_the_agent_starts_before_the_first_gpu_init_container() -> None:
    result = mutate_object(_pod(), POLICY).object
    init = result["spec"]["initContainers"]
    assert _names(init) == ["fetch", "gpuwebhook-checkpoint", "warmup", "compile"]
    assert init[1]["restartPolicy"] == "Always"
    assert_valid(result)
    assert mutate_object(result, POLICY).patch == ()


def test_gpu_init_containers_share_the_volume() -> None:
    result = mutate_object(_pod(), POLICY).object
    by_name = {c["name"]: c for c in result["spec"]["initContainers"] + result["spec"]["containers"]}
    mount = {"name": "gpuwebhook-checkpoint", "mountPath": "/ckpt"}
    for name in ("warmup", "compile", "main"):
        assert mount in by_name[name]["volumeMounts"]
    assert "volumeMounts" not in by_name["fetch"]


def test_without_gpu_init_containers_the_agent_comes_last() -> None:
    obj = _pod()
    obj["spec"]["initContainers"] = [{"name": "fetch", "image": "x"}]
    result = mutate_object(obj, POLICY).object
    assert _names(result["spec"]["initContainers"]) == ["fetch", "gpuwebhook-checkpoint"]


@pytest.mark.parametrize(
    ("version", "native"), [((1, 28), False), ((1, 29), True), ((1, 33), True), (None, True)]
)
def test_clusters_before_1_29_get_a_regular_container(version: tuple[int, int] | None, native: bool) -> None:
    result = mutate_object(_pod(), POLICY, kubernetes_version=version)
    init, app = result.object["spec"]["initContainers"], result.object["spec"]["containers"]
    assert ("gpuwebhook-checkpoint" in _names(init)) is native
    assert ("gpuwebhook-checkpoint" in _names(app)) is not native
    assert any("native sidecars need 1.29" in w for w in result.warnings) is not native


def test_a_jobs_pod_before_1_29_is_refused_rather_than_never_completing() -> None:
    obj = _pod()
    obj["metadata"]["ownerReferences"] = [{"apiVersion": "batch/v1", "kind": "Job", "name": "j", "uid": "u"}]
    with pytest.raises(AdmissionDenied, match="no native sidecars"):
        mutate_object(obj, POLICY, kubernetes_version=(1, 28))
    assert mutate_object(obj, POLICY, kubernetes_version=(1, 29)).object["spec"]["initContainers"][1][
        "name"
    ] == ("gpuwebhook-checkpoint")
