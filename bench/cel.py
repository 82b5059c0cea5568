"""CEL and Rego on the same ConstraintTemplates: the gatekeeper-library's K8sNativeValidation
templates on a typical pod, in this process.

    .venv/bin/python -m bench.cel --library PATH [--rounds 5] [--calls 300]

PATH is a gatekeeper-library checkout. For each template with both a Rego and a CEL block (and
the first constraint of its samples), it times one constraint's evaluation on the training pod
(bench/scenarios.py) by the CEL engine and by the in-process Rego engine (regopy), and each CEL
validation alone (with the variables it reads, evaluated afresh each call). Figures are the
median of `--rounds` rounds, in microseconds per call and as a multiple of a trivial handler
timed in the same process (bench/inprocess.py's: parse an AdmissionReview, answer it with a fixed
patch, serialize the answer).
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson
import yaml

from bench.inprocess import _trivial
from bench.scenarios import review, training_pod


def _time(call: Callable[[], object], rounds: int, calls: int) -> float:
    found = []
    for _ in range(rounds):
        start = time.process_time()
        for _ in range(calls):
            call()
        found.append((time.process_time() - start) / calls * 1e6)
    return statistics.median(found)


def _templates(library: Path) -> list[tuple[Path, dict[str, Any], dict[str, Any]]]:
    found = []
    for path in sorted(library.glob("library/**/template.yaml")):
        template = yaml.safe_load(path.read_text())
        engines = {c.get("engine") for c in template["spec"]["targets"][0].get("code") or []}
        constraints = sorted(path.parent.glob("samples/*/constraint.yaml"))
        if {"Rego", "K8sNativeValidation"} <= engines and constraints:
            found.append((path, template, yaml.safe_load(constraints[0].read_text())))
    return found


def _engines(template: Any, constraint: Any, request: Any, rounds: int, calls: int) -> tuple[float, float]:
    """(CEL, Rego) microseconds for one constraint of the template on the request."""
    from webhook.policy.engines import ConstraintSet
    from webhook.policy.engines.cel import CelEngine
    from webhook.policy.engines.regopy import RegoEngine

    constraints = ConstraintSet([constraint])
    cel = CelEngine([template])
    rego = RegoEngine.compile([dataclasses.replace(template, cel=None)])
    try:
        return (
            _time(lambda: cel.evaluate(request, constraints), rounds, calls),
            _time(lambda: rego.evaluate(request, constraints), rounds, calls),
        )
    finally:
        rego.close()


def _validation(program: Any, source: Any, constraint: Any, values: Any) -> Callable[[], object]:
    """One validation with fresh variables, as each request evaluates it."""
    from webhook.admission_cel import CelEvaluationError, Variables
    from webhook.validation.gatekeeper_cel import ANY_OBJECT, PARAMS

    def one() -> object:
        scope = dict(values.names)
        definitions: dict[str, Callable[[], Any]] = {
            ANY_OBJECT: lambda: values.any_object,
            PARAMS: lambda: dict(constraint.parameters),
        }
        for name, variable in source.variables:
            definitions[name] = functools.partial(variable.evaluate_cel, scope)
        scope["variables"] = Variables(definitions)
        try:
            return program.evaluate_cel(scope)
        except CelEvaluationError as e:  # a validation that fails on this pod is still timed
            return e

    return one


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--library", type=Path, required=True, help="a gatekeeper-library checkout")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--calls", type=int, default=300)
    args = parser.parse_args()

    from webhook.policy.engines.cel import request_values
    from webhook.validation.gatekeeper import Where, parse_constraint, parse_template
    from webhook.validation.gatekeeper_input import review_of_request

    body = review(training_pod("default"))
    request = orjson.loads(body)["request"]
    values = request_values(review_of_request(request), None)
    trivial = _time(lambda: _trivial(body), args.rounds, args.calls * 10)
    print(f"trivial handler: {trivial:.1f} us\n")
    print(f"{'template':42} {'CEL us':>8} {'x triv':>7} {'Rego us':>8} {'x triv':>7}")
    per_expression: list[tuple[str, float]] = []
    for path, document, constraint_doc in _templates(args.library):
        template = parse_template(document, Where(str(path)))
        constraint = parse_constraint(constraint_doc, Where(str(path)), {template.kind: template})
        # Every kind: the samples' constraints name Pods, or workloads the pod stands in for.
        constraint = dataclasses.replace(constraint, match=dataclasses.replace(constraint.match, kinds=()))
        by_cel, by_rego = _engines(template, constraint, request, args.rounds, args.calls)
        ratios = f"{by_cel / trivial:7.1f} {by_rego:8.1f} {by_rego / trivial:7.1f}"
        print(f"{template.kind:42} {by_cel:8.1f} {ratios}")
        source = template.cel
        assert source is not None
        for index, validation in enumerate(source.validations):
            one = _validation(validation.expression, source, constraint, values)
            per_expression.append((f"{template.kind}[{index}]", _time(one, args.rounds, args.calls)))
    print(f"\n{'validation (with its variables)':42} {'us':>8} {'x triv':>7}")
    for name, micros in per_expression:
        print(f"{name:42} {micros:8.1f} {micros / trivial:7.1f}")


if __name__ == "__main__":
    main()
