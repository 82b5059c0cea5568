"""The two ways an admission CEL expression fails: it does not compile, or one evaluation fails."""

from __future__ import annotations


class CelCompileError(Exception):
    """An expression that does not compile; str() is a one-line reason, with the column when the
    parser knows it."""


class CelEvaluationError(Exception):
    """One evaluation failed: a CEL runtime error (no such key, no such overload, ...), or the
    evaluation went past its step or value-size budget."""
