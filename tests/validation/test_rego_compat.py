"""Rego v0 templates rewritten for regopy mean what OPA makes them mean, checked on real regopy."""

from __future__ import annotations

from typing import Any

import pytest

from tests.validation.rego_eval import as_set, evaluate
from webhook.validation.rego_compat import for_regopy, is_v0, package_of, relocate
from webhook.validation.rego_syntax import RegoSyntaxError, parse


class Unordered(list[Any]):
    """A Rego set: compared without order."""


PODS = {"containers": [{"name": "a", "image": "evil/x"}, {"name": "b", "image": "good/y"}]}

# (name, v0 source in package t, rule, input, expected value)
SEMANTICS: list[tuple[str, str, str, Any, Any]] = [
    (
        "partial set of objects, not a partial object",
        'package t\nviolation[{"msg": msg}] {\n  c := input.containers[_]\n  msg := c.name\n}',
        "violation",
        PODS,
        Unordered([{"msg": "a"}, {"msg": "b"}]),
    ),
    (
        "complete rule and default",
        "package t\ndefault allow = false\nallow {\n  input.ok\n}",
        "allow",
        {"ok": False},
        False,
    ),
    (
        "function with value and else",
        'package t\nf(x) = "big" {\n  x > 10\n} else = "small" {\n  true\n}\nr = [f(1), f(20)]',
        "r",
        {},
        ["small", "big"],
    ),
    (
        "boolean function",
        "package t\nbig(x) {\n  x > 10\n}\nr[x] {\n  x := input.n[_]\n  big(x)\n}",
        "r",
        {"n": [1, 11, 12]},
        Unordered([11, 12]),
    ),
    (
        "rule with several bodies",
        "package t\nr[x] {\n  x := input.a\n} {\n  x := input.b\n}",
        "r",
        {"a": 1, "b": 2},
        Unordered([1, 2]),
    ),
    (
        "wildcard inside a call argument iterates",
        "package t\nr[c.name] {\n  c := input.containers[_]\n  startswith(c.image, input.repos[_])\n}",
        "r",
        {**PODS, "repos": ["nope/", "good/"]},
        Unordered(["b"]),
    ),
    (
        "named variable inside a call argument iterates",
        'package t\nr[i] {\n  startswith(input.images[i], "good")\n}',
        "r",
        {"images": ["evil", "good/a", "good/b"]},
        Unordered([1, 2]),
    ),
    (
        "wildcard inside an array literal argument",
        'package t\nr[m] {\n  m := sprintf("%v", [input.names[_]])\n}',
        "r",
        {"names": ["x", "y"]},
        Unordered(["x", "y"]),
    ),
    (
        "wildcard inside a comprehension's call",
        "package t\nr = s {\n  s := {c | c := lower(input.caps[_])}\n}",
        "r",
        {"caps": ["SYS_ADMIN", "NET_RAW"]},
        Unordered(["net_raw", "sys_admin"]),
    ),
    (
        "not with an undefined argument fails the body, as OPA binds arguments first",
        'package t\nok("any", _)\nr {\n  not ok(input.rule, input.params.missing)\n}',
        "r",
        {"rule": "any", "params": {}},
        None,
    ),
    (
        "not over an iterating argument means some element fails, as in OPA",
        'package t\nr {\n  not startswith("good/x", input.repos[_])\n}',
        "r",
        {"repos": ["good/", "evil/"]},
        True,
    ),
    (
        "a parenthesised line after a bare reference is a new literal",
        "package t\nr {\n  input.min\n  (input.max - input.min) >= input.min\n}",
        "r",
        {"min": 1, "max": 3},
        True,
    ),
    (
        "sprintf of a string literal bound to a variable has no quotes",
        'package t\nr = m {\n  h := object.get({}, "host", "")\n  m := sprintf("host <%v>", [h])\n}',
        "r",
        {},
        "host <>",
    ),
    (
        "sprintf with a missing argument prints it as Go does",
        'package t\nr = sprintf("%v and %v", ["one"])',
        "r",
        {},
        "one and %!v(MISSING)",
    ),
    (
        "key and value iteration inside a comprehension, in a head and in a body",
        "package t\nimport rego.v1\n"
        "r := {k | some k, _ in input.a} | s if {\n  s := {v | some _, v in input.b}\n}",
        "r",
        {"a": {"x": 1}, "b": {"y": "z"}},
        Unordered(["x", "z"]),
    ),
    (
        "re_match, removed in v1, still works",
        'package t\nr {\n  re_match("^good/", input.image)\n}',
        "r",
        {"image": "good/x"},
        True,
    ),
    (
        "future keywords with v0 partial set in if form",
        "package t\nimport future.keywords.if\nimport future.keywords.in\nr[x] if {\n  some x in input.a\n}",
        "r",
        {"a": [3, 4]},
        Unordered([3, 4]),
    ),
]


@pytest.mark.parametrize(
    ("source", "rule", "input_value", "expected"), [c[1:] for c in SEMANTICS], ids=[c[0] for c in SEMANTICS]
)
def test_v0_means_what_opa_makes_it_mean(source: str, rule: str, input_value: Any, expected: Any) -> None:
    value = evaluate(source, rule, input_value)
    if isinstance(expected, Unordered):
        assert as_set(value) == as_set(expected)
    else:
        assert value == expected


V1_SOURCES = [
    'package t\nimport rego.v1\nviolation contains {"msg": "x"} if input.bad',
    "package t\nallow if {\n  input.ok\n}",
    "package t\nx := 1",
]
V0_SOURCES = [
    "package t\nallow {\n  input.ok\n}",
    'package t\nviolation[{"msg": "x"}] {\n  input.bad\n}',
    "package t\nimport future.keywords.if\nr[x] if {\n  x := 1\n}",
    "package t\nf(x) = 1 {\n  true\n} else = 2 if {\n  true\n}",
]


@pytest.mark.parametrize("source", V1_SOURCES)
def test_v1_sources_are_recognised(source: str) -> None:
    assert not is_v0(parse(source))


@pytest.mark.parametrize("source", V0_SOURCES)
def test_v0_sources_are_recognised(source: str) -> None:
    assert is_v0(parse(source))


def test_v1_source_is_left_alone_when_nothing_needs_hoisting() -> None:
    source = 'package t\n\nimport rego.v1\n\nviolation contains {"msg": m} if {\n\tm := input.m\n}\n'
    assert for_regopy(source) == source


def test_declared_v1_is_not_upgraded_even_without_if() -> None:
    # regopy reads `p[x] { … }` in v1 as an object; only a v0 source gets `contains`.
    assert "contains" not in for_regopy("package t\np[x] {\n  x := 1\n}", v0=False)


@pytest.mark.parametrize("source", [c[1] for c in SEMANTICS if "several bodies" not in c[0]])
def test_rewrite_keeps_line_numbers(source: str) -> None:
    assert for_regopy(source).count("\n") == source.count("\n")


@pytest.mark.parametrize("source", [c[1] for c in SEMANTICS] + V1_SOURCES)
def test_rewrite_is_idempotent(source: str) -> None:
    once = for_regopy(source)
    assert for_regopy(once) == once


def test_relocate_moves_package_and_lib_references() -> None:
    template = (
        "package k8sallowed\nimport data.lib.helpers.ok\n"
        'violation[{"msg": "x"}] {\n  data.lib.helpers.ok\n  data.inventory.cluster\n}'
    )
    moved = relocate(template, package="gkt.K", lib_root="gkl.K", inventory="input.inv")
    assert package_of(moved) == "gkt.K"
    assert "import data.gkl.K.lib.helpers.ok" in moved
    assert "data.gkl.K.lib.helpers.ok\n" in moved
    assert "input.inv.cluster" in moved
    lib = relocate("package lib.helpers\nok { true }", package=None, lib_root="gkl.K")
    assert package_of(lib) == "gkl.K.lib.helpers"


@pytest.mark.parametrize(
    ("source", "line"),
    [
        ("package t\nr {\n  x := \n}", 4),
        ("package t\nr {\n  x := [1, 2\n}", 4),
        ("package t\n\nr { input.a ] }", 3),
        ('package t\nr = "unterminated', 2),
    ],
)
def test_syntax_errors_name_the_line(source: str, line: int) -> None:
    with pytest.raises(RegoSyntaxError) as info:
        for_regopy(source)
    assert info.value.line == line
