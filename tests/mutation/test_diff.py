"""The structural JSON diff: applying it always reproduces the target document."""

from __future__ import annotations

from typing import Any

import jsonpatch
import pytest
from hypothesis import given
from hypothesis import strategies as st

from webhook.mutation.diff import diff

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=5),
    lambda children: (
        st.lists(children, max_size=4)
        | st.dictionaries(st.sampled_from(["a", "b/c", "d~e", ""]), children, max_size=4)
    ),
    max_leaves=25,
)


@given(json_values, json_values)
def test_applying_the_diff_gives_the_target(before: Any, after: Any) -> None:
    assert jsonpatch.apply_patch(before, diff(before, after), in_place=False) == after


@given(json_values)
def test_no_change_no_patch(value: Any) -> None:
    assert diff(value, value) == []


CASES = [
    ({"a": 1}, {"a": 1, "n/g": 2}, [{"op": "add", "path": "/n~1g", "value": 2}]),
    ({"l": [1]}, {"l": [1, 2]}, [{"op": "add", "path": "/l/1", "value": 2}]),
    ({"l": [1, 2, 3]}, {"l": [1]}, [{"op": "remove", "path": "/l/2"}, {"op": "remove", "path": "/l/1"}]),
    (
        {"r": {"nvidia.com/gpu": "1"}},
        {"r": {"nvidia.com/mig-1g.10gb": "1"}},
        [
            {"op": "remove", "path": "/r/nvidia.com~1gpu"},
            {"op": "add", "path": "/r/nvidia.com~1mig-1g.10gb", "value": "1"},
        ],
    ),
    ({"a": 1}, {"a": "1"}, [{"op": "replace", "path": "/a", "value": "1"}]),
    ({"a": True}, {"a": 1}, [{"op": "replace", "path": "/a", "value": 1}]),
    # Equal in Python, not in JSON: nested and in lists too.
    ({"x": {"a": 1}}, {"x": {"a": 1.0}}, [{"op": "replace", "path": "/x/a", "value": 1.0}]),
    (
        {"l": [1, {"b/c": 0}]},
        {"l": [True, {"b/c": False}]},
        [
            {"op": "replace", "path": "/l/0", "value": True},
            {"op": "replace", "path": "/l/1/b~1c", "value": False},
        ],
    ),
    ({"d": {"e": []}}, {"d": {"e": {}}}, [{"op": "replace", "path": "/d/e", "value": {}}]),
]


@pytest.mark.parametrize(("before", "after", "patch"), CASES)
def test_minimal_patches_for_mutation_shapes(before: Any, after: Any, patch: list[dict[str, Any]]) -> None:
    assert diff(before, after) == patch
