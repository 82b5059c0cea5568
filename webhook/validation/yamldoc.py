"""YAML documents with the line of every field, so problems can name `file:line`."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml


@dataclass(frozen=True)
class Document:
    value: Any
    file: str
    lines: dict[str, int]

    def line_of(self, path: str) -> int:
        """1-based line of a field path such as `spec.targets[0].rego`, or of its nearest
        present parent: a missing field points at the object that lacks it."""
        while path and path not in self.lines:
            path = _PARENT.sub("", path)
        return self.lines.get(path, 0)


_PARENT = re.compile(r"(\.?[^.\[\]]+|\[[^\]]*\])$")


def load_documents(path: Path) -> list[Document]:
    """Every non-empty document in a YAML file; raise yaml.YAMLError or OSError."""
    text = path.read_text(encoding="utf-8")
    nodes = list(yaml.compose_all(text, Loader=yaml.SafeLoader))
    values = list(yaml.safe_load_all(text))
    return [
        Document(value, str(path), _lines(node))
        for node, value in zip(nodes, values, strict=True)
        if node is not None and value is not None
    ]


def _lines(root: yaml.Node) -> dict[str, int]:
    lines: dict[str, int] = {}
    stack: list[tuple[str, yaml.Node]] = [("", root)]
    while stack:
        path, node = stack.pop()
        lines[path] = node.start_mark.line + 1
        if isinstance(node, yaml.MappingNode):
            for key, value in node.value:
                name = str(key.value)
                stack.append((f"{path}.{name}" if path else name, value))
        elif isinstance(node, yaml.SequenceNode):
            stack.extend((f"{path}[{i}]", item) for i, item in enumerate(node.value))
    return lines
