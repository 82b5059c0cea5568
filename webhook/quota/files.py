"""Read GPUQuota documents from a policy directory, with line numbers for every problem.

A stand-in until the policy loader registers GPUQuota as one of its kinds; other
kinds are left alone here (the loader judges them).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

import yaml

from webhook.errors import PolicyError, PolicyProblem
from webhook.policy.loader import policy_files
from webhook.quota.policy import KIND, GPUQuota, parse_quota

_SEGMENT = re.compile(r"([^.\[\]]+)|\[([^\]]*)\]")


def load_quotas(directory: Path) -> list[GPUQuota]:
    """Every GPUQuota under `directory`; PolicyError lists every problem in every file."""
    quotas: list[GPUQuota] = []
    problems: list[PolicyProblem] = []
    for path in policy_files(directory):
        try:
            quotas += quotas_from_text(path.read_text(encoding="utf-8"), str(path))
        except PolicyError as e:
            problems += e.problems
        except (OSError, UnicodeDecodeError) as e:
            problems.append(PolicyProblem(str(path), 0, "", f"cannot read: {e}"))
    if problems:
        raise PolicyError(problems)
    return quotas


def quotas_from_text(text: str, file: str) -> list[GPUQuota]:
    try:
        nodes = list(yaml.compose_all(text, Loader=yaml.SafeLoader))
        documents = list(yaml.safe_load_all(text))
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        line = mark.line + 1 if mark is not None else 0
        raise PolicyError([PolicyProblem(file, line, "", f"invalid YAML: {getattr(e, 'problem', e)}")]) from e
    quotas: list[GPUQuota] = []
    problems: list[PolicyProblem] = []
    for node, document in zip(nodes, documents, strict=True):
        if not isinstance(document, dict) or document.get("kind") != KIND:
            continue
        try:
            quotas.append(parse_quota(document, file, line_finder(node)))
        except PolicyError as e:
            problems += e.problems
    if problems:
        raise PolicyError(problems)
    return quotas


def line_finder(root: yaml.Node) -> Callable[[str], int]:
    """Map a field path to its 1-based line: the deepest part of the path that exists."""

    def line_of(path: str) -> int:
        node = root
        for match in _SEGMENT.finditer(path):
            child = _child(node, match.group(1) if match.group(1) is not None else match.group(2))
            if child is None:
                break
            node = child
        return int(node.start_mark.line) + 1

    return line_of


def _child(node: yaml.Node, key: str) -> yaml.Node | None:
    if isinstance(node, yaml.MappingNode):
        for key_node, value_node in node.value:
            if isinstance(key_node, yaml.ScalarNode) and key_node.value == key:
                found: yaml.Node = value_node
                return found
    if isinstance(node, yaml.SequenceNode) and key.isdigit() and int(key) < len(node.value):
        child: yaml.Node = node.value[int(key)]
        return child
    return None
