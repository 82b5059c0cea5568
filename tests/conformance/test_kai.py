"""KAI-Scheduler conformance: each case pins one line of KAI's own validation or behaviour.

Upstream: NVIDIA/KAI-Scheduler at 72de64fc8eca10fa8cca26a20156178f3edbe092.
V = pkg/binder/plugins/gpusharing/gpu-request/gpu_request_validator.go
G = pkg/podgrouper/podgrouper/plugins/defaultgrouper/default_grouper.go
D = docs/gpu-sharing/README.md
If KAI changes a rule, the case naming its line fails here.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.support.policies import compile_problems, sharing_policy
from webhook.accounting import kai
from webhook.errors import AdmissionDenied
from webhook.mutation.engine import mutate_object

WHOLE = [{"name": "main", "resources": {"limits": {"nvidia.com/gpu": "1"}}}]
WHOLE_ZERO = [{"name": "main", "resources": {"limits": {"nvidia.com/gpu": "0"}}}]
INIT_WHOLE = [{"name": "app"}, {"name": "init", "resources": {"limits": {"nvidia.com/gpu": "1"}}}]
NONE: list[dict[str, Any]] = [{"name": "main"}]

VALIDATOR = [
    # (cited line, annotations, containers, KAI's error or None)
    (
        "V:28-30 mps without a fraction",
        {"mps": "true"},
        NONE,
        "MPS is only supported with GPU fraction request",
    ),
    ("V:28 mps other than 'true' is ignored", {"mps": "True"}, NONE, None),
    ("V:28 mps with a fraction", {"mps": "true", "gpu-fraction": "0.5"}, NONE, None),
    ("V:32-34 fraction and whole GPU", {"gpu-fraction": "0.5"}, WHOLE, "cannot have both GPU fraction"),
    (
        "V:99-106 a limit of 0 still counts",
        {"gpu-fraction": "0.5"},
        WHOLE_ZERO,
        "cannot have both GPU fraction",
    ),
    ("V:100 init containers count", {"gpu-fraction": "0.5"}, INIT_WHOLE, "cannot have both GPU fraction"),
    ("V:36-38 memory and whole GPU", {"gpu-memory": "100"}, WHOLE, "cannot request both GPU and GPU memory"),
    (
        "V:36-38 memory and fraction",
        {"gpu-memory": "100", "gpu-fraction": "0.5"},
        NONE,
        "cannot request both GPU and GPU memory",
    ),
    (
        "V:40-44 lone num-devices",
        {"gpu-fraction-num-devices": "2"},
        NONE,
        "cannot request multiple fractional",
    ),
    ("V:68-70 memory with a suffix", {"gpu-memory": "12Gi"}, NONE, "gpu-memory annotation value must be"),
    ("V:68-70 memory zero", {"gpu-memory": "0"}, NONE, "gpu-memory annotation value must be"),
    ("V:68-70 memory negative", {"gpu-memory": "-5"}, NONE, "gpu-memory annotation value must be"),
    ("V:68-70 memory plain MiB", {"gpu-memory": "12288"}, NONE, None),
    (
        "V:79-83 fraction as a quantity",
        {"gpu-fraction": "500m"},
        NONE,
        "gpu-fraction annotation value must be",
    ),
    ("V:79-83 fraction 1", {"gpu-fraction": "1"}, NONE, "gpu-fraction annotation value must be"),
    ("V:79-83 fraction 1.0", {"gpu-fraction": "1.0"}, NONE, "gpu-fraction annotation value must be"),
    ("V:79-83 fraction 0", {"gpu-fraction": "0"}, NONE, "gpu-fraction annotation value must be"),
    ("V:79-83 fraction with spaces", {"gpu-fraction": " 0.5"}, NONE, "gpu-fraction annotation value must be"),
    ("V:79 ParseFloat reads .5", {"gpu-fraction": ".5"}, NONE, None),
    ("V:79 ParseFloat reads 5e-1", {"gpu-fraction": "5e-1"}, NONE, None),
    ("V:79 ParseFloat reads hex", {"gpu-fraction": "0x1p-2"}, NONE, None),
    ("V:79-80 NaN compares false", {"gpu-fraction": "NaN"}, NONE, None),
    (
        "V:91-93 num-devices zero",
        {"gpu-fraction": "0.5", "gpu-fraction-num-devices": "0"},
        NONE,
        "fraction count",
    ),
    (
        "V:91-93 num-devices word",
        {"gpu-memory": "100", "gpu-fraction-num-devices": "two"},
        NONE,
        "fraction count",
    ),
    ("V:56-59 num-devices 2", {"gpu-fraction": "0.5", "gpu-fraction-num-devices": "2"}, NONE, None),
]


@pytest.mark.parametrize(
    ("annotations", "containers", "error"), [c[1:] for c in VALIDATOR], ids=[c[0] for c in VALIDATOR]
)
def test_the_builtin_check_is_kais_validator(
    annotations: dict[str, str], containers: list[dict[str, Any]], error: str | None
) -> None:
    found = kai.problem(annotations, containers)
    assert (found is None) if error is None else (found is not None and found.startswith(error)), found


POLICY = sharing_policy("sharing: {mode: kai, gpuModel: A100-80GB, defaultMemory: 20Gi}")


def _pod(annotations: dict[str, str], count: str = "1") -> dict[str, Any]:
    container = {"name": "main", "image": "x", "resources": {"limits": {"nvidia.com/gpu": count}}}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p", "namespace": "ns", "annotations": annotations},
        "spec": {"containers": [container]},
    }


@pytest.mark.parametrize(
    "annotations",
    [{}, {"gpuwebhook.io/gpu-memory": "3000Mi"}, {"gpuwebhook.io/gpu-cores": "30"}],
)
@pytest.mark.parametrize("count", ["1", "4"])
def test_what_we_emit_passes_kais_validator(annotations: dict[str, str], count: str) -> None:
    result = mutate_object(_pod(annotations, count), POLICY).object
    assert kai.problem(result["metadata"]["annotations"], result["spec"]["containers"]) is None


def test_compute_never_becomes_a_fraction() -> None:
    """D:32-34: gpu-fraction 0.5 "is allowed to consume up to half of a GPU device memory"."""
    result = mutate_object(_pod({"gpuwebhook.io/gpu-cores": "30"}), POLICY)
    assert "gpu-fraction" not in result.object["metadata"]["annotations"]
    assert result.object["metadata"]["annotations"]["gpu-memory"] == "20480"
    assert any("KAI shares GPU memory only" in w for w in result.warnings)


def test_a_policy_cannot_map_cores_to_kai() -> None:
    problems = compile_problems("sharing: {mode: kai, gpuModel: A100-80GB, cores: 50}")
    assert any("share of GPU memory" in p for p in problems)


def test_hami_memory_becomes_kais_gpu_memory() -> None:
    obj = _pod({})
    obj["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpumem"] = "6000"
    result = mutate_object(obj, POLICY).object
    assert result["metadata"]["annotations"]["gpu-memory"] == "6000"
    assert "nvidia.com/gpumem" not in result["spec"]["containers"][0]["resources"]["limits"]
    assert kai.problem(result["metadata"]["annotations"], result["spec"]["containers"]) is None


def test_hami_memory_percentage_becomes_memory_of_the_card() -> None:
    obj = _pod({})
    obj["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpumem-percentage"] = "25"
    result = mutate_object(obj, POLICY).object
    assert result["metadata"]["annotations"]["gpu-memory"] == str(81920 // 4)


def test_a_fraction_for_two_containers_is_refused() -> None:
    obj = _pod({})
    obj["spec"]["containers"].append(dict(obj["spec"]["containers"][0], name="second"))
    with pytest.raises(AdmissionDenied, match="one container"):
        mutate_object(obj, POLICY)


LEFTOVER_CASES = [
    # (policy, annotations, expected container limits, gpuwebhook.io/gpu-memory)
    (
        "{mode: mig, gpuModel: A100-80GB, defaultMemory: 5Gi}",
        {"gpu-fraction": "0.25"},
        {"nvidia.com/mig-3g.40gb": "1"},
        "20480Mi",
    ),
    (
        "{mode: mig, gpuModel: A100-80GB, defaultMemory: 5Gi}",
        {"gpu-memory": "9000"},
        {"nvidia.com/mig-1g.10gb": "1"},
        "9000Mi",
    ),
    ("{mode: hami, cores: 30}", {"gpu-fraction": "0.5"}, None, None),
    (
        "{mode: exclusive}",
        {"gpu-memory": "9000", "gpu-fraction-num-devices": "2"},
        {"nvidia.com/gpu": "2"},
        None,
    ),
]


@pytest.mark.parametrize(("spec", "annotations", "limits", "memory"), LEFTOVER_CASES)
def test_kai_annotations_on_a_pod_kai_will_not_schedule_are_translated(
    spec: str, annotations: dict[str, str], limits: dict[str, str] | None, memory: str | None
) -> None:
    """Only KAI's binder reads these annotations (V:16-19); elsewhere the pod would get no GPU."""
    policy = sharing_policy(f"sharing: {spec}")
    obj = _pod(annotations)
    del obj["spec"]["containers"][0]["resources"]
    result = mutate_object(obj, policy).object
    left = result["metadata"]["annotations"]
    assert not {"gpu-fraction", "gpu-memory", "gpu-fraction-num-devices"} & left.keys()
    got = result["spec"]["containers"][0]["resources"]["limits"]
    if limits is not None:
        assert got == limits
    else:
        assert got["nvidia.com/gpumem-percentage"] == "50" and got["nvidia.com/gpu"] == "1"
    assert left.get("gpuwebhook.io/gpu-memory") == memory
    assert mutate_object(result, policy).patch == ()


def test_kai_annotations_under_time_slicing_are_refused() -> None:
    policy = sharing_policy("sharing: {mode: timeslice}")
    with pytest.raises(AdmissionDenied, match="only kai-scheduler reads"):
        mutate_object(_pod({"gpu-fraction": "0.5"}), policy)
