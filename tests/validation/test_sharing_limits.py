"""A sharing policy's caps: nobody takes a whole card by asking for its memory, or many cards at once."""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from tests.support.policies import compile_problems, policy_set, sharing_policy
from tests.support.reviews import make_review
from webhook.admission import parse_review
from webhook.review import ReviewDeps, review

MATCH = "match: {namespaces: [team]}\n"
TIMESLICE = sharing_policy(MATCH + "sharing: {mode: timeslice, maxGpusPerPod: 2, maxMemory: 20Gi}", "slices")
MIG = sharing_policy(
    MATCH + "sharing: {mode: mig, gpuModel: A100-80GB, defaultMemory: 10Gi, maxMemory: 20Gi}", "mig"
)
OPT_OUT = sharing_policy(
    MATCH + "sharing: {mode: timeslice, maxGpusPerPod: 1, maxMemory: 20Gi, allowOptOut: true}", "optout"
)


def pod(limits: dict[str, str], annotations: dict[str, str] | None = None) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p", "namespace": "team", "annotations": annotations or {}},
        "spec": {"containers": [{"name": "main", "image": "x", "resources": {"limits": limits}}]},
    }


def validated(obj: dict[str, Any], *policies: Any) -> tuple[bool, str]:
    request = parse_review(orjson.dumps(make_review(obj)))
    decision = review(request, "validate", ReviewDeps(policies=policy_set(*policies)))
    return decision.allowed, decision.message


def mutated_then_validated(obj: dict[str, Any], *policies: Any) -> tuple[bool, str]:
    deps = ReviewDeps(policies=policy_set(*policies))
    decision = review(parse_review(orjson.dumps(make_review(obj))), "mutate", deps)
    if not decision.allowed:
        return False, decision.message
    assert decision.object is not None
    return validated(dict(decision.object), *policies)


MEMORY = "gpuwebhook.io/gpu-memory"
CASES = [
    ("two shared GPUs", TIMESLICE, pod({"nvidia.com/gpu.shared": "2"}), True, ""),
    ("three shared GPUs", TIMESLICE, pod({"nvidia.com/gpu.shared": "3"}), False,
     "asks for 3 GPUs; at most 2"),
    ("a whole card's memory", TIMESLICE, pod({"nvidia.com/gpu.shared": "1"}, {MEMORY: "80Gi"}), False,
     "asks for 81920 MiB per GPU; at most 20480 MiB"),
    ("the largest slice by name", MIG, pod({"nvidia.com/mig-7g.80gb": "1"}), False, "81920 MiB per GPU"),
    ("a small slice by name", MIG, pod({"nvidia.com/mig-2g.20gb": "1"}), True, ""),
    ("opted out where opting out is allowed", OPT_OUT,
     pod({"nvidia.com/gpu": "4"}, {"gpuwebhook.io/sharing": "exclusive"}), True, ""),
]  # fmt: skip


@pytest.mark.parametrize(
    ("policy", "obj", "allowed", "message"), [pytest.param(*c[1:], id=c[0]) for c in CASES]
)
def test_caps_are_enforced_on_the_final_pod(
    policy: Any, obj: dict[str, Any], allowed: bool, message: str
) -> None:
    got, text = validated(obj, policy)
    assert got is allowed, text
    assert message in text
    if not allowed:
        assert text.startswith("[gpu-builtin/sharing-limits] Pod p:")


def test_asking_mig_for_a_whole_card_by_memory_is_denied_after_mutation() -> None:
    allowed, message = mutated_then_validated(pod({"nvidia.com/gpu": "1"}, {MEMORY: "70Gi"}), MIG)
    assert not allowed and "at most 20480 MiB" in message
    assert mutated_then_validated(pod({"nvidia.com/gpu": "1"}, {MEMORY: "15Gi"}), MIG)[0]


@pytest.mark.parametrize(
    ("spec", "problem"),
    [
        ("sharing: {mode: exclusive, maxGpusPerPod: 2}", "applies only to modes"),
        ("sharing: {mode: timeslice, maxGpusPerPod: 0}", "maxGpusPerPod"),
        ("sharing: {mode: kai, defaultMemory: 30Gi, maxMemory: 20Gi}", "is less than defaultMemory"),
        ("sharing: {mode: timeslice, maxMemory: lots}", "maxMemory"),
    ],
)
def test_caps_that_cannot_work_are_refused_at_load(spec: str, problem: str) -> None:
    problems = compile_problems(spec)
    assert any(problem in p for p in problems), problems
