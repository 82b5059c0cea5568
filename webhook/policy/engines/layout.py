"""How templates become Rego modules, shared by every engine so they evaluate the same text.

Each template lives in its own package (`gkt.<Kind>`) with its own copy of its libs
(`gkl.<Kind>.lib…`), rewritten for regopy by rego_compat. Constraints that share
parameters are evaluated once: each distinct parameter set of a kind has a key. A
generated wrapper, `gkw.<Kind>.results`, evaluates the template for each parameter set
the request needs:

    input = {"review": …, "_gk_constraints": {Kind: {key: parameters}}, "_gk_inventory": …}
    data.gkw.<Kind>.results = {key: violations}

A template's `input.parameters` is rewritten to `data.gk_current_parameters`, which the
wrapper replaces (`with`) per parameter set. regopy copies the whole document a `with`
replaces into: replacing part of the input (review, inventory) made every evaluation as
slow as the input is big, while the data holds only the compiled templates.

A remote engine keeps the parameters as data instead (`data.gk_parameters[Kind][key]`)
and the input names the keys: `{"_gk_constraints": {Kind: [key, …]}}`.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import orjson

from webhook.errors import PolicyError, PolicyProblem
from webhook.validation import rego_compat
from webhook.validation.gatekeeper import Constraint, ConstraintTemplate, RegoSource
from webhook.validation.rego_syntax import RegoSyntaxError, parse
from webhook.validation.results import ConstraintResult, violations_from_rego

TEMPLATES, LIBS, WRAPPERS = "gkt", "gkl", "gkw"
# Extra input keys the wrapper reads; a template sees `review` and `parameters` as in Gatekeeper.
CONSTRAINTS_KEY, INVENTORY_KEY = "_gk_constraints", "_gk_inventory"
# The webhook's own GPU count of the object under review (webhook.accounting), for templates
# that count GPUs: `input.gpu`. Gatekeeper itself has no such key.
GPU_KEY = "gpu"
# Where constraint parameters live: data.gk_parameters[Kind][key].
PARAMETERS_DATA = "gk_parameters"
# What a template's `input.parameters` becomes: the wrapper binds it per parameter set.
CURRENT_PARAMETERS = "gk_current_parameters"

_WRAPPER = """package {wrappers}.{kind}

import rego.v1

# regopy crashes on `with input as …` and on `with … as data.x`: bind a variable first.
results[key] := found if {{
	{parameters}
	found := data.{templates}.{kind}.violation with data.{current} as parameters
}}
"""
_FROM_INPUT = "some key, parameters in input.{constraints}.{kind}"
_FROM_DATA = "some key in input.{constraints}.{kind}\n\tparameters := data.{data}.{kind}[key]"


@dataclass(frozen=True)
class Module:
    """One Rego module as an engine loads it; `origin` is None for generated modules."""

    name: str
    text: str
    origin: RegoSource | None

    def problem(self, offset: int | None, reason: str) -> PolicyProblem:
        if self.origin is None:
            return PolicyProblem(self.name, 0, "", reason)
        line = self.text.count("\n", 0, offset) + 1 if offset is not None else 0
        return PolicyProblem(self.origin.file, self.origin.file_line(line), self.origin.path, reason)


def entrypoint(kind: str) -> str:
    return f"{WRAPPERS}/{kind}/results"


def direct_entrypoint(kind: str) -> str:
    """The template's own violations, for a bundle whose data already holds its parameters."""
    return f"{TEMPLATES}/{kind}/violation"


COMPAT = Module(f"{rego_compat.COMPAT_PACKAGE}.rego", rego_compat.COMPAT_MODULE, None)


def template_modules(template: ConstraintTemplate, *, parameters_in_data: bool = False) -> list[Module]:
    """The template's modules, isolated and rewritten; raise PolicyError on a syntax error.

    Order matters to OPA, which compiles on upload: libs first, the wrapper last.
    """
    modules: list[Module] = []
    problems: list[PolicyProblem] = []
    lib_root = f"{LIBS}.{template.kind}"
    for n, source in enumerate(template.sources):
        name = f"{template.kind}/{'rego' if n == 0 else f'lib{n - 1}'}"
        try:
            text = _prepare(source, template.kind if n == 0 else None, lib_root)
        except RegoSyntaxError as e:
            problems.append(PolicyProblem(source.file, source.file_line(e.line), source.path, e.reason))
            continue
        modules.append(Module(name, text, source))
    problems += _shape_problems(template, modules)
    if problems:
        raise PolicyError(problems)
    modules.append(Module(f"{template.kind}/wrapper", wrapper(template, parameters_in_data), None))
    return modules[1:-1] + modules[:1] + modules[-1:]


def _prepare(source: RegoSource, kind: str | None, lib_root: str) -> str:
    if kind is None and not rego_compat.package_of(source.text).startswith("lib."):
        raise RegoSyntaxError(1, "a lib's package must start with 'lib.'")
    package = f"{TEMPLATES}.{kind}" if kind is not None else None
    moved = rego_compat.relocate(
        source.text,
        package=package,
        lib_root=lib_root,
        inventory=f"input.{INVENTORY_KEY}",
        parameters=f"data.{CURRENT_PARAMETERS}",
    )
    return rego_compat.for_regopy(moved, v0=not source.v1)


def _shape_problems(template: ConstraintTemplate, modules: Sequence[Module]) -> list[PolicyProblem]:
    if not modules or modules[0].origin is not template.rego:
        return []
    module = parse(modules[0].text)
    if any(module.tokens[rule.name_first].text == "violation" for rule in module.rules):
        return []
    source = template.rego
    if source is None:
        return []
    return [PolicyProblem(source.file, source.first_line, source.path, "the Rego defines no violation rule")]


def wrapper(template: ConstraintTemplate, parameters_in_data: bool = False) -> str:
    source = _FROM_DATA if parameters_in_data else _FROM_INPUT
    return _WRAPPER.format(
        wrappers=WRAPPERS,
        templates=TEMPLATES,
        kind=template.kind,
        current=CURRENT_PARAMETERS,
        parameters=source.format(constraints=CONSTRAINTS_KEY, kind=template.kind, data=PARAMETERS_DATA),
    )


def all_results_module(kinds: Iterable[str]) -> str:
    """One entrypoint over every template, for engines where each query is a round trip."""
    lines = [f"package {WRAPPERS}_all", "", "import rego.v1", ""]
    for kind in sorted(kinds):
        lines.append(f'results["{kind}"] := data.{WRAPPERS}.{kind}.results if input.{CONSTRAINTS_KEY}.{kind}')
    return "\n".join(lines) + "\n"


class ParameterTable:
    """Distinct parameter sets per kind, keyed `p0`, `p1`…; built once per constraint set."""

    def __init__(self, constraints: Iterable[Constraint]) -> None:
        self.data: dict[str, dict[str, Any]] = {}
        self._key_of: dict[str, str] = {}
        seen: dict[tuple[str, bytes], str] = {}
        for constraint in constraints:
            canonical = orjson.dumps(constraint.parameters, option=orjson.OPT_SORT_KEYS)
            key = seen.get((constraint.kind, canonical))
            if key is None:
                key = seen[(constraint.kind, canonical)] = f"p{len(seen)}"
                self.data.setdefault(constraint.kind, {})[key] = dict(constraint.parameters)
            self._key_of[constraint.id] = key

    def key(self, constraint: Constraint) -> str:
        return self._key_of[constraint.id]

    def keys(self, constraints: Iterable[Constraint]) -> dict[str, list[str]]:
        grouped: dict[str, set[str]] = {}
        for constraint in constraints:
            grouped.setdefault(constraint.kind, set()).add(self.key(constraint))
        return {kind: sorted(keys) for kind, keys in grouped.items()}

    def parameters(self, constraints: Iterable[Constraint]) -> dict[str, dict[str, Any]]:
        return {
            kind: {key: self.data[kind][key] for key in keys} for kind, keys in self.keys(constraints).items()
        }


def input_document(
    review: Mapping[str, Any],
    asked: Mapping[str, Any],
    inventory: Mapping[str, Any] | None,
    gpu: Mapping[str, Any],
) -> dict[str, Any]:
    """`asked` is `ParameterTable.parameters(…)`, or `.keys(…)` for an engine with parameters as data."""
    document: dict[str, Any] = {"review": review, CONSTRAINTS_KEY: asked, GPU_KEY: gpu}
    if inventory is not None:
        document[INVENTORY_KEY] = inventory
    return document


def read_results(
    value: Any, constraints: Sequence[Constraint], table: ParameterTable
) -> list[ConstraintResult]:
    """Turn a wrapper's `results` into one ConstraintResult per constraint asked about."""
    found = value if isinstance(value, Mapping) else {}
    results = []
    for constraint in constraints:
        key = table.key(constraint)
        if key not in found:
            results.append(ConstraintResult(constraint, error="the template produced no result"))
            continue
        try:
            results.append(ConstraintResult(constraint, violations_from_rego(found[key])))
        except ValueError as e:
            results.append(ConstraintResult(constraint, error=str(e)))
    return results


_ERROR_ENTRY = re.compile(r"\(error(?: (\d+):)?")
_ERROR_MESSAGE = re.compile(r"\(errormsg (\d+):")


def regopy_errors(text: str) -> list[tuple[str | None, int | None, str]]:
    """(module, offset, message) for each error in regopy's error text."""
    errors = []
    for entry in _ERROR_ENTRY.finditer(text):
        module: str | None = None
        offset: int | None = None
        position = entry.end()
        if entry.group(1):
            size = int(entry.group(1))
            module = text[position : position + size]
            position += size
            location = re.match(r"\|(\d+)\|", text[position:])
            offset = int(location.group(1)) if location else None
        message = _ERROR_MESSAGE.search(text, position)
        if message is None:
            continue
        start = message.end()
        errors.append((module, offset, text[start : start + int(message.group(1))]))
    return errors
