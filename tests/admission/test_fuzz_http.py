"""Random bodies against the live server: a 4xx or a well-formed decision, never a 5xx."""

from __future__ import annotations

import copy
import json
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.support.apiserver import check_reply
from tests.support.reviews import load_example, make_review
from tests.support.server import ServerProcess
from tests.support.tlsclient import JSON_HEADERS

BASE = make_review(load_example("pod-gpu-training.yaml"))
LIVE = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])

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
