"""Child fields that mutators add to. A field present as null counts as absent: dict.setdefault
would hand back None (found by fuzzing `metadata.annotations: null`)."""

from __future__ import annotations

from typing import Any


def mapping(parent: dict[str, Any], key: str) -> dict[str, Any]:
    child = parent.get(key)
    if not isinstance(child, dict):
        child = parent[key] = {}
    return child


def sequence(parent: dict[str, Any], key: str) -> list[Any]:
    child = parent.get(key)
    if not isinstance(child, list):
        child = parent[key] = []
    return child
