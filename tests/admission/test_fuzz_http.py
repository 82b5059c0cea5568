"""Random bodies against the live server: a 4xx or a well-formed decision, never a 5xx."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.support.apiserver import check_reply
from tests.support.reviews import load_example, make_review
from tests.support.server import ServerProcess
from tests.support.tlsclient import JSON_HEADERS

BASE = make_review(load_example("pod-gpu-training.yaml"))
LIVE = settings(
    max_examples=150,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],  # the profile's, too
)

json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=50),
    lambda children: (
        st.lists(children, max_size=5) | st.dictionaries(st.text(max_size=10), children, max_size=5)
    ),
    max_leaves=40,
)


def _paths(node: Any, prefix: tuple[str | int, ...] = ()) -> list[tuple[str | int, ...]]:
    found = [prefix]
    if isinstance(node, dict):
        for key, child in node.items():
            found += _paths(child, (*prefix, key))
    elif isinstance(node, list):
        for index, child in enumerate(node):
            found += _paths(child, (*prefix, index))
    return found


PATHS = _paths(BASE)[1:]


def _replace(document: dict[str, Any], path: tuple[str | int, ...], value: Any) -> dict[str, Any]:
    result = copy.deepcopy(document)
    node: Any = result
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = value
    return result


def _encode_with_duplicate(node: Any, path: tuple[str | int, ...], first: Any) -> str:
    """JSON text of `node` in which the key at `path` appears twice: `first`, then its own value."""
    if isinstance(node, list):
        return "[" + ",".join(_child(value, path, i, first) for i, value in enumerate(node)) + "]"
    if not isinstance(node, dict):
        return json.dumps(node)
    members = []
    for key, value in node.items():
        if path == (key,):
            members.append(f"{json.dumps(key)}:{json.dumps(first)}")
        members.append(f"{json.dumps(key)}:{_child(value, path, key, first)}")
    return "{" + ",".join(members) + "}"


def _child(value: Any, path: tuple[str | int, ...], key: str | int, first: Any) -> str:
    inside = len(path) > 1 and path[0] == key
    return _encode_with_duplicate(value, path[1:], first) if inside else json.dumps(value)


def _encode(document: Any) -> bytes:
    """The standard library's encoder, which (unlike orjson) writes integers beyond 64 bits."""
    return json.dumps(document).encode()


def _assert_sane(reply_status: int, body: bytes) -> None:
    assert reply_status < 500, body[:300]
    assert b"Traceback" not in body


@LIVE
@given(endpoint=st.sampled_from(["/mutate", "/validate"]), document=json_values)
def test_random_json_never_yields_a_5xx(server: ServerProcess, endpoint: str, document: Any) -> None:
    reply = server.client().keepalive("POST", endpoint, _encode(document), JSON_HEADERS)
    _assert_sane(reply.status, reply.body)
    assert reply.status == 400


@LIVE
@given(endpoint=st.sampled_from(["mutate", "validate"]), path=st.sampled_from(PATHS), value=json_values)
def test_a_valid_review_with_one_field_broken(
    server: ServerProcess, endpoint: str, path: tuple[str | int, ...], value: Any
) -> None:
    document = _replace(BASE, path, value)
    reply = server.client().keepalive("POST", f"/{endpoint}", _encode(document), JSON_HEADERS)
    _assert_sane(reply.status, reply.body)
    if reply.status == 200:
        check_reply(document, reply, endpoint)
    else:
        assert reply.status == 400


OBJECT_KEYS = [path for path in PATHS if isinstance(path[-1], str)]


@LIVE
@given(endpoint=st.sampled_from(["mutate", "validate"]), path=st.sampled_from(OBJECT_KEYS), first=json_values)
def test_a_duplicated_key_is_read_as_its_last_value(
    server: ServerProcess, endpoint: str, path: tuple[str | int, ...], first: Any
) -> None:
    """As kube-apiserver's own decoder does: the last value wins, so a duplicate can never make
    us judge a different object than the one that is stored."""
    body = _encode_with_duplicate(BASE, path, first).encode()
    reply = server.client().keepalive("POST", f"/{endpoint}", body, JSON_HEADERS)
    plain = server.client().keepalive("POST", f"/{endpoint}", _encode(BASE), JSON_HEADERS)
    _assert_sane(reply.status, reply.body)
    assert (reply.status, reply.json()["response"]) == (plain.status, plain.json()["response"])


HUGE = "\u00e9\u6f22\U0001f600" * 200_000  # 600,000 characters, 1.8 MB of UTF-8


@pytest.mark.parametrize(
    "path",
    [
        ("request", "object", "metadata", "annotations", "note"),
        ("request", "object", "metadata", "labels", "team"),
        ("request", "object", "spec", "containers", 0, "image"),
        ("request", "object", "spec", "containers", 0, "resources", "limits", "nvidia.com/gpu"),
        ("request", "userInfo", "username"),
    ],
    ids=lambda path: ".".join(map(str, path)),
)
@pytest.mark.parametrize("endpoint", ["mutate", "validate"])
def test_a_huge_unicode_string_anywhere_gets_a_clean_answer(
    server: ServerProcess, endpoint: str, path: tuple[str | int, ...]
) -> None:
    document = _replace(BASE, path, HUGE)
    reply = server.client().keepalive("POST", f"/{endpoint}", _encode(document), JSON_HEADERS)
    _assert_sane(reply.status, reply.body)
    assert HUGE[:1000] not in reply.body.decode()  # never echoed back whole
    if reply.status == 200:
        check_reply(document, reply, endpoint)
