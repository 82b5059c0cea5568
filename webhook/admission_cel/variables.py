"""`variables`: each variable evaluated when an expression first reads it, then remembered.

Kubernetes' admission CEL (apiserver pkg/admission/plugin/cel/composition.go) evaluates a
variable lazily, once per admission request, and an expression reading a variable whose
evaluation failed fails with that error. Variables does the same for one activation.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import Any, Final

from celpy import celtypes
from celpy.evaluation import CELEvalError

from webhook.admission_cel.errors import CelEvaluationError
from webhook.admission_cel.program import Program
from webhook.admission_cel.values import to_cel

_PENDING: Final = object()


class Variables(celtypes.MapType):
    """The `variables` map of one activation: name -> zero-argument callable giving the value
    (JSON-ish or CEL), called on first read and memoised, a failure included. A variable that
    reads itself, directly or not, fails. Membership and iteration see the declared names."""

    def __init__(self, definitions: Mapping[str, Callable[[], Any]]) -> None:
        super().__init__()
        self._definitions = dict(definitions)
        self._memo: dict[str, Any] = {}

    @classmethod
    def of(cls, programs: Mapping[str, Program], values: Mapping[str, Any]) -> Variables:
        """Each program evaluated on `values` (CEL values, see to_cel) plus these variables."""
        scope = dict(values)
        variables = cls({name: _evaluation(program, scope) for name, program in programs.items()})
        scope["variables"] = variables
        return variables

    def __getitem__(self, name: Any) -> Any:
        if name not in self._definitions:
            raise KeyError(name)
        value = self._memo.get(name)
        if value is _PENDING:
            return CELEvalError(f"variable {name} refers to itself")
        if value is None and name not in self._memo:
            self._memo[name] = _PENDING
            value = self._memo[name] = _value(self._definitions[name])
        return value

    def __contains__(self, name: object) -> bool:
        return name in self._definitions

    def __iter__(self) -> Iterator[Any]:
        return iter(self._definitions)

    def __len__(self) -> int:
        return len(self._definitions)

    def items(self) -> Any:
        return [(name, self[name]) for name in self._definitions]


def _evaluation(program: Program, scope: Mapping[str, Any]) -> Callable[[], Any]:
    return lambda: program.evaluate_cel(scope)


def _value(definition: Callable[[], Any]) -> Any:
    try:
        return to_cel(definition())
    except CelEvaluationError as e:
        return CELEvalError(str(e))
