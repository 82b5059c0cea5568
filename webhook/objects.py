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
    return list(_flatten(_documents(text, path)))


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


def _flatten(documents: list[Any]) -> Iterator[KubeObject]:
    for document in documents:
        if not isinstance(document, dict):
            continue
        kind = document.get("kind", "")
        if isinstance(kind, str) and kind.endswith("List") and isinstance(document.get("items"), list):
            yield from _flatten(document["items"])
        else:
            yield document
