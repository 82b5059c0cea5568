"""Speed never changes a patch: the engine's one ordered pass against a plain reference.

The engine runs each mutator once in its fixed order over a copy-on-write draft and diffs
what they wrote with its own structural walk (tests/mutation/test_draft_equivalence.py holds
it to the clone-and-diff engine it replaced). The reference does what Gatekeeper's mutation
system does: a deep copy, and every mutator run round after round until none changes anything (at most
len(mutators) + 1 rounds, else an error). For every pod and every policy:
- both give the same object and the same warnings;
- the engine's patch, applied by jsonpatch, rebuilds that object from the submitted one;
- the submitted object is left as it was.
The policies turn on every mutator at once, forced and not, so that a mutator reading what
a later one writes would show here as a difference.
"""

from __future__ import annotations

import copy
import itertools
import re
from collections.abc import Sequence
from typing import Any

import jsonpatch
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.mutation.test_hints import view
from tests.mutation.test_properties import POLICIES, pods
from tests.support.policies import sharing_policy
from webhook.accounting.needs import PodNeeds, read_needs
from webhook.accounting.target import PodTarget, pod_target
from webhook.capacity import CapacityView
from webhook.errors import AdmissionDenied
from webhook.mutation import inject
from webhook.mutation.checkpoint import checkpoint
from webhook.mutation.context import MutationContext
from webhook.mutation.engine import Mutator, mutate_object, mutators
from webhook.sharing_policy import SharingPolicy

SHARING = {
    "exclusive": "{mode: exclusive}",
    "timeslice": "{mode: timeslice, resourceName: nvidia.com/gpu.shared, allowOptOut: true}",
    "mps": "{mode: mps}",
    "mig": "{mode: mig, gpuModel: H100-80GB, defaultMemory: 10Gi, allowOptOut: true}",
    "hami": "{mode: hami, defaultMemory: 8Gi, cores: 25}",
    "kai": "{mode: kai, gpuModel: A100-80GB, defaultMemory: 40Gi}",
}
# hami and kai pods schedule only through their own scheduler; a policy naming another is refused.
OWN_SCHEDULER = {"hami": "hami-scheduler", "kai": "kai-scheduler"}
EVERY_MUTATOR = """
inject:
  force: {force}
  schedulerName: {scheduler}
  priorityClassName: gpu-high
  runtimeClassName: nvidia
  labels: {{team: ml, kai.scheduler/queue: research}}
  annotations: {{example.com/owner: ml, gpu-fraction: "0.25"}}
  tolerations:
    - {{key: nvidia.com/gpu, operator: Exists, effect: NoSchedule}}
    - {{key: spot, operator: Equal, value: "true", effect: NoSchedule}}
  nodeAffinity:
    required:
      - {{key: nvidia.com/gpu.product, operator: In, values: [NVIDIA-H100-80GB-HBM3]}}
    preferred:
      - {{weight: 10, key: zone, operator: In, values: [a]}}
  preferUnderutilized: {{weight: 40, maxNodes: 2}}
checkpoint:
  image: registry.example.com/ckpt:1
  mountPath: /checkpoints
  volume: {{emptyDir: {{}}}}
  nativeSidecar: {native}
  terminationGracePeriodSeconds: 120
"""


def _full_policies() -> list[SharingPolicy]:
    return [
        sharing_policy(
            f"sharing: {sharing}\n"
            + EVERY_MUTATOR.format(
                force=force, native=native, scheduler=OWN_SCHEDULER.get(mode, "gpu-scheduler")
            ),
            name=mode,
        )
        for (mode, sharing), force, native in itertools.product(SHARING.items(), (False, True), (False, True))
    ]


FULL_POLICIES = _full_policies()
PLACEMENTS = (None, view())


def _to_fixed_point(target: PodTarget, steps: Sequence[Mutator], context: MutationContext) -> int:
    for round_number in range(1, len(steps) + 2):
        changes = [step(target, context) for step in steps]
        if not any(changes):
            return round_number
    raise AssertionError("the mutators did not converge")


def _reference(
    obj: dict[str, Any], policy: SharingPolicy, placement: CapacityView | None
) -> tuple[dict[str, Any], list[str], int]:
    """The mutated object, its warnings, and the rounds it took; as mutate_object, without its shortcuts."""
    mutated = copy.deepcopy(obj)
    target = pod_target(mutated)
    assert target is not None
    needs = read_needs(target)
    opted_out = needs.opt_out and policy.sharing.allow_opt_out
    context = MutationContext(
        policy, needs, "exclusive" if opted_out else policy.sharing.mode, placement=placement
    )
    if needs.opt_out and not opted_out:
        context.warn(f"policy {policy.name} does not allow opting out of GPU sharing; sharing applied")
    rounds = _to_fixed_point(target, mutators(context.mode), context)
    return mutated, list(context.warnings), rounds


def _assert_same_as_reference(
    obj: dict[str, Any], policy: SharingPolicy, placement: CapacityView | None
) -> int:
    try:
        expected, warnings, rounds = _reference(obj, policy, placement)
    except AdmissionDenied as e:
        with pytest.raises(AdmissionDenied, match=f"^{re.escape(str(e))}$"):
            mutate_object(obj, policy, placement=placement)
        return 0
    submitted = copy.deepcopy(obj)
    result = mutate_object(obj, policy, placement=placement)
    assert obj == submitted  # the request's own object is never edited
    assert result.object == expected
    assert list(result.warnings) == warnings
    assert jsonpatch.apply_patch(obj, list(result.patch)) == expected
    return rounds


REFERENCE = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@REFERENCE
@given(
    pod=pods(),
    policy=st.sampled_from([*FULL_POLICIES, *POLICIES]),
    placement=st.sampled_from(PLACEMENTS),
)
def test_one_ordered_pass_gives_what_the_fixed_point_reference_gives(
    pod: dict[str, Any], policy: SharingPolicy, placement: CapacityView | None
) -> None:
    _assert_same_as_reference(pod, policy, placement)


@pytest.mark.parametrize(
    "policy",
    FULL_POLICIES,
    ids=lambda p: f"{p.sharing.mode}-force={p.inject.force}-native={p.checkpoint.native_sidecar}",
)
def test_the_reference_settles_in_the_confirming_round_for_every_full_policy(policy: SharingPolicy) -> None:
    """Guards the property above against comparing pods no mutator touched: with every mutator
    on, the reference changes the pod in its first round and confirms in its second."""
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p", "namespace": "ns"},
        "spec": {
            "containers": [{"name": "main", "image": "x", "resources": {"limits": {"nvidia.com/gpu": "1"}}}]
        },
    }
    for placement in PLACEMENTS:
        assert _assert_same_as_reference(pod, policy, placement) == 2


def test_a_pass_in_the_wrong_order_differs_from_the_reference() -> None:
    """The comparison can fail: with a mutator that reads what a later one writes, one pass
    stops short of the fixed point, and the reference needs a third round to reach it."""
    # add_annotations writes gpu-fraction, which makes checkpoint mount into the KAI container.
    wrong_order = (checkpoint, inject.add_annotations)
    pod: dict[str, Any] = {
        "kind": "Pod",
        "metadata": {"name": "p"},
        "spec": {"containers": [{"name": "main", "image": "x"}]},
    }
    once, settled = pod_target(copy.deepcopy(pod)), pod_target(copy.deepcopy(pod))
    assert once is not None and settled is not None
    context = MutationContext(FULL_POLICIES[0], PodNeeds(), "exclusive")
    for step in wrong_order:
        step(once, context)
    assert _to_fixed_point(settled, wrong_order, context) == 3
    assert "volumeMounts" not in once.pod["spec"]["containers"][0]
    assert "volumeMounts" in settled.pod["spec"]["containers"][0]
