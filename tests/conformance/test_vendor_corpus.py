"""Manifests shaped as each vendor documents them, through the installed webhook configurations,
in a namespace of every sharing mode: every object we emit is schema-valid, a second pass changes
nothing, and no container loses the accelerator its device plugin gives it (its resources stay,
and NVIDIA GPUs handed out under other names keep their plugin's NVIDIA_VISIBLE_DEVICES)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.support.dispatch import Dispatcher, Request, installed_with_bundle
from tests.support.pods import in_namespace
from tests.support.schema import assert_valid
from webhook.accounting import names

NAMESPACES = ["plain", "example-timeslice", "example-mps", "example-mig", "example-hami", "example-kai"]


def _pod(name: str, containers: list[dict[str, Any]], **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": {"app": name}},
        "spec": {"restartPolicy": "Never", "containers": containers, **spec},
    }


def _container(name: str, image: str, limits: dict[str, str], **extra: Any) -> dict[str, Any]:
    return {"name": name, "image": image, "resources": {"limits": limits}, **extra}


CORPUS: dict[str, dict[str, Any]] = {
    # ROCm/k8s-device-plugin example/pod/alexnet-gpu.yaml shape
    "amd-alexnet": _pod("alexnet", [_container("alexnet", "rocm/tensorflow:latest", {"amd.com/gpu": "1"})]),
    "amd-partition": _pod("cpx", [_container("main", "rocm/pytorch:latest", {"amd.com/cpx_nps4": "2"})]),
    # intel-device-plugins-for-kubernetes demo/intelgpu-job.yaml shape
    "intel-i915": _pod(
        "intelgpu", [_container("intelgpu", "intel/opencl-icd:devel", {"gpu.intel.com/i915": "1"})]
    ),
    "intel-xe": _pod("xe", [_container("main", "intel/level-zero:latest", {"gpu.intel.com/xe": "1"})]),
    # HAMi examples/ascend/job-910B3.yaml shape
    "hami-ascend": _pod(
        "ascend",
        [
            _container(
                "ubuntu",
                "ascendhub.huawei.com/public-ascendhub/ascend-mindspore:23.0.RC3",
                {"huawei.com/Ascend910B3": "1", "huawei.com/Ascend910B3-memory": "2000"},
            )
        ],
        schedulerName="hami-scheduler",
    ),
    # volcano-vgpu-device-plugin examples/vgpu-case01.yml shape
    "volcano-vgpu": _pod(
        "vgpu",
        [
            _container(
                "cuda",
                "nvidia/cuda:12.4.0-base-ubuntu22.04",
                {
                    "volcano.sh/vgpu-number": "2",
                    "volcano.sh/vgpu-memory": "3000",
                    "volcano.sh/vgpu-cores": "50",
                },
            )
        ],
        schedulerName="volcano",
    ),
    # gpushare-scheduler-extender samples/1.yaml shape
    "gpushare": _pod(
        "binpack", [_container("binpack", "cheyang/gpu-player:v2", {"aliyun.com/gpu-mem": "3"})]
    ),
    # NVIDIA k8s-device-plugin: a time-sliced MIG slice with renameByDefault
    "mig-shared": _pod(
        "mig-shared",
        [_container("cuda", "nvidia/cuda:12.4.0-base-ubuntu22.04", {"nvidia.com/mig-1g.10gb.shared": "1"})],
    ),
    "nvidia-two-containers": _pod(
        "train",
        [
            _container("trainer", "nvcr.io/nvidia/pytorch:24.05-py3", {"nvidia.com/gpu": "1"}),
            _container("sidecar", "busybox:1.36", {"cpu": "100m"}),
        ],
    ),
    "mixed-vendors": _pod(
        "mixed",
        [
            _container("amd", "rocm/pytorch:latest", {"amd.com/gpu": "1"}),
            _container("nvidia", "nvcr.io/nvidia/pytorch:24.05-py3", {"nvidia.com/gpu": "1"}),
        ],
    ),
}


@pytest.fixture(scope="module")
def dispatcher() -> Iterator[Dispatcher]:
    with installed_with_bundle() as dispatcher:
        yield dispatcher


def _accelerators(container: dict[str, Any]) -> set[str]:
    limits = container.get("resources", {}).get("limits", {})
    return {name for name in limits if names.is_accelerator(name)}


def _variable(container: dict[str, Any]) -> str | None:
    return next(
        (e.get("value") for e in container.get("env", []) if e["name"] == "NVIDIA_VISIBLE_DEVICES"), None
    )


@pytest.mark.parametrize("namespace", NAMESPACES)
@pytest.mark.parametrize("case", sorted(CORPUS))
def test_every_vendors_pod_keeps_its_accelerators(dispatcher: Dispatcher, case: str, namespace: str) -> None:
    sent = in_namespace(namespace, CORPUS[case])
    outcome = dispatcher.admit(Request("CREATE", sent))
    # Where no sharing policy applies, every vendor's pod is admitted. Under one, a share the policy
    # does not make may be refused (gpu-builtin/sharing-enforced): a denial loses nothing silently.
    assert outcome.allowed or namespace != "plain", outcome.message
    if not outcome.allowed:
        assert "sharing-enforced" in outcome.message, outcome.message
        return
    assert outcome.object is not None
    assert_valid(outcome.object)
    for before, after in zip(sent["spec"]["containers"], outcome.object["spec"]["containers"], strict=True):
        kept = _accelerators(after)
        others = _accelerators(before) - {"nvidia.com/gpu"}  # the sharing rewrite's own input
        assert others <= kept, (case, namespace, before["name"])
        if any(names.gives_nvidia_gpu(n) for n in kept):
            assert _variable(after) != "void", (case, namespace, before["name"])
    again = dispatcher.admit(Request("CREATE", outcome.object))
    assert again.object == outcome.object, "a second pass changes nothing"
