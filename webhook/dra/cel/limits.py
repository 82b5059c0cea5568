"""The bounds on a selector and on one evaluation of it.

Kubernetes bounds a selector's length (k8s.io/api resource/v1 CELSelectorExpressionMaxLength)
and its runtime cost (CELSelectorExpressionMaxCost). cel-python tracks no cost, so an evaluation
here counts steps and bounds the strings and lists it builds instead; going past either raises
BeyondLimits, which the selector reports as UNDECIDED.
"""

from __future__ import annotations

from typing import Final

MAX_EXPRESSION_BYTES: Final = 10 * 1024  # k8s.io/api resource/v1 CELSelectorExpressionMaxLength
MAX_DEPTH: Final = 100  # levels of nested operations: evaluation stays well inside the stack
MAX_STEPS: Final = 20_000
MAX_VALUE_LENGTH: Final = 100_000
INT64: Final = 2**63  # CEL's int is a Go int64, its uint a uint64


class BeyondLimits(Exception):
    """Raised, not returned, so that no CEL error handling absorbs it."""
