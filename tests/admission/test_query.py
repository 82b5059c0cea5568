"""The `timeout` parameter read straight from the query string, as starlette's QueryParams reads it."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st
from starlette.datastructures import QueryParams

from webhook.app import _query_value


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        (b"", None),
        (b"timeout=10s", "10s"),
        (b"timeout=5s&timeout=7s", "7s"),  # the last one wins, as in QueryParams
        (b"other=1", None),
        (b"timeout=", ""),
        (b"timeout=1%30s", "10s"),  # percent-decoded
        (b"x=" + b"a" * 300 + b"&timeout=3s", "3s"),  # too long to remember: read directly
    ],
)
def test_known_queries(query: bytes, expected: str | None) -> None:
    assert _query_value(query, "timeout") == expected
    assert _query_value(query, "timeout") == expected  # asked again: remembered or not, the same


@given(st.binary(max_size=64) | st.text(alphabet="timeout=&%s0123456789+;", max_size=40).map(str.encode))
def test_agrees_with_starlette(query: bytes) -> None:
    assert _query_value(query, "timeout") == QueryParams(query.decode("latin-1")).get("timeout")
