"""Read a policy directory into a PolicySet, or report every problem with file, line and field.

Each kind is compiled by its own module; this one finds files, splits documents,
routes them by apiVersion and kind, and checks what spans documents (names).
"""

from __future__ import annotations

import dataclasses
import hashlib
import re
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import orjson

from webhook.errors import PolicyError, PolicyProblem
from webhook.gkmutation.compile import Problems, compile_mutator, is_mutation
from webhook.gkmutation.mutators import Mutator
from webhook.gkmutation.system import MutatorSet
from webhook.native import compile as native_kinds
from webhook.native.model import Binding as NativeBinding
from webhook.native.model import Policy as NativePolicy
from webhook.policy.engines import ConstraintSet, Engine
from webhook.policy.engines.cel import with_cel
from webhook.policy.engines.regopy import RegoEngine
from webhook.policy.model import PolicySet
from webhook.policy.quota_kind import compile_quota
from webhook.policy.schemas import GROUP_VERSION
from webhook.policy.sharing_kind import compile_sharing_policy
from webhook.policy.source import Document, YamlError, parse_documents, parse_path
from webhook.policy.unsupported import is_own_group, skipped
from webhook.quota.policy import GPUQuota
from webhook.sharing_policy import SharingPolicy
from webhook.validation import gatekeeper
from webhook.validation.gatekeeper import Constraint, ConstraintTemplate, Where

POLICY_SUFFIXES = (".yaml", ".yml")
_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
Compiler = Callable[[Document], tuple[Any, list[PolicyProblem]]]
EngineFactory = Callable[[Sequence[ConstraintTemplate], Sequence[Constraint]], Engine]


def regopy_engine(templates: Sequence[ConstraintTemplate], constraints: Sequence[Constraint]) -> Engine:
    """In-process Rego; compiled first in a child process, so Rego that crashes regopy is a problem."""
    return RegoEngine.compile(templates, isolated=True, fixed=single_parameter_sets(constraints))


def single_parameter_sets(constraints: Sequence[Constraint]) -> dict[str, Any]:
    """Kinds whose constraints all share one parameter set (the usual case), with that set."""
    seen: dict[str, set[bytes]] = {}
    first: dict[str, Any] = {}
    for constraint in constraints:
        seen.setdefault(constraint.kind, set()).add(
            orjson.dumps(constraint.parameters, option=orjson.OPT_SORT_KEYS)
        )
        first.setdefault(constraint.kind, dict(constraint.parameters))
    return {kind: first[kind] for kind, sets in seen.items() if len(sets) == 1}


COMPILERS: dict[tuple[str, str], Compiler] = {
    (GROUP_VERSION, "GPUSharingPolicy"): compile_sharing_policy,
    (GROUP_VERSION, "GPUQuota"): compile_quota,
    **native_kinds.native_kinds(),
}
# Documents that live beside policies but are not policies: test suites run by `gpu-webhook test`.
NOT_POLICIES = {(GROUP_VERSION, "PolicyTest"), ("test.gatekeeper.sh/v1alpha1", "Suite")}


def policy_files(directory: Path) -> list[Path]:
    """Policy files in a stable order; hidden entries (ConfigMap ..data links) are skipped."""
    if not directory.is_dir():
        raise PolicyError([PolicyProblem(str(directory), 0, "", "policy directory does not exist")])
    found = [
        path
        for path in directory.rglob("*")
        if path.suffix in POLICY_SUFFIXES and path.is_file() and not _hidden(path, directory)
    ]
    return sorted(found)


def load_directory(directory: Path, engine: EngineFactory = regopy_engine) -> PolicySet:
    files = policy_files(directory)
    return load_sources([(str(path), path.read_bytes()) for path in files], engine, root=str(directory))


def load_sources(
    sources: Sequence[tuple[str, bytes]],
    engine: EngineFactory = regopy_engine,
    *,
    root: str | tuple[str, ...] = "",
    base: Sequence[tuple[str, bytes]] = (),
    base_root: str = "",
) -> PolicySet:
    """Compile policy files given as (name, content): from a directory, or from a rendered ConfigMap.

    `base` (the security bundle) comes first; a document in `sources` of the same kind and name
    replaces the base's. Every problem of every file is found in one pass and raised together as
    a PolicyError. The version digests the names (relative to their root) and contents of the
    files in force, so an identical set loaded from anywhere gets the same version.
    """
    own, problems = _read_all(sources)
    underneath, trouble = _read_all(base)
    problems += trouble
    taken = {(d.kind, d.name) for d in own if d.name}
    kept = [d for d in underneath if (d.kind, d.name) not in taken]
    compiled, trouble = compile_documents(kept + own, engine)
    problems += trouble
    if problems:
        raise PolicyError(sorted(problems, key=_reading_order), skipped=compiled.skipped)
    in_force = [s for s in base if any(d.file == str(Path(s[0])) for d in kept)]
    digest = hashlib.sha256()
    for name, text in in_force:
        digest.update(_relative(name, base_root).encode() + b"\0" + text + b"\0")
    for name, text in sources:
        digest.update(_relative(name, root).encode() + b"\0" + text + b"\0")
    names = tuple(name for name, _ in [*in_force, *sources])
    return dataclasses.replace(compiled, version=digest.hexdigest()[:16], files=names)


def _read_all(sources: Sequence[tuple[str, bytes]]) -> tuple[list[Document], list[PolicyProblem]]:
    documents: list[Document] = []
    problems: list[PolicyProblem] = []
    for name, text in sources:
        found, trouble = read_file(Path(name), text)
        documents += found
        problems += trouble
    return documents, problems


def _relative(name: str, root: str | tuple[str, ...]) -> str:
    for prefix in (root,) if isinstance(root, str) else root:
        if prefix and name.startswith(prefix):
            return name[len(prefix) :].lstrip("/")
    return name


def read_file(path: Path, text: bytes) -> tuple[list[Document], list[PolicyProblem]]:
    try:
        return parse_documents(text.decode("utf-8"), str(path)), []
    except UnicodeDecodeError:
        return [], [PolicyProblem(str(path), 0, "", "not UTF-8 text")]
    except YamlError as e:
        return [], [e.problem]


def compile_documents(
    documents: list[Document], engine: EngineFactory = regopy_engine
) -> tuple[PolicySet, list[PolicyProblem]]:
    """Every policy in `documents`, by kind (version and files are the caller's to set).

    Names are checked for every document of our own kinds, whether or not the rest of it
    compiles, so a broken policy's bad or duplicate name is reported in the same pass.
    """
    sharing: list[SharingPolicy] = []
    quotas: list[GPUQuota] = []
    mutators: list[Mutator] = []
    problems: list[PolicyProblem] = []
    foreign: list[PolicyProblem] = []
    gatekeeper_documents: list[Document] = []
    ours: list[Document] = []
    native: list[tuple[Document, NativePolicy | NativeBinding]] = []
    for document in documents:
        key = (document.api_version, document.kind)
        if key in NOT_POLICIES:
            continue
        if _is_gatekeeper(document):
            gatekeeper_documents.append(document)
            continue
        compiler = _mutation_compiler if is_mutation(*key) else COMPILERS.get(key)
        if compiler is None and _foreign(document):
            foreign.append(skipped(document, _known_kinds()))
            continue
        if compiler is None:
            problems.append(document.problem(("kind",), _unknown_kind(document)))
            continue
        ours.append(document)
        compiled, trouble = compiler(document)
        problems += trouble
        if not any(p.path == "metadata.name" and p.file == document.file for p in trouble):
            problems += _name_problems(document)
        if isinstance(compiled, SharingPolicy):
            sharing.append(compiled)
        elif isinstance(compiled, GPUQuota):
            quotas.append(compiled)
        elif isinstance(compiled, (NativePolicy, NativeBinding)):
            native.append((document, compiled))
        elif isinstance(compiled, Mutator):
            mutators.append(compiled)
    problems += _duplicate_names(ours)
    ordered = tuple(sorted(sharing, key=lambda p: (-p.priority, p.name)))
    constraints, rego, trouble = _compile_gatekeeper(gatekeeper_documents, engine)
    bound, trouble_native = native_kinds.assemble(native)
    policies = PolicySet(
        sharing=ordered,
        quotas=tuple(quotas),
        constraints=constraints,
        engine=rego,
        native=bound,
        mutators=MutatorSet(mutators) if mutators else None,
        skipped=tuple(sorted(foreign, key=_reading_order)),
    )
    trouble = trouble + trouble_native
    return policies, sorted(problems + trouble, key=_reading_order)


def _mutation_compiler(document: Document) -> tuple[Mutator | None, list[PolicyProblem]]:
    """Assign, AssignMetadata, ModifySet and AssignImage (webhook.gkmutation.compile)."""
    try:
        return compile_mutator(document.data), []
    except Problems as e:
        return None, [document.problem(path, reason) for path, reason in e.problems]


def _compile_gatekeeper(
    documents: list[Document], engine: EngineFactory
) -> tuple[ConstraintSet | None, Engine | None, list[PolicyProblem]]:
    """ConstraintTemplates compiled once, here, at load; never per request."""
    if not documents:
        return None, None, []
    pairs = [(d.data, Where(d.file, _line_finder(d))) for d in documents]
    try:
        found = gatekeeper.parse_documents(pairs)
        compiled = with_cel(engine)(found.templates, found.constraints) if found.templates else None
    except PolicyError as e:
        return None, None, e.problems
    return ConstraintSet(found.constraints), compiled, []


def _is_gatekeeper(document: Document) -> bool:
    data = document.data
    return isinstance(data, dict) and (gatekeeper.is_template(data) or gatekeeper.is_constraint(data))


def _line_finder(document: Document) -> Callable[[str], int]:
    return lambda path: document.line_of(parse_path(path))


def _foreign(document: Document) -> bool:
    """Another project's kind: skipped and reported, never a reason to reject the whole set."""
    return bool(document.kind and document.api_version) and not is_own_group(document)


def _known_kinds() -> str:
    own = ", ".join(f"{kind} ({version})" for version, kind in sorted(COMPILERS))
    return f"{own}, and Gatekeeper ConstraintTemplates and constraints"


def _unknown_kind(document: Document) -> str:
    if not isinstance(document.data, dict):
        return "a policy document must be a mapping with apiVersion and kind"
    if not document.kind or not document.api_version:
        return "a policy document needs both apiVersion and kind"
    return f"unknown kind {document.kind!r} in {document.api_version!r}; known: {_known_kinds()}"


def _name_problems(document: Document) -> list[PolicyProblem]:
    if _DNS_SUBDOMAIN.fullmatch(document.name):
        return []
    return [document.problem(("metadata", "name"), f"must be a lower-case DNS name, got {document.name!r}")]


def _duplicate_names(documents: list[Document]) -> list[PolicyProblem]:
    """A second document of a kind with a name already taken, pointing at both places."""
    first: dict[tuple[str, str], Document] = {}
    problems = []
    for document in documents:
        key = (document.kind, document.name)
        if not document.name:
            continue
        if key in first:
            other = first[key]
            where = f"{other.file}:{other.line_of(('metadata', 'name'))}"
            reason = f"{document.kind} {document.name!r} is also defined at {where}"
            problems.append(document.problem(("metadata", "name"), reason))
        first.setdefault(key, document)
    return problems


def _reading_order(problem: PolicyProblem) -> tuple[str, int]:
    return (problem.file, problem.line)


def _hidden(path: Path, root: Path) -> bool:
    return any(part.startswith(".") for part in path.relative_to(root).parts)
