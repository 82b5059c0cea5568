"""The upstream rules end to end: through the installed webhook configurations (manifests/base),
as kube-apiserver dispatches them, /mutate with its patch applied and then /validate, with the
bundled policies plus a single-strategy MIG policy. The rules themselves are pinned, with their
upstream lines, in the other files of this directory."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from typing import Any

import pytest

from tests.support.dispatch import Dispatcher, Request, installed
from tests.support.policies import bundled_policies, sharing_policy
from webhook.review import ReviewDeps

SINGLE = sharing_policy(
    "match: {namespaces: [mig-single]}\n"
    "sharing: {mode: mig, gpuModel: A30-24GB, migStrategy: single, defaultMemory: 5Gi}",
    name="mig-single",
)


@pytest.fixture(scope="module")
def dispatcher() -> Iterator[Dispatcher]:
    bundled = bundled_policies()
    policies = dataclasses.replace(bundled, sharing=(*bundled.sharing, SINGLE))
    with installed(ReviewDeps(policies=policies)) as dispatcher:
        yield dispatcher


def _pod(
    namespace: str, limits: dict[str, str], annotations: dict[str, str] | None = None, **spec: Any
) -> Any:
    container = {"name": "main", "image": "registry.example.com/app:1", "resources": {"limits": limits}}
    metadata = {"name": "p", "namespace": namespace, "annotations": annotations or {}}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": metadata,
        "spec": {"containers": [container], **spec},
    }


def _limits(obj: Any) -> dict[str, str]:
    return dict(obj["spec"]["containers"][0]["resources"]["limits"])


def test_mps_more_than_one_share_is_denied(dispatcher: Dispatcher) -> None:
    outcome = dispatcher.admit(Request("CREATE", _pod("example-mps", {"nvidia.com/gpu": "2"})))
    assert not outcome.allowed and "failRequestsGreaterThanOne" in outcome.message


def test_an_eight_gpu_worker_under_mig_keeps_its_gpus(dispatcher: Dispatcher) -> None:
    outcome = dispatcher.admit(Request("CREATE", _pod("example-mig", {"nvidia.com/gpu": "8"})))
    assert outcome.allowed, outcome.message
    assert _limits(outcome.object) == {"nvidia.com/gpu": "8"}
    assert any("keeps 8 whole GPUs" in w for w in outcome.warnings)


def test_hami_memory_left_by_a_pod_becomes_its_mig_slice(dispatcher: Dispatcher) -> None:
    obj = _pod("example-mig", {"nvidia.com/gpu": "1", "nvidia.com/gpumem": "20000"})
    outcome = dispatcher.admit(Request("CREATE", obj))
    assert outcome.allowed, outcome.message
    assert _limits(outcome.object) == {"nvidia.com/mig-1g.20gb": "1"}


def test_kai_refuses_a_quantity_as_fraction(dispatcher: Dispatcher) -> None:
    obj = _pod("example-kai", {}, {"gpu-fraction": "500m"}, schedulerName="kai-scheduler")
    outcome = dispatcher.admit(Request("CREATE", obj))
    assert not outcome.allowed and "gpu-fraction annotation value must be" in outcome.message


def test_single_strategy_keeps_nvidia_gpu_on_pinned_nodes(dispatcher: Dispatcher) -> None:
    obj = _pod("mig-single", {"nvidia.com/gpu": "1"}, {"gpuwebhook.io/gpu-memory": "6Gi"})
    outcome = dispatcher.admit(Request("CREATE", obj))
    assert outcome.allowed, outcome.message
    assert _limits(outcome.object) == {"nvidia.com/gpu": "1"}
    assert outcome.object is not None
    terms = outcome.object["spec"]["affinity"]["nodeAffinity"][
        "requiredDuringSchedulingIgnoredDuringExecution"
    ]
    expressions = terms["nodeSelectorTerms"][0]["matchExpressions"]
    assert {"key": "nvidia.com/gpu.slices.gi", "operator": "In", "values": ["2"]} in expressions
    assert any("2g.12gb (11672 MiB real" in w for w in outcome.warnings)


def test_hami_limits_are_not_added_under_another_scheduler(dispatcher: Dispatcher) -> None:
    obj = _pod("example-hami", {"nvidia.com/gpu": "1"}, schedulerName="volcano")
    outcome = dispatcher.admit(Request("CREATE", obj))
    assert outcome.allowed, outcome.message
    assert _limits(outcome.object) == {"nvidia.com/gpu": "1"}


def test_the_checkpoint_agent_runs_before_gpu_init_containers(dispatcher: Dispatcher) -> None:
    obj = _pod("example-training", {"nvidia.com/gpu": "1"})
    obj["metadata"]["labels"] = {"gpuwebhook.io/workload": "training"}
    obj["spec"]["initContainers"] = [
        {"name": "fetch", "image": "registry.example.com/app:1"},
        {
            "name": "warm",
            "image": "registry.example.com/app:1",
            "resources": {"limits": {"nvidia.com/gpu": "1"}},
        },
    ]
    outcome = dispatcher.admit(Request("CREATE", obj))
    assert outcome.allowed, outcome.message
    assert outcome.object is not None
    init = outcome.object["spec"]["initContainers"]
    assert [c["name"] for c in init] == ["fetch", "gpuwebhook-checkpoint", "warm"]
    assert any(m["name"] == "gpuwebhook-checkpoint" for m in init[2]["volumeMounts"])
