"""Matching, Gatekeeper style: small predicates, each true when its criterion is unset. Pure.

Shared by every policy kind: namespace globs, label selectors, and the Match
block of GPUSharingPolicy and GPUQuota.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from fnmatch import fnmatchcase
from typing import Any

OPERATORS = ("In", "NotIn", "Exists", "DoesNotExist")
_WILDCARDS = frozenset("*?[")
_GLOB = re.compile(r"^[a-z0-9*?]([-a-z0-9*?.]{0,251}[a-z0-9*?])?$")
_NAME_PART = r"[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?"
_LABEL_KEY = re.compile(rf"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?{_NAME_PART}$")
_LABEL_VALUE = re.compile(rf"^({_NAME_PART})?$")


class SelectorError(ValueError):
    """An invalid selector or glob; `path` says where, relative to the selector."""

    def __init__(self, path: str, reason: str) -> None:
        super().__init__(reason)
        self.path = path
        self.reason = reason


def check_glob(pattern: str) -> None:
    if not _GLOB.fullmatch(pattern):
        raise SelectorError(
            "", f"{pattern!r} is not a namespace name or glob (lower-case, digits, '-', '*', '?')"
        )


def glob_matches(patterns: Iterable[str], value: str) -> bool:
    # Most patterns are plain names ("kube-system"): one set lookup, and fnmatch only for globs.
    names, globs = _split(patterns) if isinstance(patterns, tuple) else _split_now(patterns)
    return value in names or any(fnmatchcase(value, pattern) for pattern in globs)


def _split_now(patterns: Iterable[str]) -> tuple[frozenset[str], tuple[str, ...]]:
    listed = tuple(patterns)
    globs = tuple(p for p in listed if _WILDCARDS.intersection(p))
    return frozenset(p for p in listed if p not in globs), globs


# Exempt lists and policy matches are tuples held for the life of a policy load.
_split = functools.lru_cache(maxsize=256)(_split_now)


@dataclass(frozen=True)
class Requirement:
    key: str
    operator: str
    values: frozenset[str]

    def matches(self, labels: Mapping[str, str]) -> bool:
        present = self.key in labels
        if self.operator == "Exists":
            return present
        if self.operator == "DoesNotExist":
            return not present
        inside = present and labels[self.key] in self.values
        return inside if self.operator == "In" else not inside


@dataclass(frozen=True)
class LabelSelector:
    match_labels: tuple[tuple[str, str], ...] = ()
    requirements: tuple[Requirement, ...] = ()

    def matches(self, labels: Mapping[str, str]) -> bool:
        return all(labels.get(k) == v for k, v in self.match_labels) and all(
            r.matches(labels) for r in self.requirements
        )

    @classmethod
    def parse(cls, raw: Mapping[str, Any]) -> LabelSelector:
        """Build from a metav1.LabelSelector; raise SelectorError naming the bad field."""
        labels = raw.get("matchLabels") or {}
        for key, value in labels.items():
            _check_label(f"matchLabels.{key}", key, value)
        requirements = tuple(
            _requirement(f"matchExpressions[{i}]", expr)
            for i, expr in enumerate(raw.get("matchExpressions") or [])
        )
        return cls(tuple(sorted(labels.items())), requirements)


def _requirement(path: str, raw: Mapping[str, Any]) -> Requirement:
    key, operator, values = raw.get("key", ""), raw.get("operator", ""), raw.get("values") or []
    if not _LABEL_KEY.fullmatch(key):
        raise SelectorError(f"{path}.key", f"{key!r} is not a valid label key")
    if operator not in OPERATORS:
        raise SelectorError(f"{path}.operator", f"{operator!r} is not one of {', '.join(OPERATORS)}")
    if operator in ("In", "NotIn") and not values:
        raise SelectorError(f"{path}.values", f"operator {operator} needs at least one value")
    if operator in ("Exists", "DoesNotExist") and values:
        raise SelectorError(f"{path}.values", f"operator {operator} takes no values")
    for value in values:
        _check_label(f"{path}.values", key, value)
    return Requirement(key, operator, frozenset(values))


def _check_label(path: str, key: str, value: str) -> None:
    if not _LABEL_KEY.fullmatch(key):
        raise SelectorError(path, f"{key!r} is not a valid label key")
    if not isinstance(value, str) or not _LABEL_VALUE.fullmatch(value):
        raise SelectorError(path, f"{value!r} is not a valid label value")


@dataclass(frozen=True)
class Match:
    """Which objects a policy applies to; an empty Match applies to everything."""

    namespaces: tuple[str, ...] = ()
    excluded_namespaces: tuple[str, ...] = ()
    namespace_selector: LabelSelector | None = None
    object_selector: LabelSelector | None = None

    def matches(self, namespace: str, namespace_labels: Mapping[str, str], labels: Mapping[str, str]) -> bool:
        return (
            (not self.namespaces or glob_matches(self.namespaces, namespace))
            and not glob_matches(self.excluded_namespaces, namespace)
            and (self.namespace_selector is None or self.namespace_selector.matches(namespace_labels))
            and (self.object_selector is None or self.object_selector.matches(labels))
        )
