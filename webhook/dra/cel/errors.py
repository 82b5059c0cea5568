"""The errors a selector meets: refusals when it compiles, CEL runtime errors when it runs.

A refusal is an exception (SelectorError, or UnsupportedSelector for what Kubernetes accepts but
this engine cannot evaluate). A CEL runtime error is a value, as in cel-go: functions return
cel-python's CELEvalError (`runtime_error`) and operators pass it on; `describe` makes one a
one-line reason.
"""

from __future__ import annotations

from celpy.evaluation import CELEvalError


class SelectorError(ValueError):
    """A selector that does not compile; the one-line message quotes it and says why."""


class UnsupportedSelector(SelectorError):
    """A selector Kubernetes may accept that this engine cannot evaluate."""


def runtime_error(message: str) -> CELEvalError:
    return CELEvalError(message)


def describe(error: CELEvalError) -> str:
    message = str(error.args[0]) if error.args else "CEL runtime error"
    detail = error.args[2] if len(error.args) > 2 else None
    if isinstance(detail, tuple) and detail and str(detail[0]) not in message:
        message = f"{message}: {detail[0]}"
    return " ".join(message.split())[:200]
