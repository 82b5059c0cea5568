"""Size bounds: an object past one is refused before any work that grows with it, on /mutate,
/validate and offline, with a message naming the part and the bound."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.support.cli import gpu_webhook
from tests.support.policies import bundled_policies
from tests.support.reviews import make_review
from webhook.review import ReviewDeps, ReviewSettings, review
from webhook.types import Endpoint
from webhook.validation import bounds

Edit = Callable[[dict[str, Any]], None]


def _pod() -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "train", "namespace": "team"},
        "spec": {
            "containers": [
                {
                    "name": "c",
                    "image": "nvcr.io/nvidia/pytorch:24.01",
                    "resources": {"limits": {"nvidia.com/gpu": 1}},
                }
            ]
        },
    }


def _deployment(pod: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "trainer", "namespace": "team"},
        "spec": {"selector": {}, "template": {"metadata": _template_metadata(pod), "spec": pod["spec"]}},
    }


def _template_metadata(pod: dict[str, Any]) -> dict[str, Any]:
    metadata = {"labels": {"a": "b"}}
    return {**metadata, **{k: v for k, v in pod["metadata"].items() if k in ("labels", "annotations")}}


def _container(pod: dict[str, Any]) -> dict[str, Any]:
    container: dict[str, Any] = pod["spec"]["containers"][0]
    return container


def _capabilities(count: int, key: str = "add") -> Edit:
    def edit(pod: dict[str, Any]) -> None:
        _container(pod)["securityContext"] = {"capabilities": {key: [f"CAP_X{i}" for i in range(count)]}}

    return edit


def _containers(count: int, make: Callable[[int], dict[str, Any]]) -> Edit:
    def edit(pod: dict[str, Any]) -> None:
        pod["spec"]["containers"] = [make(i) for i in range(count)]

    return edit


def _env_each(per: int) -> Callable[[int], dict[str, Any]]:
    return lambda i: {
        "name": f"c{i}",
        "image": "x",
        "env": [{"name": f"V{j}", "value": "1"} for j in range(per)],
    }


def _device_env_each(per: int) -> Callable[[int], dict[str, Any]]:
    """NVIDIA_ names, which the toolkit's rule refuses one by one, and one of AMD's runtime."""
    names = [f"NVIDIA_X{j}" for j in range(per - 1)] + ["AMD_VISIBLE_DEVICES"]
    return lambda i: {"name": f"c{i}", "image": "x", "env": [{"name": n, "value": "all"} for n in names]}


def _spec_list(key: str, count: int, make: Callable[[int], Any]) -> Edit:
    return lambda pod: pod["spec"].__setitem__(key, [make(i) for i in range(count)])


def _metadata_map(key: str, count: int) -> Edit:
    return lambda pod: pod["metadata"].__setitem__(key, {f"example.com/k{i}": "v" for i in range(count)})


def _args(count: int) -> Edit:
    return lambda pod: _container(pod).__setitem__("args", ["-"] * count)


def _terms(count: int) -> Edit:
    term = {"matchExpressions": [{"key": "k", "operator": "Exists"}]}
    required = {"nodeSelectorTerms": [term] * count}
    return lambda pod: pod["spec"].__setitem__(
        "affinity", {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": required}}
    )


# (case, edit, the words the message must hold); each edit goes one past its bound.
OVER: list[tuple[str, Edit, str]] = [
    # Linux: include/uapi/linux/capability.h (41 capabilities, CAP_LAST_CAP 40).
    (
        "capabilities added",
        _capabilities(85),
        "85 capabilities to add, more than the 84 spellings of Linux's 41",
    ),
    ("capabilities dropped", _capabilities(85, "drop"), "85 capabilities to drop"),
    (
        "capabilities over containers",
        _containers(3, lambda i: {"name": f"c{i}", "securityContext": {"capabilities": {"add": ["X"] * 43}}}),
        "129 capability entries over its containers, more than 128",
    ),
    ("containers", _containers(65, lambda i: {"name": f"c{i}", "image": "x"}), "65 containers, more than 64"),
    (
        "env over containers",
        _containers(4, _env_each(513)),
        "2052 env entries over its containers, more than 2048",
    ),
    (
        "device variables over containers",
        _containers(4, _device_env_each(33)),
        "132 env entries naming device variables over its containers, more than 128",
    ),
    (
        "envFrom",
        _containers(1, lambda i: {"name": "c", "envFrom": [{"configMapRef": {"name": "m"}}] * 33}),
        "33 envFrom sources over its containers, more than 32",
    ),
    (
        "volumes",
        _spec_list("volumes", 129, lambda i: {"name": f"v{i}", "emptyDir": {}}),
        "129 volumes, more than 128",
    ),
    (
        "tolerations",
        _spec_list("tolerations", 257, lambda i: {"key": f"k{i}"}),
        "257 tolerations, more than 256",
    ),
    ("annotations", _metadata_map("annotations", 129), "129 annotations, more than 128"),
    ("labels", _metadata_map("labels", 129), "129 labels, more than 128"),
    ("affinity terms", _terms(129), "129 affinity terms, more than 128"),
    ("values", _args(bounds.MAX_VALUES), f"holds more than {bounds.MAX_VALUES} JSON values"),
]
# Pods as large as real ones get: each within every bound.
WITHIN: list[tuple[str, Edit]] = [
    ("41 capabilities and ALL", lambda pod: _capabilities(42)(pod)),
    ("2,048 env entries over 4 containers (a CI runner's build pod)", _containers(4, _env_each(512))),
    ("128 device variables over 4 containers", _containers(4, _device_env_each(32))),
    ("64 containers", _containers(64, lambda i: {"name": f"c{i}", "image": "x"})),
    ("a 1 MiB annotation", lambda pod: pod["metadata"].__setitem__("annotations", {"a": "x" * 2**20})),
    ("20,000 args", _args(20_000)),
]


def _with(edit: Edit, *, workload: bool = False) -> dict[str, Any]:
    pod = _pod()
    edit(pod)
    return _deployment(pod) if workload else pod


@pytest.mark.parametrize(("edit", "words"), [c[1:] for c in OVER], ids=[c[0] for c in OVER])
@pytest.mark.parametrize("workload", [False, True], ids=["pod", "deployment"])
def test_each_bound_is_named_when_passed(edit: Edit, words: str, workload: bool) -> None:
    obj = _with(edit, workload=workload)
    found = bounds.oversize(obj)
    assert found is not None and words in found.message
    assert found.message.startswith("Deployment trainer" if workload else "Pod train")
    assert bounds.oversize(obj, _pod()) == found  # an UPDATE that makes it so


@pytest.mark.parametrize("edit", [c[1] for c in WITHIN], ids=[c[0] for c in WITHIN])
def test_pods_as_large_as_real_ones_pass(edit: Edit) -> None:
    assert bounds.oversize(_with(edit)) is None
    assert bounds.oversize(_with(edit, workload=True)) is None


@settings(max_examples=60, deadline=None)
@given(
    st.recursive(
        st.none() | st.booleans() | st.integers() | st.text(max_size=3),
        lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=3), inner, max_size=4),
        max_leaves=40,
    )
)
def test_any_shape_is_judged_without_crashing(junk: Any) -> None:
    """Offline input and /mutate bodies are not validated by the API: any shape must be read."""
    for obj in (
        junk,
        {"kind": "Pod", "metadata": junk, "spec": junk},
        {"kind": "Pod", "spec": {"containers": junk}},
    ):
        bounds.oversize(obj if isinstance(obj, dict) else None)
        bounds.walked_entries(obj if isinstance(obj, dict) else None)


def test_values_are_counted_exactly_past_the_shortcut() -> None:
    """Under MAX_VALUES bytes the serialization bounds the count; past it the walk counts."""
    assert bounds.count_values({"a": [1, 2, 3]}, 10) <= 10
    assert bounds.count_values({"a": ["x" * 50] * 3}, 10) == 5  # the object, the list, three strings
    assert bounds.count_values({"a": list(range(100))}, 10) == 102  # past the limit: no further walk
    assert bounds.count_values({"a": 2**70}, 10) == 2  # orjson refuses the integer: walked


JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers(-9, 9) | st.sampled_from(["", "x", "1e2"]),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.sampled_from("abcd"), inner, max_size=4),
    max_leaves=30,
)


@settings(max_examples=300, deadline=None)
@given(st.dictionaries(st.sampled_from(["metadata", "data", "extra"]), JSON_VALUES, max_size=3))
def test_the_body_size_proves_the_values_bound(obj: dict[str, Any]) -> None:
    """Measured with the size of the body it came from, an object gets the same verdict as
    measured alone: each of its values takes at least a byte of that body (its first byte
    belongs to it alone), so a body within the bound holds no object past it. The bound is
    lowered so that generated objects fall on both sides of it."""
    body = orjson.dumps({"request": {"object": obj}})
    decoded = orjson.loads(body)["request"]["object"]
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(bounds, "MAX_VALUES", 12)
        assert bounds.measure(decoded, body_bytes=len(body)) == bounds.measure(decoded)


DEPS = ReviewDeps(policies=bundled_policies())
HEAVY_POD = _with(_capabilities(10_000))  # the red-team's pod: ~180 KiB, 1.5 ms of Rego an entry


@pytest.mark.parametrize(
    ("endpoint", "operation", "workload"),
    [
        ("mutate", "CREATE", False),
        ("validate", "CREATE", False),
        ("validate", "UPDATE", False),
        ("validate", "CREATE", True),
        ("validate", "UPDATE", True),
    ],
)
def test_review_refuses_an_oversized_object_before_any_rule(
    endpoint: Endpoint, operation: str, workload: bool
) -> None:
    obj = _deployment(HEAVY_POD) if workload else HEAVY_POD
    small = _deployment(_pod()) if workload else _pod()
    request = make_review(obj, operation=operation, old=small if operation == "UPDATE" else None)
    decision = review(request["request"], endpoint, DEPS)
    assert not decision.allowed and decision.code == 413
    assert decision.message.startswith(f"[{bounds.SIZE}] ")
    assert "10000 capabilities to add" in decision.message
    assert [f.policy for f in decision.findings] == [bounds.SIZE]


def test_an_object_already_past_a_bound_can_be_updated() -> None:
    """Made before the bounds: it must stay fixable, and its finalizers removable."""
    fixed = make_review(_pod(), operation="UPDATE", old=HEAVY_POD)
    assert review(fixed["request"], "validate", DEPS).allowed
    assert bounds.oversize(HEAVY_POD, HEAVY_POD) is None


def test_the_advisory_webhook_warns_and_never_denies() -> None:
    decision = review(make_review(HEAVY_POD)["request"], "advisory", DEPS)
    assert decision.allowed and decision.warnings[0].startswith(f"{bounds.SIZE}: Pod train")


def test_warn_enforcement_still_refuses_what_it_cannot_review() -> None:
    """Like a malformed object: warn mode softens policies, not the review's own limits."""
    deps = replace(DEPS, settings=ReviewSettings(enforcement="warn"))
    assert not review(make_review(HEAVY_POD)["request"], "validate", deps).allowed


def test_exempt_namespaces_are_never_measured() -> None:
    request = make_review(HEAVY_POD, namespace="kube-system")
    assert review(request["request"], "validate", DEPS).allowed


@pytest.mark.parametrize(
    ("obj", "body", "heavy"),
    [
        (_pod(), 2_000, False),
        (_with(_containers(4, _device_env_each(25))), 9_000, True),  # 100 device variables: sets grow
        (_with(_containers(4, _env_each(100))), 30_000, False),  # plain env entries are cleared at once
        (_pod(), bounds.HEAVY_BYTES + 1, True),  # a large body: its input costs
        (None, 500, False),
    ],
    ids=["ordinary", "many device variables", "many plain env entries", "large body", "no object"],
)
def test_the_cost_estimate(obj: dict[str, Any] | None, body: int, heavy: bool) -> None:
    assert bounds.is_heavy(obj, None, body) is heavy


def test_offline_review_refuses_what_the_server_refuses(tmp_path: Path) -> None:
    """`gpu-webhook review` calls the same review(): the red-team's pod is refused by size."""
    manifest = tmp_path / "pod.json"
    manifest.write_bytes(orjson.dumps(HEAVY_POD))
    result = gpu_webhook("review", str(manifest), "-o", "json", cwd=tmp_path)
    assert result.returncode != 0, result.stderr
    outcome = orjson.loads(result.stdout)[0]
    assert outcome["allowed"] is False
    assert outcome["status"]["message"].startswith(f"[{bounds.SIZE}] Pod train: container 'c' lists 10000")
