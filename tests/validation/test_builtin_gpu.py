"""Built-in GPU checks in /validate: quantities, KAI rules, and sharing that /mutate should have applied."""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from tests.support.policies import policy_set, sharing_policy
from tests.support.reviews import make_review
from webhook.admission import parse_review
from webhook.review import ReviewDeps, review

POLICIES = policy_set(
    sharing_policy("match: {namespaces: [mig]}\nsharing: {mode: mig, gpuModel: H100-80GB}", "mig"),
    sharing_policy("match: {namespaces: [opt]}\nsharing: {mode: timeslice, allowOptOut: true}", "opt"),
    sharing_policy("match: {namespaces: [hami]}\nsharing: {mode: hami, cores: 20}", "hami"),
)
DEPS = ReviewDeps(policies=POLICIES)


def _pod(
    namespace: str,
    limits: dict[str, Any],
    annotations: dict[str, str] | None = None,
    requests: dict[str, Any] | None = None,
    kind: str = "Pod",
) -> dict[str, Any]:
    resources: dict[str, Any] = {"limits": limits}
    if requests is not None:
        resources["requests"] = requests
    spec = {"containers": [{"name": "main", "image": "x", "resources": resources}]}
    metadata = {"name": "p", "namespace": namespace, "annotations": annotations or {}}
    if kind == "Pod":
        return {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": spec}
    return {
        "apiVersion": "apps/v1",
        "kind": kind,
        "metadata": {"name": "w", "namespace": namespace},
        "spec": {"selector": {}, "template": {"metadata": metadata, "spec": spec}},
    }


def _validate(obj: dict[str, Any], operation: str = "CREATE") -> tuple[bool, str]:
    request = parse_review(orjson.dumps(make_review(obj, operation=operation)))
    decision = review(request, "validate", DEPS)
    assert decision.patch == ()
    return decision.allowed, decision.message


CASES = [
    # (name, object, allowed, message fragment)
    ("mig pod as /mutate left it", _pod("mig", {"nvidia.com/mig-1g.10gb": "1"}), True, ""),
    (
        "whole GPUs where MIG is required",
        _pod("mig", {"nvidia.com/gpu": "1"}),
        False,
        "policy mig requires mig sharing",
    ),
    (
        "whole GPUs in a Deployment template",
        _pod("mig", {"nvidia.com/gpu": "1"}, kind="Deployment"),
        False,
        "Deployment w asks for whole GPUs",
    ),
    (
        "opted out where allowed",
        _pod("opt", {"nvidia.com/gpu": "1"}, {"gpuwebhook.io/sharing": "exclusive"}),
        True,
        "",
    ),
    (
        "HAMi keeps whole GPU counts",
        _pod(
            "hami", {"nvidia.com/gpu": "1", "nvidia.com/gpucores": "20", "nvidia.com/gpumem-percentage": "20"}
        ),
        True,
        "",
    ),
    (
        # HAMi's defaultMemory 0 would give this pod the whole card's memory
        "HAMi compute limit without a memory limit",
        _pod("hami", {"nvidia.com/gpu": "1", "nvidia.com/gpucores": "20"}),
        False,
        "policy hami requires hami sharing",
    ),
    (
        "HAMi limits missing from whole GPUs",
        _pod("hami", {"nvidia.com/gpu": "1"}),
        False,
        "policy hami requires hami sharing",
    ),
    ("no policy, whole GPUs", _pod("free", {"nvidia.com/gpu": "4"}), True, ""),
    ("fractional count", _pod("free", {"nvidia.com/gpu": "0.5"}), False, "whole number"),
    ("negative MIG count", _pod("free", {"nvidia.com/mig-1g.10gb": "-1"}), False, "must not be negative"),
    (
        "request differs from limit",
        _pod("free", {"nvidia.com/gpu": "2"}, requests={"nvidia.com/gpu": "1"}),
        False,
        "must equal its limit",
    ),
    (
        "KAI fraction with whole GPUs",
        _pod("free", {"nvidia.com/gpu": "1"}, {"gpu-fraction": "0.5"}),
        False,
        "cannot have both GPU fraction request and whole GPU",
    ),
    ("KAI fraction out of range", _pod("free", {}, {"gpu-fraction": "1.5"}), False, "smaller than 1.0"),
    (
        "KAI fraction and memory together",
        _pod("free", {}, {"gpu-fraction": "0.5", "gpu-memory": "100"}),
        False,
        "cannot request both GPU and GPU memory",
    ),
    ("KAI fraction alone", _pod("free", {}, {"gpu-fraction": "0.5"}), True, ""),
]


@pytest.mark.parametrize(("obj", "allowed", "fragment"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_builtin_gpu_checks(obj: dict[str, Any], allowed: bool, fragment: str) -> None:
    got, message = _validate(obj)
    assert got is allowed, message
    assert fragment in message


def test_denials_name_the_check() -> None:
    _, message = _validate(_pod("free", {"nvidia.com/gpu": "0.5"}))
    assert message.startswith("[gpu-builtin/quantities] Pod p container 'main'")


def test_malformed_pods_are_a_clear_400() -> None:
    obj = _pod("free", {"nvidia.com/gpu": "1"})
    obj["spec"]["containers"][0]["env"] = "PATH=/bin"
    request = parse_review(orjson.dumps(make_review(obj)))
    decision = review(request, "validate", DEPS)
    assert (decision.allowed, decision.code) == (False, 400)
    assert decision.message == "[gpu-builtin/shape] Pod p: spec.containers[0].env must be a list of objects"


def test_an_invalid_count_beside_a_kai_fraction_is_one_clear_denial() -> None:
    allowed, message = _validate(_pod("free", {"nvidia.com/gpu": "x"}, {"gpu-fraction": "0.5"}))
    assert not allowed and "not a valid quantity" in message
