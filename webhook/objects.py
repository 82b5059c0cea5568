"""Read Kubernetes objects from files: multi-document YAML, JSON, `kind: List`, `kubectl get -o yaml`."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import yaml

from webhook import yaml_errors
from webhook.errors import ConfigError
from webhook.types import KubeObject


def read_objects(path: Path) -> list[KubeObject]:
    """Every object in the file, with List items flattened, in file order."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise ConfigError(f"cannot read {path}: {e}") from e
    return list(_flatten(_documents(text, path), path))


def _documents(text: str, path: Path) -> list[Any]:
    if path.suffix == ".json":
        try:
            return [orjson.loads(text)]
        except orjson.JSONDecodeError as e:
            raise ConfigError(f"{path}: invalid JSON: {e}") from e
    try:
        return [doc for doc in yaml.safe_load_all(text) if doc is not None]
    except yaml.YAMLError as e:
        trouble = yaml_errors.describe(e, text)
        where = f"{path}:{trouble.line}" if trouble.line else str(path)
        raise ConfigError(f"{where}: not valid YAML: {trouble.reason}") from e


def _flatten(documents: list[Any], path: Path) -> Iterator[KubeObject]:
    for number, document in enumerate(documents, 1):
        yield from _objects_of(document, f"{path}: document {number}")


def _objects_of(document: Any, where: str) -> Iterator[KubeObject]:
    """The object itself, or a List's (or a top-level YAML sequence's) items; junk is an error,
    never a silent skip, or a typo would read as "allowed"."""
    if isinstance(document, list):
        for index, item in enumerate(document):
            yield from _objects_of(item, f"{where}, item {index}")
        return
    if not isinstance(document, dict):
        raise ConfigError(f"{where} is a {type(document).__name__}, not a Kubernetes object")
    kind = document.get("kind")
    if not isinstance(kind, str) or not kind:
        raise ConfigError(f"{where} has no kind: a Kubernetes object needs apiVersion and kind")
    items = document.get("items")
    if kind.endswith("List") and isinstance(items, list):
        for index, item in enumerate(items):
            yield from _objects_of(item, f"{where}, items[{index}]")
        return
    yield document
