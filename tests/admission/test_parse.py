"""parse_review: every malformed body is one clear MalformedReview, never another exception."""

from __future__ import annotations

import contextlib
import copy
import json
from typing import Any

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.support.reviews import load_example
from webhook.admission import MAX_DEPTH, check_request, parse_review
from webhook.errors import MalformedReview

VALID = load_example("review-gpu-pod.json")


def _with(path: str, value: Any) -> bytes:
    """The valid review with one field set (or removed, for the sentinel `...`)."""
    document = copy.deepcopy(VALID)
    *parents, leaf = path.split(".")
    node = document
    for key in parents:
        node = node[key]
    if value is ...:
        del node[leaf]
    else:
        node[leaf] = value
    return json.dumps(document).encode()


MALFORMED = [
    ("not json", b"{nope", "not valid JSON"),
    ("empty body", b"", "not valid JSON"),
    ("json array", b"[]", "must be a JSON object"),
    ("NaN", b'{"a": NaN}', "not valid JSON"),
    ("old api version", _with("apiVersion", "admission.k8s.io/v1beta1"), "unsupported apiVersion"),
    ("missing api version", _with("apiVersion", ...), "unsupported apiVersion"),
    ("wrong kind", _with("kind", "Pod"), "unsupported kind"),
    ("missing request", _with("request", ...), "request must be an object"),
    ("request is a list", _with("request", []), "request must be an object"),
    ("missing uid", _with("request.uid", ...), "uid"),
    ("empty uid", _with("request.uid", ""), "uid"),
    ("numeric uid", _with("request.uid", 7), "uid"),
    ("huge uid", _with("request.uid", "u" * 300), "uid"),
    ("missing kind", _with("request.kind", ...), "request.kind"),
    ("kind without version", _with("request.kind", {"group": "", "kind": "Pod"}), "version"),
    ("bad operation", _with("request.operation", "PATCH"), "operation"),
    ("missing object on create", _with("request.object", ...), "request.object"),
    ("object is a string", _with("request.object", "pod"), "request.object"),
    ("namespace is a number", _with("request.namespace", 3), "namespace"),
    ("dryRun is a string", _with("request.dryRun", "yes"), "dryRun"),
    ("groups not a list", _with("request.userInfo", {"groups": "admins"}), "groups"),
    ("oldObject is a list", _with("request.oldObject", [1]), "oldObject"),
    ("resource is a string", _with("request.resource", "pods"), "request.resource"),
]


@pytest.mark.parametrize(("body", "fragment"), [c[1:] for c in MALFORMED], ids=[c[0] for c in MALFORMED])
def test_malformed_reviews_are_rejected_with_a_reason(body: bytes, fragment: str) -> None:
    with pytest.raises(MalformedReview, match=fragment) as info:
        parse_review(body)
    assert "\n" not in str(info.value)


def test_a_valid_review_parses_to_its_request() -> None:
    request = parse_review(orjson.dumps(VALID))
    assert request["uid"] == VALID["request"]["uid"]
    assert request["object"] == VALID["request"]["object"]


def test_delete_may_carry_a_null_object() -> None:
    body = orjson.loads(_with("request.operation", "DELETE"))
    body["request"]["object"] = None
    assert parse_review(orjson.dumps(body))["object"] is None


@pytest.mark.parametrize(
    ("depth", "accepted"), [(MAX_DEPTH - 10, True), (MAX_DEPTH + 5, False), (5000, False)]
)
def test_nesting_is_bounded(depth: int, accepted: bool) -> None:
    nested = b'{"x":' * depth + b"1" + b"}" * depth
    body = _with("request.object", {"metadata": {}, "spec": "HERE"}).replace(b'"HERE"', nested)
    if accepted:
        parse_review(body)
    else:
        with pytest.raises(MalformedReview):
            parse_review(body)


def _accepted(parse: Any, value: Any) -> bool:
    try:
        parse(value)
    except MalformedReview:
        return False
    return True


@given(
    depth=st.integers(min_value=MAX_DEPTH - 8, max_value=MAX_DEPTH + 2),
    shape=st.lists(st.sampled_from(["list", "dict"]), min_size=1, max_size=3),
    padding=st.integers(min_value=0, max_value=40),
)
def test_the_bracket_count_shortcut_agrees_with_the_walk(depth: int, shape: list[str], padding: int) -> None:
    """parse_review skips the walk for bodies with few brackets; the verdict must not change.
    Brackets inside strings only add to the count, so they may cost the walk, never a verdict."""
    value: Any = "{[" * padding
    for level in range(depth):
        value = [value] if shape[level % len(shape)] == "list" else {"k": value}
    body = _with("request.object", {"metadata": {}, "spec": "HERE"}).replace(b'"HERE"', orjson.dumps(value))
    walked = _accepted(lambda b: check_request(orjson.loads(b)["request"]), body)
    assert _accepted(parse_review, body) == walked


@given(st.binary(max_size=512))
def test_arbitrary_bytes_never_raise_anything_else(body: bytes) -> None:
    with contextlib.suppress(MalformedReview):
        parse_review(body)


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4)
    ),
    max_leaves=30,
)


@given(
    path=st.sampled_from(
        [
            "apiVersion",
            "kind",
            "request",
            "request.uid",
            "request.kind",
            "request.object",
            "request.userInfo",
            "request.operation",
            "request.namespace",
            "request.dryRun",
            "request.options",
        ]
    ),
    value=json_values,
)
def test_any_value_at_any_known_path_is_parsed_or_rejected_cleanly(path: str, value: Any) -> None:
    try:
        request = parse_review(_with(path, value))
    except MalformedReview:
        return
    assert isinstance(request["uid"], str)
