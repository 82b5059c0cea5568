"""A compiled admission expression: compile once, evaluate on any number of activations.

`compile_program` parses the expression with cel-python's parser and checks it against the
declared top-level names, the functions Kubernetes' admission environment declares and the
macros, as webhook.dra.cel's checker does for selectors (the same checker, with every name
typed `dyn`): unknown names and functions, misused macros and invalid literal patterns are
compile errors. Evaluation is webhook.dra.cel's interpreter, with cel-go's semantics, within
this package's step budget.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from typing import Any, Final

import lark
from celpy.evaluation import CELEvalError

from webhook.admission_cel.errors import CelCompileError, CelEvaluationError
from webhook.admission_cel.limits import MAX_EXPRESSION_BYTES, MAX_STEPS
from webhook.admission_cel.patch_types import message_type
from webhook.admission_cel.values import to_cel, to_python
from webhook.dra.cel import syntax
from webhook.dra.cel.check import Environment, checked_tree
from webhook.dra.cel.errors import SelectorError, describe
from webhook.dra.cel.interpreter import Budget, Interpreter, literal_values
from webhook.dra.cel.kinds import DYN
from webhook.dra.cel.limits import BeyondLimits

# DRA's own function, which Kubernetes declares only for device selectors.
_NOT_ADMISSION: Final = frozenset({"includes"})


@dataclass(frozen=True)
class Program:
    """One compiled expression, immutable and shared."""

    expression: str
    _tree: lark.Tree[Any] = field(repr=False, compare=False)
    _literals: Mapping[int, Any] = field(repr=False, compare=False)

    def evaluate(self, activation: Mapping[str, Any]) -> Any:
        """The expression's value on `activation` (top-level name -> JSON-ish value), as plain
        Python. Pass a `Variables` as `variables` for lazily evaluated, memoised variables.
        Raises CelEvaluationError for a CEL runtime error or past the evaluation budget."""
        return to_python(self.evaluate_cel({name: to_cel(value) for name, value in activation.items()}))

    def evaluate_cel(self, values: Mapping[str, Any]) -> Any:
        """The expression's CEL value on values that are CEL values already (see to_cel): what
        callers evaluating many expressions on one object use, converting it once."""
        try:
            result = Interpreter(self._literals, values, Budget(MAX_STEPS)).visit(self._tree)
        except BeyondLimits as e:
            raise CelEvaluationError(f"evaluation cost exceeded: {e}") from None
        except RecursionError:
            raise CelEvaluationError("nested too deeply to evaluate") from None
        if isinstance(result, CELEvalError):
            raise CelEvaluationError(describe(result))
        return result


def compile_program(
    expression: str,
    names: Collection[str],
    *,
    variables: Collection[str] | None = None,
    result_types: Collection[str] | None = None,
    patch_types: bool = False,
) -> Program:
    """The compiled expression, memoised; raises CelCompileError.

    `names` are the top-level identifiers the expression may use (object, oldObject, params,
    request, variables, ...). With `variables`, `variables.NAME` must name one of them.
    With `result_types` (CEL type names: "bool", "string", ...) the expression must be able to
    give one of them. With `patch_types`, as for a mutation, it may construct `Object{...}` and
    `JSONPatch{...}` (see patch_types.py); no other expression constructs a message."""
    if not isinstance(expression, str):
        raise CelCompileError(f"a CEL expression must be a string, not {type(expression).__name__}")
    declared = None if variables is None else frozenset(variables)
    results = None if result_types is None else frozenset(result_types)
    return _compiled(expression, frozenset(names), declared, results, patch_types)


@functools.lru_cache(maxsize=4096)
def _compiled(
    expression: str,
    names: frozenset[str],
    variables: frozenset[str] | None,
    results: frozenset[str] | None,
    patch_types: bool,
) -> Program:
    environment = Environment(
        roots=dict.fromkeys(names, DYN),
        results=results,
        excluded=_NOT_ADMISSION,
        filtered_map=True,
        max_bytes=MAX_EXPRESSION_BYTES,
        messages=message_type if patch_types else None,
    )
    try:
        tree = checked_tree(_without_trailing_commas(expression), environment)
        if variables is not None:
            _check_variables(tree, variables)
        return Program(expression, tree, literal_values(tree))
    except SelectorError as e:
        raise CelCompileError(str(e)) from None


_TRAILING_COMMA: Final = re.compile(r",(\s*[\]}])")


def _without_trailing_commas(expression: str) -> str:
    """cel-go's grammar allows a comma after the last element of a list or map literal
    (`[1, 2,]`, `{"a": 1,}`), which gatekeeper-library's seccomp templates use; cel-python's
    does not. Dropped here, outside string literals and comments."""
    pieces, last = [], 0
    for literal in syntax.NOT_CODE.finditer(expression):
        pieces += [_TRAILING_COMMA.sub(r"\1", expression[last : literal.start()]), literal.group(0)]
        last = literal.end()
    pieces.append(_TRAILING_COMMA.sub(r"\1", expression[last:]))
    return "".join(pieces)


def _check_variables(tree: lark.Tree[Any], declared: frozenset[str]) -> None:
    """Kubernetes types `variables` as an object with one field per declared variable."""
    for node in tree.iter_subtrees():
        if node.data == "member_dot" and syntax.bare_name(node.children[0]) == "variables":
            name = str(node.children[1])
            if name not in declared:
                raise CelCompileError(f"undefined field '{name}' of variables")
