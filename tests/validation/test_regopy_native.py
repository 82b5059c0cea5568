"""The fast input builder gives Rego exactly the value regopy.Input gives it."""

from __future__ import annotations

import enum
import types
from collections import OrderedDict
from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from regopy import Input, Interpreter, rego_shared

from webhook.policy.engines.regopy_native import set_input

INT64 = st.integers(min_value=-(2**63), max_value=2**63 - 1)
SCALARS = st.none() | st.booleans() | INT64 | st.floats(allow_nan=False, allow_infinity=False) | st.text()
JSON = st.recursive(
    SCALARS,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=30,
)


def as_text(interpreter: Interpreter) -> str:
    """regopy's own output text: Interpreter.query would parse it, and it is not always JSON."""
    output = rego_shared.rego_query(interpreter._impl, "x := input")
    try:
        return str(rego_shared.rego_output_string(output))
    finally:
        rego_shared.rego_free_output(output)


def seen_by_rego(interpreter: Interpreter) -> Any:
    return orjson.loads(as_text(interpreter))["bindings"]["x"]


def through_ours(value: Any) -> Interpreter:
    interpreter = Interpreter()
    set_input(interpreter, value)
    return interpreter


@settings(max_examples=150, deadline=None)
@given(JSON)
def test_any_json_value_reads_the_same_as_through_regopy(value: Any) -> None:
    reference = Interpreter()
    reference.set_input(Input({"v": value}))
    assert as_text(through_ours({"v": value})) == as_text(reference)


class Size(enum.IntEnum):
    BIG = 8


class Text(str):
    pass


@pytest.mark.parametrize(
    ("given_value", "rego_sees"),
    [
        pytest.param(OrderedDict(a=1), {"a": 1}, id="mapping subclass"),
        pytest.param(types.MappingProxyType({"a": [1]}), {"a": [1]}, id="read-only mapping"),
        pytest.param((1, "two"), [1, "two"], id="tuple"),
        pytest.param(Size.BIG, 8, id="int enum"),
        pytest.param(Text("t"), "t", id="str subclass"),
        pytest.param(2**63 - 1, 2**63 - 1, id="largest int64"),
        pytest.param(2**63, pytest.approx(float(2**63)), id="beyond int64 goes in as a float, not wrapped"),
        pytest.param(-(2**70), pytest.approx(float(-(2**70))), id="far below int64"),
        pytest.param("é\u2028☃", "é\u2028☃", id="unicode"),
    ],
)
def test_other_python_values_read_as_their_json_form(given_value: Any, rego_sees: Any) -> None:
    assert seen_by_rego(through_ours({"v": given_value})) == {"v": rego_sees}


def test_a_set_reads_as_a_rego_set() -> None:
    interpreter = Interpreter()
    set_input(interpreter, {"v": frozenset({"a", "b"})})
    assert orjson.loads(str(interpreter.query('x := input.v == {"a", "b"}')))["bindings"]["x"] is True


def test_an_unsupported_value_is_refused_and_the_previous_input_stays() -> None:
    interpreter = Interpreter()
    set_input(interpreter, {"v": 1})
    with pytest.raises(ValueError, match="object"):
        set_input(interpreter, {"v": object()})
    assert seen_by_rego(interpreter) == {"v": 1}
