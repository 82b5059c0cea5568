"""mode dra: whole-GPU requests become claims on the policy's templates, idempotently.

Template shapes follow NVIDIA k8s-dra-driver-gpu demo/specs/quickstart/v1/gpu-test-mps.yaml
(opaque GpuConfig, and two containers sharing one claim's GPU) and gpu-test4.yaml (the MIG profile
selector on mig.nvidia.com). Who shares: the driver gives every container that references a claim
all of its devices (tests/bats/specs/gpu-1pod-2cnt-1gpu.yaml: two containers, one claim, one GPU),
and shares a device only within one claim (cmd/gpu-kubelet-plugin/sharing.go starts one MPS
daemon per claim), so a shared policy gives the pod one claim for all its GPU containers.
"""

from __future__ import annotations

from typing import Any

import jsonpatch
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

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
    "sharing: {mode: dra, strategy: TimeSlicing, timeSlicing: {interval: Long}, "
    "driverFeatureGates: {TimeSlicingSettings: true}}",
    name="dra-ts",
)
MPS = sharing_policy(
    "sharing: {mode: dra, strategy: MPS, maxGpusPerPod: 2, mps: "
    "{defaultActiveThreadPercentage: 50, defaultPinnedDeviceMemoryLimit: 10Gi}, "
    "driverFeatureGates: {MPSSupport: true}}",
    name="dra-mps",
)
MIG = sharing_policy(
    "sharing: {mode: dra, strategy: MIG, gpuModel: A100-40GB, defaultMemory: 8Gi}", name="dra-mig"
)
MIG_SHARED = sharing_policy(
    "sharing: {mode: dra, strategy: MIG, gpuModel: A100-40GB, defaultMemory: 8Gi, migSharing: MPS, "
    "fallback: [largerProfile, wholeGpu], driverFeatureGates: {MPSSupport: true}}",
    name="dra-mig-mps",
)
ALL = [EXCLUSIVE, TIMESLICING, MPS, MIG, MIG_SHARED]
SHARED = [TIMESLICING, MPS, MIG_SHARED]
OWN = [EXCLUSIVE, MIG]


def _mutated(policy: SharingPolicy, obj: dict[str, Any]) -> dict[str, Any]:
    result = mutate_object(obj, policy)
    assert jsonpatch.apply_patch(obj, list(result.patch)) == result.object
    assert mutate_object(result.object, policy).patch == ()  # idempotent
    assert_valid(result.object)
    return result.object


def _template_names(policy: SharingPolicy) -> set[str]:
    return {t["metadata"]["name"] for t in templates.templates_for(policy, "ns")}


def _claims(obj: dict[str, Any]) -> dict[str, str]:
    return {c["name"]: c["resourceClaimTemplateName"] for c in obj["spec"]["resourceClaims"]}


def _uses(container: dict[str, Any]) -> list[str]:
    return [c["name"] for c in container.get("resources", {}).get("claims", [])]


@pytest.mark.parametrize("policy", ALL, ids=lambda p: p.name)
def test_whole_gpus_become_a_claim_on_a_printed_template(policy: SharingPolicy) -> None:
    result = _mutated(policy, pod(gpus("2")))
    container = result["spec"]["containers"][0]
    flat = {n for section in ("limits", "requests") for n in container["resources"].get(section, {})}
    assert "nvidia.com/gpu" not in flat
    claim = "gpu" if policy in SHARED else "gpu-main"
    assert _uses(container) == [claim]
    assert list(_claims(result)) == [claim]
    assert _claims(result)[claim] in _template_names(policy)


@pytest.mark.parametrize("policy", OWN, ids=lambda p: p.name)
def test_unshared_gives_each_container_its_own_claim_of_its_own_shape(policy: SharingPolicy) -> None:
    obj = pod(gpus("1", name="a"), gpus("2", name="b"), {"name": "side", "image": "x"})
    obj["spec"]["initContainers"] = [gpus("1", name="warm")]
    result = _mutated(policy, obj)
    claims = _claims(result)
    assert set(claims) == {"gpu-a", "gpu-b", "gpu-warm"}
    profile = templates.shape_named(policy, claims["gpu-a"])
    assert profile is not None
    assert claims["gpu-a"] == claims["gpu-warm"] == templates.template_name(policy, profile)
    assert templates.shape_named(policy, claims["gpu-b"]) == templates.Shape(2, profile.profile)
    assert "claims" not in result["spec"]["containers"][2].get("resources", {})


@pytest.mark.parametrize("policy", SHARED, ids=lambda p: p.name)
def test_shared_gives_the_pod_one_claim_as_large_as_its_largest_container(policy: SharingPolicy) -> None:
    obj = pod(gpus("1", name="a"), gpus("2", name="b"), {"name": "side", "image": "x"})
    obj["spec"]["initContainers"] = [gpus("1", name="warm")]
    result = _mutated(policy, obj)
    (name,) = _claims(result).values()
    shape = templates.shape_named(policy, name)
    assert shape is not None and shape.count == 2
    spec = result["spec"]
    assert [_uses(c) for c in spec["containers"]] == [["gpu"], ["gpu"], []]
    assert _uses(spec["initContainers"][0]) == ["gpu"]


@pytest.mark.parametrize(
    ("policy", "strategy", "what"),
    [
        (TIMESLICING, "TimeSlicing", "2 GPUs"),
        (MPS, "MPS", "2 GPUs"),
        (MIG_SHARED, "MPS", "2 MIG 1g.10gb slices"),
    ],
    ids=lambda v: v.name if isinstance(v, SharingPolicy) else str(v),
)
def test_the_warning_says_what_is_shared_and_with_whom(
    policy: SharingPolicy, strategy: str, what: str
) -> None:
    result = mutate_object(pod(gpus("1", name="a"), gpus("2", name="b")), policy)
    expected = f"containers a, b share {what} through claim gpu ({strategy}); other pods do not share it"
    assert expected in result.warnings, result.warnings
    name = _claims(result.object)["gpu"]
    assert f"needs ResourceClaimTemplate {name}: claim gpu gives {what}" in result.warnings


def test_one_container_holds_the_claim_alone() -> None:
    result = mutate_object(pod(gpus("1")), MPS)
    assert "container main holds 1 GPU through claim gpu (MPS); other pods do not share it" in result.warnings


def test_the_fallbacks_are_said() -> None:
    """A100-40GB: 8Gi fits 1g.10gb; the next larger plain profile is 2g.10gb, then a whole GPU."""
    result = mutate_object(pod(gpus("1")), MIG_SHARED)
    said = "if no 1g.10gb slice is free, the claim takes 2g.10gb, then a whole GPU (firstAvailable)"
    assert said in result.warnings, result.warnings
    assert not [w for w in mutate_object(pod(gpus("1")), MIG).warnings if "firstAvailable" in w]


def test_the_warning_stays_under_the_apiservers_limit() -> None:
    """kube-apiserver cuts warnings over 120 characters: long names give a count instead."""
    long = ["a" * 50, "b" * 50]
    result = mutate_object(pod(*(gpus("1", name=n) for n in long)), TIMESLICING)
    assert (
        "2 containers share 1 GPU through claim gpu (TimeSlicing); other pods do not share it"
        in result.warnings
    )
    assert all(len(w) < 120 for w in result.warnings), result.warnings


def test_a_container_added_later_joins_the_pods_claim() -> None:
    """A pod rewritten before (a workload's template) that gains a GPU container: the claim is
    kept, and grows to the new container's count."""
    once = _mutated(MPS, pod(gpus("1", name="a")))
    once["spec"]["containers"].append(gpus("2", name="b"))
    twice = _mutated(MPS, once)
    assert [_uses(c) for c in twice["spec"]["containers"]] == [["gpu"], ["gpu"]]
    assert templates.shape_named(MPS, _claims(twice)["gpu"]) == templates.Shape(2)
    twice["spec"]["containers"].append(gpus("1", name="c"))
    thrice = _mutated(MPS, twice)
    assert templates.shape_named(MPS, _claims(thrice)["gpu"]) == templates.Shape(2)  # never shrinks


@pytest.mark.parametrize(("policy", "taken"), [(MPS, "gpu"), (EXCLUSIVE, "gpu-main")], ids=["shared", "own"])
def test_a_pod_claim_of_the_pods_own_under_our_name_is_not_replaced(
    policy: SharingPolicy, taken: str
) -> None:
    obj = pod(gpus("1"), resourceClaims=[{"name": taken, "resourceClaimTemplateName": "my-nic"}])
    with pytest.raises(AdmissionDenied, match=f"its own pod claim '{taken}'"):
        mutate_object(obj, policy)


def test_existing_claims_are_kept() -> None:
    obj = pod(gpus("1"), resourceClaims=[{"name": "nic", "resourceClaimTemplateName": "rdma"}])
    obj["spec"]["containers"][0]["resources"]["claims"] = [{"name": "nic"}]
    for policy, name in ((EXCLUSIVE, "gpu-main"), (MPS, "gpu")):
        result = _mutated(policy, obj)
        assert [c["name"] for c in result["spec"]["resourceClaims"]] == ["nic", name]
        assert result["spec"]["containers"][0]["resources"]["claims"] == [{"name": "nic"}, {"name": name}]


@pytest.mark.parametrize(
    ("memory", "profile"),
    # 10Gi does not fit 1g.10gb's real memory on A100-40GB (webhook/migtable.py).
    [(None, "1g.10gb"), ("4Gi", "1g.5gb"), ("10Gi", "3g.20gb"), ("15Gi", "3g.20gb"), ("39Gi", "7g.40gb")],
)
@pytest.mark.parametrize("policy", [MIG, MIG_SHARED], ids=lambda p: p.name)
def test_mig_picks_the_profile_by_real_memory(
    policy: SharingPolicy, memory: str | None, profile: str
) -> None:
    annotations = {"gpuwebhook.io/gpu-memory": memory} if memory else None
    result = _mutated(policy, pod(gpus("1"), annotations=annotations))
    (name,) = _claims(result).values()
    shape = templates.shape_named(policy, name)
    assert shape is not None and shape.profile is not None and shape.profile.name == profile


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
    result = mutate_object(pod(gpus("2")), EXCLUSIVE)
    name = templates.template_name(EXCLUSIVE, templates.Shape(2))
    expected = f"needs ResourceClaimTemplate {name}: claim gpu-main gives 2 GPUs to container main alone"
    assert expected in result.warnings, result.warnings


CONTAINER = st.from_regex(r"[a-z]([-a-z0-9]{0,20}[a-z0-9])?", fullmatch=True)
ASKS = st.lists(st.tuples(CONTAINER, st.integers(1, 2)), min_size=1, max_size=4, unique_by=lambda t: t[0])


@settings(max_examples=30, deadline=None)
@given(st.sampled_from(ALL), ASKS, st.booleans())
def test_any_pod_gets_a_valid_idempotent_patch_and_one_claim_per_sharing_unit(
    policy: SharingPolicy, asks: list[tuple[str, int]], init_first: bool
) -> None:
    containers = [gpus(str(count), name=name) for name, count in asks]
    obj = pod(*containers[1:]) if init_first and len(containers) > 1 else pod(*containers)
    if init_first and len(containers) > 1:
        obj["spec"]["initContainers"] = containers[:1]
    result = _mutated(policy, obj)
    claims = _claims(result)
    assert all(name in _template_names(policy) for name in claims.values())
    expected = 1 if policy in SHARED else len(asks)
    assert len(claims) == expected
    if policy in SHARED:
        shape = templates.shape_named(policy, claims["gpu"])
        assert shape is not None and shape.count == max(count for _, count in asks)
