"""HAMi conformance: each case pins the line of HAMi's webhook or device code it follows.

Upstream: Project-HAMi/HAMi at 4707fb02c91c545bc7343ce26dba4c32919f9a3e.
W = pkg/scheduler/webhook.go, N = pkg/device/nvidia/device.go, D = pkg/device/devices.go.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.support.policies import compile_problems, sharing_policy
from webhook.errors import AdmissionDenied
from webhook.mutation.engine import mutate_object


def _pod(limits: dict[str, str], **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p", "namespace": "ns"},
        "spec": {"containers": [{"name": "main", "image": "x", "resources": {"limits": limits}}], **spec},
    }


def _limits(obj: dict[str, Any]) -> dict[str, str]:
    return dict(obj["spec"]["containers"][0]["resources"]["limits"])


def test_another_scheduler_gets_no_hami_resources() -> None:
    """W:64-69: HAMi's webhook lets a pod with another scheduler through untouched, and only
    hami-scheduler's extender knows gpumem and gpucores: adding them would strand the pod."""
    policy = sharing_policy("sharing: {mode: hami, defaultMemory: 4Gi, cores: 30}")
    result = mutate_object(_pod({"nvidia.com/gpu": "1"}, schedulerName="volcano"), policy)
    assert _limits(result.object) == {"nvidia.com/gpu": "1"}
    assert any("HAMi's limits need hami-scheduler" in w for w in result.warnings)


def test_hami_scheduler_gets_the_limits() -> None:
    policy = sharing_policy("sharing: {mode: hami, defaultMemory: 4Gi, cores: 30}")
    result = mutate_object(_pod({"nvidia.com/gpu": "1"}), policy).object
    assert result["spec"]["schedulerName"] == "hami-scheduler"
    assert _limits(result) == {
        "nvidia.com/gpu": "1",
        "nvidia.com/gpumem": "4096",
        "nvidia.com/gpucores": "30",
    }


def test_cores_only_also_limits_memory() -> None:
    """N:572-577: with defaultMemory 0 and no memory ask, HAMi gives 100% of the card's memory."""
    policy = sharing_policy("sharing: {mode: hami, cores: 25}")
    result = mutate_object(_pod({"nvidia.com/gpu": "1"}), policy).object
    assert _limits(result) == {
        "nvidia.com/gpu": "1",
        "nvidia.com/gpumem-percentage": "25",
        "nvidia.com/gpucores": "25",
    }


def test_gpu_model_sets_use_gputype() -> None:
    """N:45 names the annotation; D:719-737 matches it as a case-blind substring of the card type."""
    policy = sharing_policy(
        "sharing: {mode: hami, gpuModel: A100-80GB, defaultMemory: 8Gi, setGpuType: true}"
    )
    result = mutate_object(_pod({"nvidia.com/gpu": "1"}), policy).object
    types = result["metadata"]["annotations"]["nvidia.com/use-gputype"].split(",")
    assert any(t.upper() in "NVIDIA A100-SXM4-80GB" for t in types)
    assert not any(t.upper() in "NVIDIA A100-SXM4-40GB" for t in types)


def test_set_gpu_type_needs_a_model_hami_can_tell_apart() -> None:
    problems = compile_problems(
        "sharing: {mode: hami, gpuModel: H20-96GB, defaultMemory: 8Gi, setGpuType: true}"
    )
    assert any("setGpuType" in p for p in problems)


LEFTOVERS = [
    # (mode spec, HAMi resources, expected limits, annotation written)
    (
        "{mode: mig, gpuModel: A100-80GB, defaultMemory: 5Gi}",
        {"nvidia.com/gpu": "1", "nvidia.com/gpumem": "15000"},
        {"nvidia.com/mig-1g.20gb": "1"},
        "15000Mi",
    ),
    (
        "{mode: mig, gpuModel: A100-80GB, defaultMemory: 5Gi}",
        # N:409-411: defaultGPUNum 1. A quarter of the card is 20480 MiB, more than
        # 1g.20gb's real 19968, so 3g.40gb.
        {"nvidia.com/gpumem-percentage": "25"},
        {"nvidia.com/mig-3g.40gb": "1"},
        "20480Mi",
    ),
]


@pytest.mark.parametrize(("spec", "limits", "expected", "memory"), LEFTOVERS)
def test_a_pods_own_hami_resources_become_the_modes_memory_ask(
    spec: str, limits: dict[str, str], expected: dict[str, str], memory: str
) -> None:
    policy = sharing_policy(f"sharing: {spec}")
    result = mutate_object(_pod(limits), policy)
    assert _limits(result.object) == expected
    assert result.object["metadata"]["annotations"]["gpuwebhook.io/gpu-memory"] == memory
    assert mutate_object(result.object, policy).patch == ()


@pytest.mark.parametrize("mode", ["timeslice", "mps"])
def test_modes_without_a_memory_limit_refuse_hami_resources(mode: str) -> None:
    policy = sharing_policy(f"sharing: {{mode: {mode}}}")
    with pytest.raises(AdmissionDenied, match=r"nvidia\.com/gpumem.*only hami-scheduler"):
        mutate_object(_pod({"nvidia.com/gpu": "1", "nvidia.com/gpumem": "4000"}), policy)


def test_exclusive_drops_them_a_whole_gpu_holds_the_ask() -> None:
    policy = sharing_policy("sharing: {mode: exclusive}")
    result = mutate_object(_pod({"nvidia.com/gpu": "1", "nvidia.com/gpucores": "20"}), policy)
    assert _limits(result.object) == {"nvidia.com/gpu": "1"}


def test_hami_scheduler_pods_keep_them_where_nothing_rewrites_their_gpus() -> None:
    policy = sharing_policy("sharing: {mode: exclusive}")
    obj = _pod({"nvidia.com/gpu": "1", "nvidia.com/gpumem": "4000"}, schedulerName="hami-scheduler")
    assert "nvidia.com/gpumem" in _limits(mutate_object(obj, policy).object)


def test_a_rewrite_never_leaves_them_even_under_hami_scheduler() -> None:
    """N:398-411: HAMi would read gpumem beside a MIG slice as a new whole-GPU ask."""
    policy = sharing_policy("sharing: {mode: mig, gpuModel: A100-80GB, defaultMemory: 5Gi}")
    obj = _pod({"nvidia.com/gpu": "1", "nvidia.com/gpumem": "4000"}, schedulerName="hami-scheduler")
    assert _limits(mutate_object(obj, policy).object) == {"nvidia.com/mig-1g.10gb": "1"}
