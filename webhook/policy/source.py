"""YAML documents that remember where each field came from, so errors can name file and line."""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import yaml

from webhook import yaml_errors
from webhook.errors import PolicyProblem

Path = tuple[str | int, ...]


@dataclass(frozen=True)
class Document:
    file: str
    data: Any
    start_line: int
    lines: dict[Path, int] = field(default_factory=dict, repr=False)
    duplicates: tuple[Path, ...] = ()

    def line_of(self, path: Sequence[str | int]) -> int:
        """The line of the deepest known prefix of `path` (a missing field points at its parent)."""
        for end in range(len(path), 0, -1):
            line = self.lines.get(tuple(path[:end]))
            if line is not None:
                return line
        return self.start_line

    def problem(self, path: Sequence[str | int], reason: str) -> PolicyProblem:
        return PolicyProblem(self.file, self.line_of(path), format_path(path), reason)

    @property
    def kind(self) -> str:
        return str(self.data.get("kind", "")) if isinstance(self.data, dict) else ""

    @property
    def api_version(self) -> str:
        return str(self.data.get("apiVersion", "")) if isinstance(self.data, dict) else ""

    @property
    def name(self) -> str:
        metadata = self.data.get("metadata") if isinstance(self.data, dict) else None
        return str(metadata.get("name", "")) if isinstance(metadata, dict) else ""


def format_path(path: Sequence[str | int]) -> str:
    """spec.inject.tolerations[0].key: the way kubectl explains fields."""
    text = ""
    for part in path:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else str(part))
    return text


def parse_path(text: str) -> Path:
    """The inverse of format_path: "spec.limits.resources[nvidia.com/gpu]" -> its parts."""
    parts: list[str | int] = []
    for name, bracketed in re.findall(r"([^.\[\]]+)|\[([^\]]*)\]", text):
        parts.append(name or (int(bracketed) if bracketed.isdigit() else bracketed))
    return tuple(parts)


def parse_documents(text: str, file: str) -> list[Document]:
    """Every non-empty document in a YAML stream; raises YamlError, in plain words, on bad YAML."""
    loader = yaml.SafeLoader(text)
    documents = []
    try:
        while loader.check_node():
            node = loader.get_node()
            if node is None:
                continue
            data = loader.construct_document(node)
            if data is None:
                continue
            lines: dict[Path, int] = {}
            duplicates = tuple(_index(node, (), lines))
            documents.append(Document(file, data, node.start_mark.line + 1, lines, duplicates))
    except yaml.YAMLError as e:
        raise YamlError(_yaml_problem(file, e, text)) from e
    finally:
        loader.dispose()
    return documents


class YamlError(Exception):
    def __init__(self, problem: PolicyProblem) -> None:
        super().__init__(str(problem))
        self.problem = problem


def _index(node: yaml.Node, path: Path, lines: dict[Path, int]) -> Iterator[Path]:
    """Record the line of every field; yield paths of keys that appear twice in one mapping."""
    lines[path] = node.start_mark.line + 1
    if isinstance(node, yaml.MappingNode):
        seen: set[Any] = set()
        for key_node, value_node in node.value:
            key = key_node.value if isinstance(key_node, yaml.ScalarNode) else repr(key_node)
            if key in seen:
                yield (*path, key)
            seen.add(key)
            yield from _index(value_node, (*path, key), lines)
            lines[(*path, key)] = key_node.start_mark.line + 1  # "spec:" rather than its first child
    elif isinstance(node, yaml.SequenceNode):
        for index, item in enumerate(node.value):
            yield from _index(item, (*path, index), lines)


def _yaml_problem(file: str, error: yaml.YAMLError, text: str) -> PolicyProblem:
    trouble = yaml_errors.describe(error, text)
    column = f" (column {trouble.column})" if trouble.column else ""
    return PolicyProblem(file, trouble.line, "", f"not valid YAML: {trouble.reason}{column}")
