"""Evaluate CEL expressions (cel-python) in a child process, the way kube-apiserver evaluates matchConditions.

It was written to keep CEL in a child process because a native CEL library (cel-expr-python, on
cel-cpp) crashed with a double free when loaded beside regopy. cel-python is pure Python and
coexists with regopy in one process (webhook/dra/cel/ evaluates device selectors with it);
the child process remains a plain evaluator of matchConditions. Run as `python -m
tests.support.cel`, it reads one JSON request per line and answers one JSON line:
{"result": bool} or {"error": "..."}.
"""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

from tests.support.patience import PATIENCE

Activation = dict[str, Any]


class CelProcess:
    """A long-lived evaluator, so property tests can send thousands of cases cheaply."""

    def __init__(self) -> None:
        self._process = subprocess.Popen(
            [sys.executable, "-m", "tests.support.cel"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )

    def evaluate(self, expression: str, activation: Activation) -> bool:
        """The expression's boolean value; an evaluation or compile error raises CelError."""
        result = self.value(expression, activation)
        if not isinstance(result, bool):
            raise CelError(f"expression gave {result!r}, not a bool")
        return result

    def value(self, expression: str, activation: Activation) -> Any:
        """A bool, string or integer result as itself; anything else as its repr."""
        answer = self._ask({"expression": expression, "activation": activation})
        if "error" in answer:
            raise CelError(answer["error"])
        return answer["result"]

    def compile(self, expression: str) -> None:
        answer = self._ask({"expression": expression})
        if "error" in answer:
            raise CelError(answer["error"])

    def close(self) -> None:
        assert self._process.stdin is not None
        self._process.stdin.close()
        self._process.wait(timeout=PATIENCE)

    def _ask(self, request: dict[str, Any]) -> dict[str, Any]:
        assert self._process.stdin is not None and self._process.stdout is not None
        self._process.stdin.write(json.dumps(request) + "\n")
        self._process.stdin.flush()
        line = self._process.stdout.readline()
        if not line:
            raise CelError(f"CEL process exited with {self._process.wait(timeout=PATIENCE)}")
        answer: dict[str, Any] = json.loads(line)
        return answer


class CelError(Exception):
    pass


def _serve() -> None:
    import celpy
    from celpy.adapter import json_to_cel

    environment = celpy.Environment()
    programs: dict[str, Any] = {}
    for line in sys.stdin:
        request = json.loads(line)
        try:
            expression = request["expression"]
            if expression not in programs:
                programs[expression] = environment.program(environment.compile(expression))
            answer: dict[str, Any] = {"result": None}
            if "activation" in request:
                value = programs[expression].evaluate(json_to_cel(request["activation"]))
                if isinstance(value, Exception):
                    raise value
                answer = {
                    "result": bool(value) if isinstance(value, celpy.celtypes.BoolType) else repr(value)
                }
        except Exception as e:  # every failure goes back to the test, which decides
            answer = {"error": f"{type(e).__name__}: {e}"}
        print(json.dumps(answer), flush=True)


def _plain(value: Any) -> Any:
    from celpy import celtypes

    if isinstance(value, celtypes.BoolType):
        return bool(value)
    if isinstance(value, celtypes.StringType):
        return str(value)
    if isinstance(value, celtypes.IntType):
        return int(value)
    return repr(value)


if __name__ == "__main__":
    _serve()
