"""mode dra: whole-GPU requests become claims on the policy's templates, idempotently.

Template shapes follow NVIDIA k8s-dra-driver-gpu demo/specs/quickstart/v1/gpu-test-mps.yaml
(opaque GpuConfig) and gpu-test4.yaml (the MIG profile selector on mig.nvidia.com).
"""

from __future__ import annotations

from typing import Any

import jsonpatch
import pytest

from tests.mutation.test_modes import gpus, pod
from tests.support.policies import sharing_policy
from tests.support.schema import assert_valid
from webhook.accounting.target import PodTarget
from webhook.dra import templates
from webhook.errors import AdmissionDenied
from webhook.mutation.engine import mutate_object
from webhook.sharing_policy import SharingPolicy
from webhook.validation import builtin

EXCLUSIVE = sharing_policy("sharing: {mode: dra}", name="dra-whole")
TIMESLICING = sharing_policy(
    "sharing: {mode: dra, strategy: TimeSlicing, timeSlicing: {interval: Long}}", name="dra-ts"
)
MPS = sharing_policy(
    "sharing: {mode: dra, strategy: MPS, maxGpusPerPod: 2, mps: "
    "{defaultActiveThreadPercentage: 50, defaultPinnedDeviceMemoryLimit: 10Gi}}",
    name="dra-mps",
)
MIG = sharing_policy(
    "sharing: {mode: dra, strategy: MIG, gpuModel: A100-40GB, defaultMemory: 8Gi}", name="dra-mig"
)
ALL = [EXCLUSIVE, TIMESLICING, MPS, MIG]


def _mutated(policy: SharingPolicy, obj: dict[str, Any]) -> dict[str, Any]:
    result = mutate_object(obj, policy)
    assert jsonpatch.apply_patch(obj, list(result.patch)) == result.object
    assert mutate_object(result.object, policy).patch == ()  # idempotent
    assert_valid(result.object)
    return result.object


def _template_names(policy: SharingPolicy) -> set[str]:
    return {t["metadata"]["name"] for t in templates.templates_for(policy, "ns")}


@pytest.mark.parametrize("policy", ALL, ids=lambda p: p.name)
def test_whole_gpus_become_a_claim_on_a_printed_template(policy: SharingPolicy) -> None:
    result = _mutated(policy, pod(gpus("2")))
    container = result["spec"]["containers"][0]
    flat = {n for section in ("limits", "requests") for n in container["resources"].get(section, {})}
    assert "nvidia.com/gpu" not in flat
    assert container["resources"]["claims"] == [{"name": "gpu-main"}]
    (entry,) = result["spec"]["resourceClaims"]
    assert entry["name"] == "gpu-main"
    assert entry["resourceClaimTemplateName"] in _template_names(policy)


def test_each_container_gets_its_own_claim_of_its_own_shape() -> None:
    obj = pod(gpus("1", name="a"), gpus("2", name="b"), {"name": "side", "image": "x"})
    obj["spec"]["initContainers"] = [gpus("1", name="warm")]
    result = _mutated(EXCLUSIVE, obj)
    claims = {c["name"]: c["resourceClaimTemplateName"] for c in result["spec"]["resourceClaims"]}
    assert set(claims) == {"gpu-a", "gpu-b", "gpu-warm"}
    assert claims["gpu-a"] == claims["gpu-warm"] == templates.template_name(EXCLUSIVE, templates.Shape(1))
    assert claims["gpu-b"] == templates.template_name(EXCLUSIVE, templates.Shape(2))
    assert "claims" not in result["spec"]["containers"][2].get("resources", {})


def test_existing_claims_are_kept() -> None:
    obj = pod(gpus("1"), resourceClaims=[{"name": "nic", "resourceClaimTemplateName": "rdma"}])
    obj["spec"]["containers"][0]["resources"]["claims"] = [{"name": "nic"}]
    result = _mutated(EXCLUSIVE, obj)
    assert [c["name"] for c in result["spec"]["resourceClaims"]] == ["nic", "gpu-main"]
    assert result["spec"]["containers"][0]["resources"]["claims"] == [{"name": "nic"}, {"name": "gpu-main"}]


@pytest.mark.parametrize(
    ("memory", "profile"),
    # 10Gi does not fit 1g.10gb's real memory on A100-40GB (webhook/migtable.py).
    [(None, "1g.10gb"), ("4Gi", "1g.5gb"), ("10Gi", "3g.20gb"), ("15Gi", "3g.20gb"), ("39Gi", "7g.40gb")],
)
def test_mig_picks_the_profile_by_real_memory(memory: str | None, profile: str) -> None:
    annotations = {"gpuwebhook.io/gpu-memory": memory} if memory else None
    result = _mutated(MIG, pod(gpus("1"), annotations=annotations))
    name = result["spec"]["resourceClaims"][0]["resourceClaimTemplateName"]
    (shown,) = [t for t in templates.templates_for(MIG, "ns") if t["metadata"]["name"] == name]
    exactly = shown["spec"]["spec"]["devices"]["requests"][0]["exactly"]
    assert exactly["deviceClassName"] == "mig.nvidia.com"
    assert exactly["selectors"] == [
        {"cel": {"expression": f"device.attributes['gpu.nvidia.com'].profile == '{profile}'"}}
    ]


def test_mig_denies_more_than_the_largest_slice() -> None:
    with pytest.raises(AdmissionDenied, match="largest MIG profile"):
        mutate_object(pod(gpus("1"), annotations={"gpuwebhook.io/gpu-memory": "45Gi"}), MIG)


def test_sharing_enforced_accepts_claims_and_denies_whole_gpus_under_dra() -> None:
    claimed = _mutated(MPS, pod(gpus("1")))
    target = PodTarget(claimed, "Pod", "p")
    assert builtin.check(target, MPS, (), claimed=()) == []  # the caller leaves out the policy's own
    foreign = builtin.check(target, MPS, (), claimed=("ResourceClaimTemplate ns/x",))
    assert [f.message for f in foreign if "GPUs through DRA (ResourceClaimTemplate ns/x)" in f.message]
    whole = builtin.check(PodTarget(pod(gpus("1")), "Pod", "p"), MPS, ())
    assert [f.message for f in whole if "requires dra sharing" in f.message]
    sliced = builtin.check(PodTarget(pod(gpus("1", resource="nvidia.com/mig-1g.5gb")), "Pod", "p"), MPS, ())
    assert [f.message for f in sliced if "the MIG slice" in f.message]


def test_the_warning_names_the_template_review_shows() -> None:
    result = mutate_object(pod(gpus("2")), MPS)
    name = templates.template_name(MPS, templates.Shape(2))
    assert any(w.endswith(f"needs ResourceClaimTemplate {name}") for w in result.warnings), result.warnings
