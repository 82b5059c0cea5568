"""`gpu-webhook test --run`: the cases gator verify's filter selects (pkg/gator/verify/filter.go,
tables ported from filter_test.go), and how selected-out cases are reported."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.validation.test_suite import PASSING, case, repos_test, write_suite
from webhook.errors import ConfigError
from webhook.policy import suite
from webhook.policy.selection import EVERYTHING, parse_run

# filter_test.go TestFilter_Error
INVALID = ["labels(", "labels(//allow", "labels//allow(", "a//b//c"]
VALID = ["", "labels", "labels//allow", "labels//", "//allow"]


@pytest.mark.parametrize("pattern", INVALID)
def test_an_invalid_filter_is_a_usage_error(pattern: str) -> None:
    with pytest.raises(ConfigError, match="--run"):
        parse_run(pattern)


@pytest.mark.parametrize("pattern", VALID)
def test_valid_filters_parse(pattern: str) -> None:
    parse_run(pattern)


# filter_test.go TestFilter_MatchesTest: (filter, test name, case names, selected)
TESTS = [
    ("", "foo", [], True),
    ("foo", "foo", [], True),
    ("foo", "foo-bar", [], True),
    ("foo//", "foo", [], True),
    ("foo", "bar", ["foo"], True),
    ("foo", "bar", ["foo-bar"], True),
    ("foo//", "bar", ["foo"], False),
    ("bar//qux", "bar", ["qux"], True),
    ("bar//qux", "foo-bar", ["qux-corge"], True),
    ("bar-bar//qux", "bar-foo", ["qux-corge"], False),
    ("bar//qux-qux", "foo", ["corge-qux"], False),
    ("bar-bar//qux-qux", "bar", ["foo"], False),
]


@pytest.mark.parametrize(("pattern", "test", "cases", "selected"), TESTS)
def test_which_tests_run(pattern: str, test: str, cases: list[str], selected: bool) -> None:
    assert parse_run(pattern).selects_test(test, cases) is selected


# filter_test.go TestFilter_MatchesCase: filter -> {test: {case: selected}}
CASES = {
    "": {"bar": {"foo": True, "qux": True}, "corge": {"foo": True, "qux": True}},
    "bar//": {"bar": {"foo": True, "qux": True}, "corge": {"foo": False, "qux": False}},
    "//foo": {"bar": {"foo": True, "qux": False}, "corge": {"foo": True, "qux": False}},
    "bar//foo": {"bar": {"foo": True, "qux": False}, "corge": {"foo": False, "qux": False}},
    # Without "//", the test's name or the case's own (filter.go orFilter.MatchesCase).
    "foo": {"bar": {"foo": True, "qux": False}, "foo-x": {"foo": True, "qux": True}},
    "^fo+$": {"bar": {"foo": True, "xfoo": False}},
}


@pytest.mark.parametrize("pattern", list(CASES))
def test_which_cases_run(pattern: str) -> None:
    selection = parse_run(pattern)
    got = {t: {c: selection.selects_case(t, c) for c in cases} for t, cases in CASES[pattern].items()}
    assert got == CASES[pattern]


def test_everything_is_selected_by_default() -> None:
    assert EVERYTHING.selects_test("any", ["thing"]) and EVERYTHING.selects_case("any", "thing")


def test_cases_left_out_are_skipped_and_say_why(tmp_path: Path) -> None:
    path = write_suite(tmp_path, [repos_test(*PASSING)])
    results = suite.run_suite(path, selection=parse_run("repos//^count$"))
    ran = [(r.case, r.passed) for r in results if not r.skipped]
    assert ran == [("count", True)]
    left_out = [r for r in results if r.skipped and r.case != "skipped"]
    assert len(left_out) == len(PASSING) - 2 and {r.reason for r in left_out} == {suite.NOT_SELECTED}


def test_a_test_none_of_whose_cases_is_selected_is_not_compiled(tmp_path: Path) -> None:
    """A broken template fails only the runs that select one of its cases."""
    broken = {
        **repos_test(case("allowed", "samples/good.yaml", {"violations": "no"})),
        "template": "none.yaml",
    }
    path = write_suite(tmp_path, [broken])
    [selected] = suite.run_suite(path, selection=parse_run("allowed"))
    assert not selected.passed and "none.yaml" in selected.reason
    [left_out] = suite.run_suite(path, selection=parse_run("other"))
    assert left_out.skipped and left_out.reason == suite.NOT_SELECTED
