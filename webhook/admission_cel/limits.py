"""The bounds on an admission expression and on one evaluation of it.

Kubernetes bounds an admission expression's runtime cost (apiserver pkg/apis/cel/config.go
PerCallLimit, 1,000,000 cost units) rather than its length. cel-python tracks no cost, so here
an expression may be at most MAX_EXPRESSION_BYTES long, and one evaluation may take at most
MAX_STEPS steps (one per syntax node visited, comprehension bodies once per element) and build
strings and lists of at most webhook.dra.cel's MAX_VALUE_LENGTH; beyond either the evaluation
fails with CelEvaluationError, never a guess. A library template's validation on a typical pod
takes a few hundred steps.
"""

from __future__ import annotations

from typing import Final

MAX_EXPRESSION_BYTES: Final = 64 * 1024
MAX_STEPS: Final = 100_000
