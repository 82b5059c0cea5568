"""Message construction in admission CEL: `Object{...}` and `JSONPatch{...}` in mutations only,
and null's place in the checker's type unification."""

from __future__ import annotations

import re
from typing import Any

import pytest

from webhook.admission_cel import CelCompileError, CelEvaluationError, compile_program
from webhook.admission_cel.patch_types import apply_configuration, json_patch
from webhook.dra.cel import SelectorError, compile_selector

NAMES = ("object", "params", "variables")


def mutation(expression: str, result: str) -> Any:
    return compile_program(expression, NAMES, result_types=(result,), patch_types=True)


@pytest.mark.parametrize(
    ("expression", "expected"),
    [
        ("Object{}", {}),
        (
            "Object{spec: Object.spec{initContainers: [Object.spec.initContainers{name: 'proxy'}]}}",
            {"spec": {"initContainers": [{"name": "proxy"}]}},
        ),
        ("Object{metadata: Object.metadata{labels: {'a': object.x}}}", {"metadata": {"labels": {"a": 1}}}),
        ("Object{spec: {'containers': [Object.spec{}]}}", {"spec": {"containers": [{}]}}),
        ("true ? Object{a: 1} : Object{a: 2}", {"a": 1}),
        ("Object{a: 1, a: 2}", {"a": 2}),
    ],
    ids=["empty", "nested", "map-inside", "map-and-list-unnamed", "conditional", "repeated-field"],
)
def test_apply_configurations_evaluate_to_plain_maps(expression: str, expected: Any) -> None:
    """Object and Object.<path> accept any field, typed dyn (kubernetes/kubernetes staging/src/
    k8s.io/apiserver/pkg/cel/mutation/typeresolver.go, mutation/dynamic/objects.go); a repeated
    field keeps its last value (cel-go interpreter/interpretable.go evalObj)."""
    program = mutation(expression, "Object")
    assert apply_configuration(program.evaluate_cel({"object": {"x": 1}})) == expected


def test_json_patches_evaluate_to_operations() -> None:
    """JSONPatch has op, path and from (strings) and value (dyn); unset fields are left out
    (kubernetes/kubernetes staging/src/k8s.io/apiserver/pkg/cel/mutation/jsonpatch.go)."""
    program = mutation(
        "[JSONPatch{op: 'add', path: '/a', value: {'b': [1]}},"
        " JSONPatch{op: 'move', from: '/a', path: '/c'}]",
        "list",
    )
    assert json_patch(program.evaluate_cel({})) == [
        {"op": "add", "path": "/a", "value": {"b": [1]}},
        {"op": "move", "from": "/a", "path": "/c"},
    ]


@pytest.mark.parametrize(
    ("expression", "reason"),
    [
        ("Object{spec: Object.metadata{}}", "unexpected type name 'Object.metadata', expected 'Object.spec'"),
        (
            "Object{spec: {'containers': [Object.spec.containers{}]}}",
            "unexpected type name 'Object.spec.containers', expected 'Object.spec'",
        ),
        ("dyn({'spec': {}})", "must be an Object{...}, not map"),
    ],
    ids=["wrong-field-path", "wrong-path-through-map-and-list", "plain-map"],
)
def test_apply_configurations_name_their_field_paths(expression: str, reason: str) -> None:
    """kube-apiserver refuses an Object whose nested constructions are not named by their field
    path, maps and lists in between not counted (mutation/dynamic/objects.go
    CheckTypeNamesMatchFieldPathNames), and a result that is not an Object."""
    with pytest.raises(CelEvaluationError, match=re.escape(reason)):
        apply_configuration(mutation(expression, "Object").evaluate_cel({}))


@pytest.mark.parametrize(
    ("expression", "reason"),
    [
        ("[JSONPatch{op: dyn(1), path: '/a'}]", "unexpected type int for JSONPatch's 'op' field"),
        ("[dyn({'op': 'add'})]", "must be a JSONPatch{...}, not map"),
        ("dyn(JSONPatch{op: 'add'})", "must be a list of JSONPatch{...}, not JSONPatch"),
    ],
    ids=["op-not-string", "plain-map", "not-a-list"],
)
def test_json_patch_results_are_checked(expression: str, reason: str) -> None:
    """mutation/jsonpatch.go JSONPatchType.Val refuses an op, path or from that is not a string."""
    with pytest.raises(CelEvaluationError, match=re.escape(reason)):
        json_patch(mutation(expression, "list").evaluate_cel({}))


@pytest.mark.parametrize(
    ("expression", "reason"),
    [
        ("JSONPatch{op: 1}", "field 'op' of JSONPatch cannot be int"),
        ("JSONPatch{op: null}", "field 'op' of JSONPatch cannot be null_type"),
        ("JSONPatch{name: 'x'}", "undefined field 'name' of JSONPatch"),
        ("Patch{op: 'add'}", "undeclared reference to 'Patch'"),
        ("object.spec{a: 1}", "undeclared reference to 'object.spec'"),
        ("size(Object{})", "the receiver of size() cannot be Object"),
        ("Object{} == {}", "must have one type, not Object and map"),
        ("JSONPatch{}.name", "undefined field 'name' of JSONPatch"),
    ],
)
def test_construction_compile_errors(expression: str, reason: str) -> None:
    """cel-go checker/checker.go checkCreateStruct: the type must resolve, each field be one of
    its fields and each value assignable to it; a message is not a map."""
    with pytest.raises(CelCompileError, match=re.escape(reason)):
        compile_program(expression, NAMES, patch_types=True)


def test_constructed_fields_can_be_read() -> None:
    """Object's fields are typed dyn (mutation/dynamic/objects.go ObjectType.Field)."""
    program = compile_program("Object{a: 1}.a == 1 && has(Object{a: 1}.a)", NAMES, patch_types=True)
    assert program.evaluate({}) is True


@pytest.mark.parametrize("expression", ["Object{}", "[JSONPatch{op: 'add'}]", "object == Object{}"])
def test_only_mutations_construct_messages(expression: str) -> None:
    """kube-apiserver declares the patch types only for mutations (kubernetes/kubernetes
    staging/src/k8s.io/apiserver/pkg/admission/plugin/cel/compile.go hasPatchTypes), and
    Kubernetes declares no message types for device selectors."""
    with pytest.raises(CelCompileError, match="message construction"):
        compile_program(expression, NAMES)
    with pytest.raises(SelectorError, match="message construction"):
        compile_selector(expression.replace("object", "device"))


@pytest.mark.parametrize(
    ("expression", "result"),
    [
        ("object.x > 1 ? timestamp('2024-01-01T00:00:00Z') : null", None),
        ("object.x > 0 ? duration('1s') : null", "1s"),
        ("timestamp('2024-01-01T00:00:00Z') != null", True),
        ("quantity('1Gi') == null", False),
        ("[null, duration('1s')].size()", 2),
        ("object.x > 1 ? object.x : null", None),
        ("true ? null : null", None),
    ],
)
def test_null_unifies_with_nullable_types(expression: str, result: Any) -> None:
    """cel-go assigns null to timestamps, durations, messages and opaque types, and to dyn
    (google/cel-go checker/types.go internalIsAssignable, internalIsAssignableNull)."""
    assert compile_program(expression, NAMES).evaluate({"object": {"x": 1}}) == result


@pytest.mark.parametrize(
    "expression",
    [
        "object.x > 50 ? 'replicas ' + string(object.x) : null",
        "true ? null : 'a'",
        "'a' == null",
        "1 != null",
        "[1, null]",
        "true ? [1] : null",
        "true ? {'a': 1} : null",
    ],
)
def test_null_does_not_unify_with_primitives_lists_or_maps(expression: str) -> None:
    """cel-go's checker refuses null where a string, number, bool, bytes, list or map is
    expected (google/cel-go checker/types.go internalIsAssignableNull; checker_test.go
    `x.single_int64 != null`: no matching overload for '_!=_' applied to '(int, null)')."""
    with pytest.raises(CelCompileError, match="must have one type"):
        compile_program(expression, NAMES)
