"""Read a policy directory into a PolicySet, or report every problem with file, line and field.

Each kind is compiled by its own module; this one finds files, splits documents,
routes them by apiVersion and kind, and checks what spans documents (names).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

from webhook.errors import PolicyError, PolicyProblem
from webhook.policy.model import PolicySet, SharingPolicy
from webhook.policy.schemas import GROUP_VERSION
from webhook.policy.sharing_kind import compile_sharing_policy
from webhook.policy.source import Document, YamlError, parse_documents

POLICY_SUFFIXES = (".yaml", ".yml")
Compiler = Callable[[Document], tuple[Any, list[PolicyProblem]]]
COMPILERS: dict[tuple[str, str], Compiler] = {
    (GROUP_VERSION, "GPUSharingPolicy"): compile_sharing_policy,
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


def load_directory(directory: Path) -> PolicySet:
    files = policy_files(directory)
    digest = hashlib.sha256()
    documents: list[Document] = []
    problems: list[PolicyProblem] = []
    for path in files:
        text = path.read_bytes()
        digest.update(str(path.relative_to(directory)).encode() + b"\0" + text + b"\0")
        found, trouble = read_file(path, text)
        documents += found
        problems += trouble
    policies, trouble = compile_documents(documents)
    problems += trouble
    if problems:
        raise PolicyError(problems)
    return PolicySet(version=digest.hexdigest()[:16], files=tuple(str(f) for f in files), sharing=policies)


def read_file(path: Path, text: bytes) -> tuple[list[Document], list[PolicyProblem]]:
    try:
        return parse_documents(text.decode("utf-8"), str(path)), []
    except UnicodeDecodeError:
        return [], [PolicyProblem(str(path), 0, "", "not UTF-8 text")]
    except YamlError as e:
        return [], [e.problem]


def compile_documents(documents: list[Document]) -> tuple[tuple[SharingPolicy, ...], list[PolicyProblem]]:
    sharing: list[SharingPolicy] = []
    problems: list[PolicyProblem] = []
    for document in documents:
        key = (document.api_version, document.kind)
        if key in NOT_POLICIES:
            continue
        compiler = COMPILERS.get(key)
        if compiler is None:
            problems.append(document.problem(("kind",), _unknown_kind(document)))
            continue
        compiled, trouble = compiler(document)
        problems += trouble
        if isinstance(compiled, SharingPolicy):
            sharing.append(compiled)
    problems += _duplicate_names(sharing)
    return tuple(sorted(sharing, key=lambda p: (-p.priority, p.name))), problems


def _unknown_kind(document: Document) -> str:
    if not isinstance(document.data, dict):
        return "a policy document must be a mapping with apiVersion and kind"
    known = ", ".join(f"{kind} ({version})" for version, kind in sorted(COMPILERS))
    return f"unknown kind {document.kind!r} in {document.api_version!r}; known: {known}"


def _duplicate_names(policies: list[SharingPolicy]) -> list[PolicyProblem]:
    first: dict[str, SharingPolicy] = {}
    problems = []
    for policy in policies:
        if policy.name in first:
            reason = f"GPUSharingPolicy {policy.name!r} is also defined in {first[policy.name].file}"
            problems.append(PolicyProblem(policy.file, 0, "metadata.name", reason))
        first.setdefault(policy.name, policy)
    return problems


def _hidden(path: Path, root: Path) -> bool:
    return any(part.startswith(".") for part in path.relative_to(root).parts)
