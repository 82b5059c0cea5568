"""Kubernetes quantity rules, table-driven, plus properties over generated values."""

from __future__ import annotations

import math
from fractions import Fraction

import pytest
from hypothesis import given
from hypothesis import strategies as st

from webhook import quantity
from webhook.quantity import QuantityError

VALUES = [
    ("1", Fraction(1)),
    (2, Fraction(2)),
    ("500m", Fraction(1, 2)),
    ("1Ki", Fraction(1024)),
    ("15Gi", Fraction(15 * 2**30)),
    ("1e3", Fraction(1000)),
    ("1E-3", Fraction(1, 1000)),
    ("1.5G", Fraction(1_500_000_000)),
    (".5", Fraction(1, 2)),
    ("+3", Fraction(3)),
    ("-1", Fraction(-1)),
    (0.25, Fraction(1, 4)),
]


@pytest.mark.parametrize(("text", "expected"), VALUES)
def test_parses_exactly(text: object, expected: Fraction) -> None:
    assert quantity.parse(text) == expected


@pytest.mark.parametrize(
    "text",
    ["", "abc", "1.2.3", "1 Gi", "Gi", "1gi", "1KiB", "1e", "0x10", "1e999999", "9" * 80, None, True, [1]],
)
def test_rejects_what_the_apiserver_rejects(text: object) -> None:
    with pytest.raises(QuantityError):
        quantity.parse(text)


COUNTS = [("1", 1), ("1Ki", 1024), ("1e9", 10**9), ("0", 0), (4, 4)]


@pytest.mark.parametrize(("text", "expected"), COUNTS)
def test_device_counts(text: object, expected: int) -> None:
    assert quantity.parse_count(text, "nvidia.com/gpu") == expected


@pytest.mark.parametrize(
    ("text", "message"),
    [("0.5", "whole number"), ("-1", "negative"), ("500m", "whole number"), ("x", "not a valid")],
)
def test_bad_device_counts_say_why(text: str, message: str) -> None:
    with pytest.raises(QuantityError, match=message) as info:
        quantity.parse_count(text, "nvidia.com/gpu")
    assert repr(text) in str(info.value) or "not a valid" in message


@pytest.mark.parametrize(
    ("text", "mib"), [("15Gi", 15360), ("1Mi", 1), ("1M", 1), ("1500Mi", 1500), ("1", 1)]
)
def test_memory_rounds_up_to_whole_mib(text: str, mib: int) -> None:
    assert quantity.parse_mib(text, "gpu memory") == mib


@pytest.mark.parametrize("text", ["0", "-1Gi"])
def test_memory_must_be_positive(text: str) -> None:
    with pytest.raises(QuantityError, match="positive"):
        quantity.parse_mib(text, "gpu memory")


@pytest.mark.parametrize(
    ("text", "ok"), [("25", True), ("100", True), ("0", False), ("101", False), ("2.5", False)]
)
def test_percentages(text: str, ok: bool) -> None:
    if ok:
        assert quantity.parse_percent(text, "cores") == int(text)
    else:
        with pytest.raises(QuantityError):
            quantity.parse_percent(text, "cores")


@given(st.integers(min_value=1, max_value=2**40))
def test_format_mib_round_trips(mib: int) -> None:
    assert quantity.parse_mib(quantity.format_mib(mib), "x") == mib


@given(st.text(max_size=30))
def test_any_text_is_a_quantity_or_a_quantity_error(text: str) -> None:
    try:
        quantity.parse(text)
    except QuantityError as e:
        message = str(e)
        assert message


_quantities = st.builds(
    lambda sign, number, suffix: f"{sign}{number}{suffix}",
    st.sampled_from(["", "-", "+"]),
    st.one_of(st.integers(min_value=0, max_value=10**12).map(str), st.decimals(0, 10**6, places=3).map(str)),
    st.sampled_from(["", "m", "k", "M", "G", "Ki", "Mi", "Gi", "Ti", "e3", "E-2", "n", "u"]),
)


@given(_quantities)
def test_counts_and_sizes_are_the_exact_fraction_arithmetic(text: str) -> None:
    """parse_count and parse_mib work on numerator and denominator; the result, or the error,
    is what exact Fraction arithmetic gives."""
    amount = quantity.parse(text)
    expected_mib = math.ceil(amount / quantity.MiB) if amount > 0 else None
    expected_count = int(amount) if amount >= 0 and amount.denominator == 1 else None
    for parse, expected in ((quantity.parse_mib, expected_mib), (quantity.parse_count, expected_count)):
        try:
            assert parse(text, "x") == expected
        except QuantityError:
            assert expected is None


@given(st.one_of(_quantities, st.text(alphabet="0123456789 +-.e\u0663\u00b2\uff11", max_size=24)))
def test_plain_digit_counts_agree_with_the_parser(text: str) -> None:
    """parse_count reads plain ASCII digits without the parser; any text gets the parser's answer
    (Arabic-Indic, superscript and full-width digits included)."""
    try:
        amount = quantity.parse(text)
    except QuantityError:
        amount = None
    expected = int(amount) if amount is not None and amount >= 0 and amount.denominator == 1 else None
    try:
        assert quantity.parse_count(text, "x") == expected
    except QuantityError:
        assert expected is None
