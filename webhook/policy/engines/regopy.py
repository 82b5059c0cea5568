"""In-process Rego on regopy: every template compiled once into its own bundle, queried per request.

One bundle per template, not one for all: regopy corrupts memory building some large
bundles (the gatekeeper-library's 49 templates together crash it; each alone is fine),
and a small bundle is also quicker to query. Per request the input is set once on an
interpreter and each applicable template's bundle is queried there (setting the input is
the dominant cost). regopy interpreters are not known to be thread-safe, so each thread
gets its own; the bundles are shared.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from typing import Any

import orjson
from regopy import Interpreter, LogLevel, RegoError, rego_shared

from webhook.accounting.count import GpuCount
from webhook.errors import PolicyError, PolicyProblem
from webhook.policy.engines import ConstraintSet, Plan, plan
from webhook.policy.engines.layout import (
    COMPAT,
    CURRENT_PARAMETERS,
    Module,
    ParameterTable,
    direct_entrypoint,
    entrypoint,
    read_results,
    regopy_errors,
    template_modules,
)
from webhook.policy.engines.regopy_native import free_output, output_ok, output_text, set_input
from webhook.policy.engines.vet import crash_problems
from webhook.validation.gatekeeper import Constraint, ConstraintTemplate
from webhook.validation.gatekeeper_input import Inventory
from webhook.validation.prechecks import Precheck, prechecks_for
from webhook.validation.rego_check import unknown_calls
from webhook.validation.results import ConstraintResult


class RuntimeFailure(Exception):
    """A query failed while evaluating; the message is regopy's."""


def new_interpreter() -> Interpreter:
    interpreter = Interpreter()
    interpreter.log_level = LogLevel.NONE  # errors come back to us; regopy would print them too
    return interpreter


def compile_modules(
    modules: Sequence[Module], entrypoints: Sequence[str], data: Mapping[str, Any] | None = None
) -> Any:
    """Build a bundle; raise PolicyError locating each compile error."""
    interpreter = new_interpreter()
    by_name = {m.name: m for m in modules}
    try:
        for module in [COMPAT, *modules]:
            interpreter.add_module(module.name, module.text)
        if data:
            interpreter.add_data_json(orjson.dumps(data).decode())
        return interpreter.build(None, list(entrypoints))
    except RegoError as e:
        problems = [
            by_name[name].problem(offset, message)
            if name in by_name
            else PolicyProblem(modules[0].origin.file if modules[0].origin else "", 0, "", message)
            for name, offset, message in regopy_errors(str(e))
        ]
        raise PolicyError(problems or [PolicyProblem("", 0, "", f"Rego compile error: {e}")]) from e


def _unknown_calls(modules: Sequence[Module]) -> list[PolicyProblem]:
    """Calls to functions defined nowhere: regopy would only fail (or crash) when reaching them."""
    interpreter = new_interpreter()
    by_name = {m.name: m for m in [COMPAT, *modules]}
    found = unknown_calls(((m.name, m.text) for m in by_name.values()), interpreter.is_builtin)
    return [by_name[u.module].problem(u.offset, f"unknown function {u.name}") for u in found]


class RegoEngine:
    def __init__(
        self,
        templates: Mapping[str, ConstraintTemplate],
        bundles: Mapping[str, Any],
        fixed: Mapping[str, Mapping[str, Any]] | None = None,
        prechecks: Mapping[str, Precheck] | None = None,
    ) -> None:
        self.templates = dict(templates)
        self._prechecks = dict(prechecks or {})
        self._bundles = dict(bundles)
        # Kinds whose only parameter set was compiled into their bundle's data: queried directly.
        self._fixed = dict(fixed or {})
        self._local = threading.local()

    @classmethod
    def compile(
        cls,
        templates: Sequence[ConstraintTemplate],
        *,
        isolated: bool = False,
        fixed: Mapping[str, Mapping[str, Any]] | None = None,
        prechecks: bool = True,
    ) -> RegoEngine:
        """Compile every template with its libs; raise PolicyError with every problem found.

        `isolated` first compiles and runs them in a child process, so Rego that crashes
        regopy is reported as a problem instead of killing this process (a server should).
        `fixed` gives kinds whose constraints all share one parameter set: that set is
        compiled into the bundle's data, so evaluating them needs no `with`, which costs
        regopy a copy of the data on every query (about 0.3 ms a template, measured).
        `prechecks` clears clean pods in Python for templates that have one (validation.prechecks).
        """
        problems: list[PolicyProblem] = []
        modules: dict[str, list[Module]] = {}
        for template in templates:
            try:
                modules[template.kind] = template_modules(template)
            except PolicyError as e:
                problems += e.problems
                continue
            problems += _unknown_calls(modules[template.kind])
        if not problems and isolated and modules:
            problems = crash_problems(modules, {t.kind: t for t in templates})
        if problems:
            raise PolicyError(problems)
        fixed = {kind: params for kind, params in (fixed or {}).items() if kind in modules}
        bundles: dict[str, Any] = {}
        for kind, own in modules.items():
            entrypoints = [entrypoint(kind), *([direct_entrypoint(kind)] if kind in fixed else [])]
            data = {CURRENT_PARAMETERS: fixed[kind]} if kind in fixed else None
            try:
                bundles[kind] = compile_modules(own, entrypoints, data)
            except PolicyError as e:
                problems += e.problems
        if problems:
            raise PolicyError(problems)
        found = prechecks_for(templates) if prechecks else {}
        return cls({t.kind: t for t in templates}, bundles, fixed, found)

    def close(self) -> None:
        self._bundles.clear()

    def evaluate(
        self,
        request: Mapping[str, Any],
        constraints: ConstraintSet,
        inventory: Inventory | None = None,
        *,
        may_block: bool = True,
        gpu: GpuCount | None = None,
    ) -> list[ConstraintResult]:
        work = plan(
            request, constraints, inventory, self.templates, self._prechecks, may_block=may_block, gpu=gpu
        )
        if not work.by_kind:
            return work.decided
        table = constraints.parameters
        asked = [c for c in work.constraints if c.kind not in self._fixed]  # fixed ones are in their bundles
        self._set_input(work.input(table.parameters(asked)))
        results, failed = work.decided, []
        for kind, group in work.by_kind.items():
            try:
                results += read_results(self._results(kind, group, table), group, table)
            except RuntimeFailure:
                failed.append(kind)
        for kind in failed:
            results += self._one_by_one(work, table, work.by_kind[kind])
        return results

    def _one_by_one(
        self, work: Plan, table: ParameterTable, group: list[Constraint]
    ) -> list[ConstraintResult]:
        """After a template failed, find which of its constraints fail, and why."""
        results = []
        for constraint in group:
            self._set_input(work.input(table.parameters([constraint])))
            try:
                results += read_results(self._query(constraint.kind), [constraint], table)
            except RuntimeFailure as e:
                results.append(ConstraintResult(constraint, error=f"evaluation failed: {e}"))
        return results

    def _results(self, kind: str, group: list[Constraint], table: ParameterTable) -> Any:
        """The wrapper's {key: violations}; for a fixed kind, its one key from a direct query."""
        if kind not in self._fixed:
            return self._query(kind)
        return {table.key(group[0]): self._query(kind, direct_entrypoint(kind))}

    def _interpreter(self) -> Interpreter:
        interpreter: Interpreter | None = getattr(self._local, "interpreter", None)
        if interpreter is None:
            interpreter = self._local.interpreter = new_interpreter()
        return interpreter

    def _set_input(self, document: Mapping[str, Any]) -> None:
        # Node by node from the dict: half the time of its JSON text (regopy_native, measured).
        set_input(self._interpreter(), document)

    def _query(self, kind: str, name: str | None = None) -> Any:
        bundle = self._bundles.get(kind)
        if bundle is None:
            raise RuntimeFailure("the engine is closed")
        return query_entrypoint(self._interpreter(), bundle, name or entrypoint(kind))


def query_entrypoint(interpreter: Interpreter, bundle: Any, name: str) -> Any:
    """The entrypoint's value; raise RuntimeFailure with regopy's message if evaluation failed.

    This reads regopy's output directly: `Output` would parse the JSON with the stdlib
    and could not report the error message.
    """
    try:
        output = rego_shared.rego_bundle_query_entrypoint(interpreter._impl, bundle._impl, name)
    except RegoError as e:
        raise RuntimeFailure(str(e)) from e
    try:
        if not output_ok(output):
            text = rego_shared.rego_node_json(rego_shared.rego_output_node(output))
            messages = [message for _, _, message in regopy_errors(text)]
            raise RuntimeFailure("; ".join(messages) or "regopy reported an error without a message")
        text = output_text(output)
    finally:
        free_output(output)
    if text == "undefined":
        return None
    try:
        expressions = orjson.loads(text).get("expressions") or [None]
    except orjson.JSONDecodeError as e:
        raise RuntimeFailure(f"regopy returned malformed output: {e}") from e
    return expressions[0]
