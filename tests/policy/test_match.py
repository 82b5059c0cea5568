"""Match predicates and label selectors, table-driven."""

from __future__ import annotations

from fnmatch import fnmatchcase
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from webhook.match import LabelSelector, Match, SelectorError, check_glob, glob_matches

SELECTORS: list[tuple[dict[str, Any], dict[str, str], bool]] = [
    ({}, {}, True),
    ({"matchLabels": {"gpu": "shared"}}, {"gpu": "shared"}, True),
    ({"matchLabels": {"gpu": "shared"}}, {"gpu": "exclusive"}, False),
    ({"matchExpressions": [{"key": "tier", "operator": "In", "values": ["a", "b"]}]}, {"tier": "b"}, True),
    ({"matchExpressions": [{"key": "tier", "operator": "In", "values": ["a"]}]}, {}, False),
    ({"matchExpressions": [{"key": "tier", "operator": "NotIn", "values": ["a"]}]}, {}, True),
    ({"matchExpressions": [{"key": "tier", "operator": "NotIn", "values": ["a"]}]}, {"tier": "a"}, False),
    ({"matchExpressions": [{"key": "team", "operator": "Exists"}]}, {"team": ""}, True),
    ({"matchExpressions": [{"key": "team", "operator": "DoesNotExist"}]}, {"team": "x"}, False),
    (
        {"matchLabels": {"a": "1"}, "matchExpressions": [{"key": "b", "operator": "Exists"}]},
        {"a": "1"},
        False,
    ),
]


@pytest.mark.parametrize(("raw", "labels", "expected"), SELECTORS)
def test_label_selectors(raw: dict[str, Any], labels: dict[str, str], expected: bool) -> None:
    assert LabelSelector.parse(raw).matches(labels) is expected


BAD_SELECTORS = [
    (
        {"matchExpressions": [{"key": "a", "operator": "Like", "values": ["x"]}]},
        "matchExpressions[0].operator",
    ),
    ({"matchExpressions": [{"key": "a", "operator": "In"}]}, "matchExpressions[0].values"),
    (
        {"matchExpressions": [{"key": "a", "operator": "Exists", "values": ["x"]}]},
        "matchExpressions[0].values",
    ),
    ({"matchExpressions": [{"key": "bad key!", "operator": "Exists"}]}, "matchExpressions[0].key"),
    ({"matchLabels": {"gpu": "not valid!"}}, "matchLabels.gpu"),
]


@pytest.mark.parametrize(("raw", "path"), BAD_SELECTORS)
def test_bad_selectors_name_the_field(raw: dict[str, Any], path: str) -> None:
    with pytest.raises(SelectorError) as info:
        LabelSelector.parse(raw)
    assert info.value.path == path


@pytest.mark.parametrize("pattern", ["team-*", "notebooks", "ml-?", "*"])
def test_good_globs(pattern: str) -> None:
    check_glob(pattern)


@pytest.mark.parametrize("pattern", ["Team", "team-[ab]", "", "a/b", "-x"])
def test_bad_globs(pattern: str) -> None:
    with pytest.raises(SelectorError):
        check_glob(pattern)


MATCHES = [
    (Match(), "anything", True),
    (Match(namespaces=("team-*",)), "team-a", True),
    (Match(namespaces=("team-*",)), "teams", False),
    (Match(namespaces=("team-*",), excluded_namespaces=("team-secret",)), "team-secret", False),
    (Match(namespace_selector=LabelSelector((("gpu", "shared"),))), "ns", True),
    (Match(object_selector=LabelSelector((("app", "web"),))), "ns", False),
]


@pytest.mark.parametrize(("match", "namespace", "expected"), MATCHES)
def test_match_predicates(match: Match, namespace: str, expected: bool) -> None:
    assert match.matches(namespace, {"gpu": "shared"}, {"app": "trainer"}) is expected


_glob_text = st.text(alphabet="ab-*?[]!.", max_size=6)


@given(patterns=st.lists(_glob_text, max_size=3), value=st.text(alphabet="ab-.[]*?", max_size=6))
def test_glob_matches_is_fnmatchcase_over_the_patterns(patterns: list[str], value: str) -> None:
    """Plain names are compared directly, without fnmatch: the answer must be fnmatch's."""
    assert glob_matches(patterns, value) == any(fnmatchcase(value, p) for p in patterns)
