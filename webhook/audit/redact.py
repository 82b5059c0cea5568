"""What the log may keep from an object, and scrubbing of anything it must not.

Records never hold env values, Secret data, annotation values outside our own
prefix, or whole objects. Free text (denial messages, warnings, policy findings)
is written by policies and could quote any of those, so it is scrubbed of every
such value the request carried before it is recorded.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

import orjson

OUR_PREFIX = "gpuwebhook.io/"
REDACTED = "[redacted]"
MIN_SECRET_CHARS = 4
MAX_TEXT_CHARS = 1024
SECRET_KINDS = frozenset({"Secret"})


def object_digest(obj: Mapping[str, Any] | None) -> str | None:
    """Enough to correlate a record with the object in the cluster's own audit log."""
    if obj is None:
        return None
    return "sha256:" + hashlib.sha256(orjson.dumps(obj, option=orjson.OPT_SORT_KEYS)).hexdigest()


def own_annotations(obj: Mapping[str, Any] | None) -> dict[str, str]:
    annotations = _metadata(obj).get("annotations")
    if not isinstance(annotations, dict):
        return {}
    return {
        key: clip(value)
        for key, value in annotations.items()
        if isinstance(key, str) and key.startswith(OUR_PREFIX) and isinstance(value, str)
    }


def sensitive_values(objects: Iterable[Mapping[str, Any] | None]) -> frozenset[str]:
    """Every env value, Secret datum and foreign annotation value in the objects, also in base64."""
    found: set[str] = set()
    for obj in objects:
        if obj is not None:
            found.update(_walk(obj))
    found.update([base64.b64encode(value.encode()).decode("ascii") for value in found])
    return frozenset(value for value in found if len(value) >= MIN_SECRET_CHARS)


class Scrubber:
    """Replaces each sensitive value in a text; the longest first, so no fragment survives."""

    def __init__(self, values: Iterable[str]) -> None:
        self._values = sorted(set(values), key=len, reverse=True)

    def __call__(self, text: str) -> str:
        for value in self._values:
            if value in text:
                text = text.replace(value, REDACTED)
        return clip(text)


def clip(text: str, limit: int = MAX_TEXT_CHARS) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _metadata(obj: Mapping[str, Any] | None) -> Mapping[str, Any]:
    metadata = obj.get("metadata") if obj is not None else None
    return metadata if isinstance(metadata, dict) else {}


def _walk(node: Any) -> Iterator[str]:
    """Env values, Secret data and foreign annotation values, wherever they are nested."""
    stack = [node]
    while stack:
        current = stack.pop()
        if isinstance(current, dict):
            yield from _env_values(current.get("env"))
            yield from _secret_data(current)
            for value in _foreign_annotation_values(current.get("annotations")):
                yield value
                stack.append(_embedded_object(value))
            stack.extend(current.values())
        elif isinstance(current, list):
            stack.extend(current)


def _env_values(env: Any) -> Iterator[str]:
    if isinstance(env, list):
        for item in env:
            if isinstance(item, dict) and isinstance(item.get("value"), str):
                yield item["value"]


def _foreign_annotation_values(annotations: Any) -> Iterator[str]:
    if isinstance(annotations, dict):
        for key, value in annotations.items():
            if isinstance(value, str) and not (isinstance(key, str) and key.startswith(OUR_PREFIX)):
                yield value


def _embedded_object(value: str) -> Any:
    """kubectl's last-applied-configuration holds a whole object, env and all."""
    if not value.startswith("{"):
        return None
    try:
        return orjson.loads(value)
    except orjson.JSONDecodeError:
        return None


def _secret_data(obj: Mapping[str, Any]) -> Iterator[str]:
    if obj.get("kind") not in SECRET_KINDS:
        return
    for field in ("data", "stringData"):
        data = obj.get(field)
        if isinstance(data, dict):
            for value in data.values():
                if isinstance(value, str):
                    yield value
                    yield from _decoded(value)


def _decoded(value: str) -> Iterator[str]:
    try:
        text = base64.b64decode(value, validate=True).decode("utf-8")
    except (binascii.Error, UnicodeDecodeError, ValueError):
        return
    yield text
    yield from (line for line in text.splitlines() if line.strip())
