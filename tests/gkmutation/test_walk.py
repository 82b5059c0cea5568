"""The walk and pathTests, as Gatekeeper's pkg/mutation/mutators/core/mutation_function.go and
pkg/mutation/path/tester/tester.go (cases after their mutation_function_test.go and tester_test.go)."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from webhook.gkmutation import walk
from webhook.gkmutation.mutators import AssignValue, Target
from webhook.gkmutation.path import PathError, parse
from webhook.gkmutation.walk import NO_TESTS, Condition, MutationError, mutate, same_json

TARGET = Target("", "v1", "Pod", "CREATE", "default", {})


def _run(obj: dict[str, Any], location: str, value: Any, tests: list[tuple[str, Condition]] = ()) -> bool:  # type: ignore[assignment]
    path = parse(location)
    checks = walk.tester(path, [(parse(p), c) for p, c in tests]) if tests else NO_TESTS
    return mutate(obj, path, checks, AssignValue(value=value).setter(obj, TARGET))


POD = {"spec": {"containers": [{"name": "a"}, {"name": "b", "securityContext": {"privileged": True}}]}}

WALKS: list[tuple[str, str, Any, list[tuple[str, Condition]], dict[str, Any] | None]] = [
    # (id, location, value, pathTests, expected object or None for unchanged)
    (
        "glob visits every element",
        "spec.containers[name: *].securityContext.privileged",
        False,
        [],
        {
            "spec": {
                "containers": [
                    {"name": "a", "securityContext": {"privileged": False}},
                    {"name": "b", "securityContext": {"privileged": False}},
                ]
            }
        },
    ),
    (
        "MustNotExist on the leaf keeps a set value",
        "spec.containers[name: *].securityContext.privileged",
        False,
        [("spec.containers[name: *].securityContext.privileged", "MustNotExist")],
        {
            "spec": {
                "containers": [
                    {"name": "a", "securityContext": {"privileged": False}},
                    {"name": "b", "securityContext": {"privileged": True}},
                ]
            }
        },
    ),
    (
        "MustExist on a parent leaves elements without it alone",
        "spec.containers[name: *].securityContext.runAsUser",
        1000,
        [("spec.containers[name: *].securityContext", "MustExist")],
        {
            "spec": {
                "containers": [
                    {"name": "a"},
                    {"name": "b", "securityContext": {"privileged": True, "runAsUser": 1000}},
                ]
            }
        },
    ),
    (
        "a missing keyed element is created with its key",
        "spec.containers[name: c].image",
        "nginx",
        [],
        {
            "spec": {
                "containers": [
                    {"name": "a"},
                    {"name": "b", "securityContext": {"privileged": True}},
                    {"name": "c", "image": "nginx"},
                ]
            }
        },
    ),
    (
        "MustExist on a keyed element that is missing: nothing is created",
        "spec.containers[name: c].image",
        "nginx",
        [("spec.containers[name: c]", "MustExist")],
        None,
    ),
    (
        "MustNotExist on a glob can never hold",
        "spec.containers[name: *].image",
        "nginx",
        [("spec.containers[name: *]", "MustNotExist")],
        None,
    ),
    (
        "missing objects on the way are created",
        "spec.securityContext.seccompProfile",
        {"type": "RuntimeDefault"},
        [],
        {**POD, "spec": {**POD["spec"], "securityContext": {"seccompProfile": {"type": "RuntimeDefault"}}}},
    ),
    (
        "a keyed element is replaced whole",
        "spec.containers[name: b]",
        {"name": "b", "image": "x"},
        [],
        {"spec": {"containers": [{"name": "a"}, {"name": "b", "image": "x"}]}},
    ),
    (
        "MustNotExist on a keyed element that exists keeps it",
        "spec.containers[name: b]",
        {"name": "b", "image": "x"},
        [("spec.containers[name: b]", "MustNotExist")],
        None,
    ),
]


@pytest.mark.parametrize(("case", "location", "value", "tests", "expected"), WALKS, ids=[w[0] for w in WALKS])
def test_walk(
    case: str, location: str, value: Any, tests: list[tuple[str, Condition]], expected: dict[str, Any] | None
) -> None:
    obj = copy.deepcopy(POD)
    _run(obj, location, value, tests)
    assert obj == (expected if expected is not None else POD)


def test_a_key_typed_as_a_number_does_not_select_a_string() -> None:
    """Go compares the key with interface equality: int64(80) is not "80"."""
    obj = {"spec": {"ports": [{"containerPort": "80"}]}}
    _run(obj, "spec.ports[containerPort: 80].name", "http")
    assert obj["spec"]["ports"] == [{"containerPort": "80"}, {"containerPort": 80, "name": "http"}]


SHAPES = [
    ({"spec": []}, "spec.containers", "expects an object"),
    ({"spec": {"containers": {"a": 1}}}, "spec.containers[name: *].image", "expects a list"),
    ({"spec": {"containers": ["x"]}}, "spec.containers[name: *].image", "expects an object"),
    ({"spec": {"containers": ["x"]}}, "spec.containers[name: a]", "not an object"),
]


@pytest.mark.parametrize(("obj", "location", "reason"), SHAPES)
def test_an_object_of_another_shape_is_an_error(obj: dict[str, Any], location: str, reason: str) -> None:
    value: Any = {"name": "a"} if location.endswith("]") else "x"
    with pytest.raises(MutationError, match=reason):
        _run(obj, location, value)


def test_a_refused_walk_leaves_no_created_parent() -> None:
    obj: dict[str, Any] = {"spec": {}}
    _run(obj, "spec.a.b[name: x].c", 1, [("spec.a.b[name: x].c", "MustExist")])
    assert obj == {"spec": {}}


def test_set_values_are_copies() -> None:
    """A later write into the object never reaches the mutator's own value."""
    value = {"type": "RuntimeDefault"}
    obj: dict[str, Any] = {}
    _run(obj, "spec.profile", value)
    obj["spec"]["profile"]["type"] = "changed"
    assert value == {"type": "RuntimeDefault"}


TESTERS: list[tuple[str, list[tuple[str, Condition]], str]] = [
    ("spec.a.b", [("spec.x", "MustExist")], "is not a prefix"),
    ("spec.a.b", [("spec.a", "MustExist"), ("spec.a", "MustNotExist")], "both MustExist and MustNotExist"),
    ("spec.a.b", [("spec.a", "MustNotExist"), ("spec.a.b", "MustExist")], "is MustExist under"),
]


@pytest.mark.parametrize(("location", "tests", "reason"), TESTERS)
def test_inconsistent_path_tests_are_refused(
    location: str, tests: list[tuple[str, Condition]], reason: str
) -> None:
    with pytest.raises(PathError, match=reason):
        walk.tester(parse(location), [(parse(p), c) for p, c in tests])


def test_tester_depths() -> None:
    checks = walk.tester(
        parse("spec.a.b"), [(parse("spec.a"), "MustExist"), (parse("spec.a.b"), "MustNotExist")]
    )
    assert checks == walk.Tester({1: "MustExist", 2: "MustNotExist"})
    assert checks.exists_okay(0) and checks.missing_okay(0)
    assert checks.exists_okay(1) and not checks.missing_okay(1)
    assert not checks.exists_okay(2) and checks.missing_okay(2)


@pytest.mark.parametrize(
    ("a", "b", "same"),
    [
        (1, 1, True),
        (1, 1.0, False),
        (1, True, False),
        ([1, {"a": "x"}], [1, {"a": "x"}], True),
        ({"a": 1}, {"a": 1, "b": 2}, False),
    ],
)
def test_same_json_is_go_equality(a: Any, b: Any, same: bool) -> None:
    assert same_json(a, b) is same
