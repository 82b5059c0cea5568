"""webhook.admission_cel: compile once, evaluate on JSON-ish activations.

The expressions are those of gatekeeper-library's K8sNativeValidation templates
(library/pod-security-policy/*/template.yaml, library/general/requiredlabels/template.yaml)
and of Kubernetes' ValidatingAdmissionPolicy documentation, on pods written here.
"""

from __future__ import annotations

import contextlib
import re
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from webhook.admission_cel import (
    MAX_STEPS,
    CelCompileError,
    CelEvaluationError,
    Variables,
    compile_program,
    to_cel,
)

NAMES = frozenset({"object", "oldObject", "params", "request", "variables", "namespaceObject"})
POD: dict[str, Any] = {
    "metadata": {"name": "trainer", "labels": {"team": "ml", "tier": "gpu-1"}},
    "spec": {
        "hostPID": True,
        "containers": [
            {
                "name": "main",
                "image": "registry.example/cuda:12",
                "securityContext": {"capabilities": {"add": ["NET_ADMIN", "SYS_TIME"], "drop": ["ALL"]}},
            },
            {"name": "side", "image": "busybox"},
        ],
    },
}


def evaluate(expression: str, **activation: Any) -> Any:
    return compile_program(expression, NAMES).evaluate({"object": POD, **activation})


@pytest.mark.parametrize(
    ("expression", "expected"),
    [
        # host-namespaces/template.yaml
        ("has(object.spec.hostIPC) ? object.spec.hostIPC : false", False),
        ("has(object.spec.hostPID) ? object.spec.hostPID : false", True),
        ('(has(request.operation) && request.operation == "UPDATE") || !object.spec.hostPID', False),
        # capabilities/template.yaml: map with a filter, dyn, join
        (
            "object.spec.containers.map(c, has(c.securityContext),"
            ' [c.name, dyn(c.securityContext.capabilities.add.filter(x, x != "SYS_TIME").join(", "))])',
            [["main", "NET_ADMIN"]],
        ),
        (
            'object.spec.containers[0].securityContext.capabilities.drop.exists(d, d.lowerAscii() == "all")',
            True,
        ),
        # requiredlabels/template.yaml: map keys, matches
        ('"team" in object.metadata.labels', True),
        ('string(object.metadata.labels["tier"]).matches("^gpu-[0-9]+$")', True),
        # allow-privilege-escalation/template.yaml: map, join, replace, startsWith, endsWith
        ('object.spec.containers.map(c, c.image).join(", ")', "registry.example/cuda:12, busybox"),
        ('["img*"].map(i, string(i).replace("*", ""))', ["img"]),
        ('object.spec.containers.filter(c, c.image.endsWith(":12")).size()', 1),
        ('object.spec.containers.exists_one(c, c.image.startsWith("busy"))', True),
        ("object.spec.containers.all(c, has(c.securityContext))", False),
        # strings extension and conversions
        ('" x ".trim() + "ML".lowerAscii() + "ml".upperAscii()', "xmlML"),
        ('"a,b,c".split(",")', ["a", "b", "c"]),
        ('"abcdef".substring(1, 3) + string("abc".indexOf("c"))', "bc2"),
        ('int("12") + 1', 13),
        ("dyn(double(1)) == 1", True),  # cel-go: heterogeneous equality at runtime
        ('type("a") == string', True),
        ("size(object.spec.containers)", 2),
        ("[3, 1, 2].max() + [1, 2].sum()", 6),
        ("[1, 2].isSorted()", True),
        ('quantity("1Gi").isGreaterThan(quantity("1G"))', True),
        ("cel.bind(n, object.metadata.name, n + n)", "trainertrainer"),
        ("object.metadata.labels", {"team": "ml", "tier": "gpu-1"}),
        ("null", None),
    ],
)
def test_library_shaped_expressions(expression: str, expected: Any) -> None:
    assert evaluate(expression, request={"operation": "CREATE"}) == expected


@pytest.mark.parametrize(
    ("expression", "reason"),
    [
        ("object.nope", "no such key: nope"),
        ("object.metadata.name + 1", "no such overload"),
        ("object.spec.containers[5]", "index out of range"),
        ("1 / 0", "division by zero"),
        ("[].max()", "must not be empty"),
        ("object.metadata.name.matches(params.pattern)", "invalid regular expression"),
    ],
)
def test_runtime_errors_raise_cel_evaluation_error(expression: str, reason: str) -> None:
    with pytest.raises(CelEvaluationError, match=re.escape(reason)):
        evaluate(expression, params={"pattern": "("})


@pytest.mark.parametrize(
    ("expression", "reason"),
    [
        ("1 +", "ends too early"),
        ("object.metadata.name ==== 1", "column"),
        ("unknown.x", "undeclared reference to 'unknown'"),
        ('object.metadata.name.format(["x"])', "format() is not supported"),
        ("object.?metadata", "optional field syntax is not supported"),
        ('url("https://x")', "url() is not supported"),
        ("object.spec.containers.all(i, c, true)", "three arguments is not supported"),
        ('object.metadata.name.matches("(")', "invalid regular expression"),
        ("object.spec.containers.includes(1)", "undeclared reference to 'includes'"),
        ("has(object)", "has() macro"),
        ("x" * (70 * 1024), "too long"),
    ],
)
def test_compile_errors(expression: str, reason: str) -> None:
    with pytest.raises(CelCompileError, match=re.escape(reason)):
        compile_program(expression, NAMES)


def test_result_types_are_checked_when_compiling() -> None:
    with pytest.raises(CelCompileError, match="must evaluate to bool"):
        compile_program('"a"', NAMES, result_types={"bool"})
    assert compile_program("object.x", NAMES, result_types={"bool"}).expression == "object.x"


def test_unknown_variables_are_compile_errors() -> None:
    with pytest.raises(CelCompileError, match="undefined field 'y' of variables"):
        compile_program("variables.y", NAMES, variables={"x"})


def test_variables_are_lazy_and_memoised() -> None:
    calls: list[str] = []

    def counted(name: str, value: Any) -> Any:
        def definition() -> Any:
            calls.append(name)
            return value

        return definition

    variables = Variables({"a": counted("a", 1), "b": counted("b", 2)})
    program = compile_program("variables.a + variables.a", NAMES)
    assert program.evaluate({"variables": variables}) == 2
    assert calls == ["a"]
    assert compile_program("has(variables.b) && !has(variables.c)", NAMES).evaluate({"variables": variables})
    assert calls == ["a"]


def test_variables_of_programs_see_earlier_variables_and_the_object() -> None:
    programs = {
        "containers": compile_program("object.spec.containers", NAMES),
        "names": compile_program("variables.containers.map(c, c.name)", NAMES),
        "loop": compile_program("variables.loop", NAMES),
        "broken": compile_program("object.nope", NAMES),
    }
    values = {"object": to_cel(POD)}
    variables = Variables.of(programs, values)
    scope = {**values, "variables": variables}
    assert compile_program('variables.names.join("/")', NAMES).evaluate(scope) == "main/side"
    with pytest.raises(CelEvaluationError, match="refers to itself"):
        compile_program("variables.loop", NAMES).evaluate(scope)
    with pytest.raises(CelEvaluationError, match="no such key: nope"):
        compile_program("variables.broken", NAMES).evaluate(scope)
    # An error absorbed by || stays absorbed, as in cel-go.
    assert compile_program("true || variables.broken", NAMES).evaluate(scope) is True


def test_cost_is_bounded() -> None:
    quadratic = "object.list.all(a, object.list.all(b, object.list.all(c, a + b + c >= 0)))"
    with pytest.raises(CelEvaluationError, match=f"more than {MAX_STEPS} evaluation steps"):
        compile_program(quadratic, NAMES).evaluate({"object": {"list": list(range(100))}})
    program = compile_program('object.s.replace("a", "aaaaaaaaaa")', NAMES)
    with pytest.raises(CelEvaluationError, match="longer than"):
        program.evaluate({"object": {"s": "a" * 50_000}})


def test_deeply_nested_objects_are_refused_not_crashed() -> None:
    deep: Any = 1
    for _ in range(500):
        deep = [deep]
    with pytest.raises(CelEvaluationError, match="nested"):
        compile_program("object", NAMES).evaluate({"object": deep})


_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=5),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=4), inner, max_size=4),
    max_leaves=20,
)
_EXPRESSIONS = [
    "object.spec.containers.map(c, c.image).join(',')",
    "has(object.metadata.labels) && 'a' in object.metadata.labels",
    "object.x.filter(i, i > 1).size() == 0",
    "string(object.y).startsWith('a') || int(object.z) > 2",
    "object.a.all(x, x.b.exists(y, y == object.c))",
]


@settings(max_examples=150, deadline=None)
@given(obj=_JSON, expression=st.sampled_from(_EXPRESSIONS))
def test_evaluation_raises_only_cel_evaluation_error(obj: Any, expression: str) -> None:
    """Hostile objects: the only failure is CelEvaluationError, never a Python exception."""
    program = compile_program(expression, NAMES)
    with contextlib.suppress(CelEvaluationError):
        program.evaluate({"object": obj})
