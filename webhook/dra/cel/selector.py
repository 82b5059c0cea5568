"""A compiled selector and what Kubernetes' allocator makes of it on a device.

`compile_selector` compiles once (memoised) and refuses what Kubernetes refuses;
`Selector.evaluate` gives MATCHED, NOT_MATCHED, FAILED for a CEL runtime error (the allocator
then fails the whole allocation attempt rather than skip the device), or UNDECIDED beyond this
engine's limits. `match_all` evaluates a class's selectors, then a request's, as the allocator
does (structured/internal/stable/allocator_stable.go `selectorsMatch`).
"""

from __future__ import annotations

import enum
import functools
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final

import lark
from celpy import celtypes
from celpy.evaluation import CELEvalError, Result

from webhook.dra.cel.check import checked_tree
from webhook.dra.cel.errors import SelectorError, describe
from webhook.dra.cel.interpreter import Budget, Interpreter, literal_values
from webhook.dra.cel.limits import BeyondLimits
from webhook.dra.cel.values import DeviceError, device_value, kind_of
from webhook.dra.published import Device

_SHOWN: Final = 60  # characters of an expression quoted in a message


class Outcome(enum.Enum):
    MATCHED = "matched"
    NOT_MATCHED = "not matched"
    # A CEL runtime error: Kubernetes' allocator fails the whole allocation attempt when it
    # evaluates this selector on this device, whatever other devices would give.
    FAILED = "failed"
    # Beyond this engine's evaluation limits: Kubernetes may decide either way.
    UNDECIDED = "undecided"


@dataclass(frozen=True)
class Match:
    outcome: Outcome
    reason: str = ""  # why it FAILED or is UNDECIDED

    @property
    def matched(self) -> bool:
        return self.outcome is Outcome.MATCHED


MATCHED: Final = Match(Outcome.MATCHED)
NOT_MATCHED: Final = Match(Outcome.NOT_MATCHED)


@dataclass(frozen=True)
class Selector:
    """One compiled selector, immutable and shared: evaluate it on any number of devices."""

    expression: str
    _tree: lark.Tree[Any] = field(repr=False, compare=False)
    _literals: Mapping[int, Any] = field(repr=False, compare=False)

    def evaluate(self, device: Device) -> Match:
        """What Kubernetes' allocator makes of this selector on this device.

        MATCHED or NOT_MATCHED; FAILED for a CEL runtime error (a missing attribute, a type
        mismatch, a result that is not a bool, an unparsable version attribute of the device),
        which makes the allocator fail the whole allocation attempt rather than skip the device;
        UNDECIDED beyond MAX_STEPS or MAX_VALUE_LENGTH."""
        try:
            variables = {"device": device_value(device)}
        except DeviceError as e:
            return Match(Outcome.FAILED, str(e))
        try:
            return _verdict(Interpreter(self._literals, variables, Budget()).visit(self._tree))
        except BeyondLimits as e:
            return Match(Outcome.UNDECIDED, str(e))
        except RecursionError:
            return Match(Outcome.UNDECIDED, "nested too deeply to evaluate here")
        except CELEvalError as e:
            return Match(Outcome.FAILED, describe(e))
        except Exception as e:  # an engine defect must not take the request down with it
            return Match(Outcome.UNDECIDED, f"evaluation failed inside the engine: {type(e).__name__}")

    def matches(self, device: Device) -> bool:
        """True only when MATCHED: a FAILED or UNDECIDED device is not known to match."""
        return self.evaluate(device).matched


def match_all(selectors: Iterable[Selector], device: Device) -> Match:
    """Selectors in the allocator's order (the class's, then the request's): the first that does
    not match decides; a later selector is not evaluated (allocator_stable.go `selectorsMatch`)."""
    for selector in selectors:
        match = selector.evaluate(device)
        if not match.matched:
            return match
    return MATCHED


def compile_selector(expression: str) -> Selector:
    """The compiled selector, memoised; raises SelectorError (or UnsupportedSelector)."""
    if not isinstance(expression, str):
        raise SelectorError(f"a CEL selector must be a string, not {type(expression).__name__}")
    compiled = _compiled(expression)
    if isinstance(compiled, _Refusal):
        raise compiled.kind(compiled.message)
    return compiled


@dataclass(frozen=True)
class _Refusal:
    """A compile error, memoised as data: raising one stored exception again would keep
    growing its traceback."""

    kind: type[SelectorError]
    message: str


@functools.lru_cache(maxsize=1024)
def _compiled(expression: str) -> Selector | _Refusal:
    try:
        tree = checked_tree(expression)
        return Selector(expression, tree, literal_values(tree))
    except SelectorError as e:
        return _Refusal(type(e), f"CEL selector {_shown(expression)}: {e}")


def _shown(expression: str) -> str:
    line = " ".join(expression.split())
    return repr(line if len(line) <= _SHOWN else line[:_SHOWN] + "...")


def _verdict(result: Result) -> Match:
    if isinstance(result, celtypes.BoolType):
        return MATCHED if result else NOT_MATCHED
    if isinstance(result, CELEvalError):
        return Match(Outcome.FAILED, describe(result))
    return Match(Outcome.FAILED, f"CEL result of type {kind_of(result)} could not be converted to bool")
