"""Kubernetes resource quantities ("1", "15Gi", "500m", "1e3"), parsed exactly. Pure.

Values come from users and the cluster, so the grammar is strict and the range is
bounded: a quantity that kube-apiserver would refuse is a QuantityError with a
message fit for a denial, never another exception.
"""

from __future__ import annotations

import functools
import re
from fractions import Fraction

_PATTERN = re.compile(
    r"^(?P<sign>[+-]?)(?P<number>[0-9]+(?:\.[0-9]*)?|\.[0-9]+)"
    r"(?:(?P<exponent>[eE][+-]?[0-9]{1,3})|(?P<suffix>Ki|Mi|Gi|Ti|Pi|Ei|n|u|m|k|M|G|T|P|E))?$"
)
_BINARY = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}
_DECIMAL = {
    "n": Fraction(1, 10**9),
    "u": Fraction(1, 10**6),
    "m": Fraction(1, 1000),
    "k": Fraction(10**3),
    "M": Fraction(10**6),
    "G": Fraction(10**9),
    "T": Fraction(10**12),
    "P": Fraction(10**15),
    "E": Fraction(10**18),
}
MAX_TEXT = 64
MAX_EXPONENT = 30
_PLAIN_DIGITS = 18  # int() of up to 18 ASCII digits is exact and well inside MAX_TEXT
MiB = 2**20


class QuantityError(ValueError):
    """A value that is not a valid quantity for its use; the message names the value."""


def parse(value: object) -> Fraction:
    """The exact value of a quantity given as a string or a JSON number."""
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        raise QuantityError(f"{_show(value)} is not a quantity")
    return _parse(value)


# Pods repeat a few spellings ("1", "16Gi") across every review; Fractions are immutable, so
# they can be shared. `typed` keeps 1 apart from 1.0 (their reprs differ); errors are not cached.
@functools.lru_cache(maxsize=4096, typed=True)
def _parse(value: str | int | float) -> Fraction:
    text = value if isinstance(value, str) else repr(value)
    if len(text) > MAX_TEXT:
        raise QuantityError(f"quantity {_show(value)} is too long")
    match = _PATTERN.match(text.strip())
    if match is None:
        raise QuantityError(f"{_show(value)} is not a valid quantity")
    number = Fraction(match["number"])
    if match["exponent"]:
        power = int(match["exponent"][1:])
        if abs(power) > MAX_EXPONENT:
            raise QuantityError(f"quantity {_show(value)} is out of range")
        number *= Fraction(10) ** power
    elif match["suffix"]:
        number *= _BINARY.get(match["suffix"]) or _DECIMAL[match["suffix"]]
    return -number if match["sign"] == "-" else number


def parse_count(value: object, what: str) -> int:
    """A whole, non-negative device count, as extended resources require."""
    if type(value) is str and len(value) <= _PLAIN_DIGITS and value.isascii() and value.isdigit():
        return int(value)  # how counts are nearly always written ("1", "8"): no regex, no Fraction
    amount = _parse_named(value, what)
    # Integer arithmetic on the parts (a Fraction's denominator is always positive): exact, and
    # several times cheaper than Fraction comparisons and division on this per-container path.
    if amount.numerator < 0:
        raise QuantityError(f"{what} must not be negative, got {_show(value)}")
    if amount.denominator != 1:
        raise QuantityError(f"{what} must be a whole number, got {_show(value)}")
    return amount.numerator


def parse_mib(value: object, what: str) -> int:
    """A memory size in MiB, rounded up: a request is never made smaller than asked."""
    amount = _parse_named(value, what)
    if amount.numerator <= 0:
        raise QuantityError(f"{what} must be positive, got {_show(value)}")
    return -(-amount.numerator // (amount.denominator * MiB))


def parse_percent(value: object, what: str) -> int:
    amount = _parse_named(value, what)
    if amount.denominator != 1 or not 0 < amount <= 100:
        raise QuantityError(f"{what} must be a whole percentage from 1 to 100, got {_show(value)}")
    return int(amount)


def _parse_named(value: object, what: str) -> Fraction:
    try:
        return parse(value)
    except QuantityError as e:
        raise QuantityError(f"{what}: {e}") from e


def format_mib(mib: int) -> str:
    """The shortest exact binary-suffixed spelling: 15360 -> 15Gi, 1536 -> 1536Mi."""
    return f"{mib // 1024}Gi" if mib % 1024 == 0 else f"{mib}Mi"


def _show(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."
