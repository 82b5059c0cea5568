"""Read a policy directory into a PolicySet, or report every problem with file and line."""

from __future__ import annotations

import hashlib
from pathlib import Path

import yaml

from webhook.errors import PolicyError, PolicyProblem
from webhook.policy.model import PolicySet
from webhook.validation.gatekeeper import is_constraint, is_template

POLICY_SUFFIXES = (".yaml", ".yml")


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
    problems: list[PolicyProblem] = []
    digest = hashlib.sha256()
    for path in files:
        text = path.read_bytes()
        digest.update(str(path.relative_to(directory)).encode() + b"\0" + text + b"\0")
        problems += _check_file(path, text)
    if problems:
        raise PolicyError(problems)
    return PolicySet(version=digest.hexdigest()[:16], files=tuple(str(f) for f in files))


def _check_file(path: Path, text: bytes) -> list[PolicyProblem]:
    try:
        documents = [doc for doc in yaml.compose_all(text.decode("utf-8")) if doc is not None]
    except (yaml.YAMLError, UnicodeDecodeError) as e:
        line = e.problem_mark.line + 1 if isinstance(e, yaml.MarkedYAMLError) and e.problem_mark else 0
        return [PolicyProblem(str(path), line, "", f"invalid YAML: {getattr(e, 'problem', e)}")]
    return [
        PolicyProblem(str(path), doc.start_mark.line + 1, "kind", "unknown policy kind")
        for doc in documents
        if not _gatekeeper(doc)
    ]


def _gatekeeper(node: yaml.Node) -> bool:
    """ConstraintTemplates and Constraints are compiled by webhook.validation.gatekeeper."""
    if not isinstance(node, yaml.MappingNode):
        return False
    fields = {k.value: v.value for k, v in node.value if isinstance(v, yaml.ScalarNode)}
    document = {"kind": fields.get("kind", ""), "apiVersion": fields.get("apiVersion", "")}
    return is_template(document) or is_constraint(document)


def _hidden(path: Path, root: Path) -> bool:
    return any(part.startswith(".") for part in path.relative_to(root).parts)
