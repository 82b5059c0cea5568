"""Which objects a Gatekeeper constraint applies to: `spec.match`, and an index over many. Pure.

Semantics follow Gatekeeper's matcher: each criterion is true when unset, a request
matches when its object or its old object matches, and namespace criteria do not
disqualify cluster-scoped objects.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Generic, NamedTuple, TypeVar

from webhook.match import LabelSelector, SelectorError, glob_matches

ANY = "*"
SCOPES = ("*", "Cluster", "Namespaced")
# Gatekeeper's wildcard: a name with an optional leading and/or trailing '*'.
_WILDCARD = re.compile(r"^\*?[-:a-z0-9]*\*?$")


class NamespaceUnknown(LookupError):
    """A namespaceSelector needs the labels of a namespace we have not seen."""


class Place(NamedTuple):
    """Where an object is: what matching reads before the object's own name and labels. A
    tuple, so that a request finds what is known of its place in one hash of strings."""

    group: str
    kind: str
    namespace: str  # the object's namespace; for a Namespace, its own name; "" when cluster-scoped
    is_namespace: bool


@dataclass(frozen=True)
class Subject:
    """The facts about one object that matching reads."""

    group: str
    kind: str
    name: str
    generate_name: str
    namespace: str  # the object's namespace; for a Namespace, its own name; "" when cluster-scoped
    labels: Mapping[str, str]
    is_namespace: bool
    namespace_labels: Mapping[str, str] | None  # None when the namespace is not known

    @property
    def place(self) -> Place:
        return Place(self.group, self.kind, self.namespace, self.is_namespace)


@dataclass(frozen=True)
class KindSelector:
    groups: frozenset[str]
    kinds: frozenset[str]

    def matches(self, group: str, kind: str) -> bool:
        return _covers(self.kinds, kind) and _covers(self.groups, group)


@dataclass(frozen=True)
class ConstraintMatch:
    kinds: tuple[KindSelector, ...] = ()
    scope: str = ANY
    namespaces: tuple[str, ...] = ()
    excluded_namespaces: tuple[str, ...] = ()
    label_selector: LabelSelector | None = None
    namespace_selector: LabelSelector | None = None
    name: str = ""

    def matches(self, subject: Subject) -> bool:
        """True if the constraint applies; raise NamespaceUnknown if that cannot be decided."""
        return self.applies_at(subject.place) and self.matches_object(subject)

    def applies_at(self, place: Place) -> bool:
        """The criteria that read only where the object is: kinds, scope and namespaces."""
        return self._kind(place) and self._scope(place) and self._namespaces(place)

    def matches_object(self, subject: Subject) -> bool:
        """The other criteria, read after `applies_at`; raise NamespaceUnknown if undecidable."""
        return (
            (self.label_selector is None or self.label_selector.matches(subject.labels))
            and self._name(subject)
            and self._namespace_selector(subject)
        )

    @property
    def reads_object(self) -> bool:
        """Whether `matches_object` can be false: a label selector, a name or a namespaceSelector."""
        return self.label_selector is not None or bool(self.name) or self.namespace_selector is not None

    def _kind(self, s: Place) -> bool:
        return not self.kinds or any(k.matches(s.group, s.kind) for k in self.kinds)

    def _scope(self, s: Place) -> bool:
        if self.scope == "Cluster":
            return s.is_namespace or not s.namespace
        if self.scope == "Namespaced":
            return not s.is_namespace and bool(s.namespace)
        return True

    def _namespaces(self, s: Place) -> bool:
        if not s.namespace:
            return True
        included = not self.namespaces or glob_matches(self.namespaces, s.namespace)
        return included and not glob_matches(self.excluded_namespaces, s.namespace)

    def _name(self, s: Subject) -> bool:
        if not self.name:
            return True
        if glob_matches([self.name], s.name):
            return True
        return (
            self.name.endswith(ANY) and bool(s.generate_name) and glob_matches([self.name], s.generate_name)
        )

    def _namespace_selector(self, s: Subject) -> bool:
        if self.namespace_selector is None:
            return True
        if s.is_namespace:
            return self.namespace_selector.matches(s.labels)
        if not s.namespace:
            return True
        if s.namespace_labels is None:
            raise NamespaceUnknown(s.namespace)
        return self.namespace_selector.matches(s.namespace_labels)

    @property
    def exact_kinds(self) -> frozenset[str] | None:
        """The kinds this can match, or None when it may match any kind."""
        if not self.kinds or any(not k.kinds or ANY in k.kinds for k in self.kinds):
            return None
        return frozenset().union(*(k.kinds for k in self.kinds))

    @property
    def exact_namespaces(self) -> frozenset[str] | None:
        """The namespaces this is limited to, or None when not limited to plain names."""
        if not self.namespaces or any(ANY in n for n in self.namespaces):
            return None
        return frozenset(self.namespaces)


def _covers(values: frozenset[str], value: str) -> bool:
    return not values or ANY in values or value in values


def parse_match(raw: Any) -> ConstraintMatch:
    """Build from `spec.match`; raise SelectorError whose path is relative to `spec.match`."""
    if raw is None:
        return ConstraintMatch()
    if not isinstance(raw, Mapping):
        raise SelectorError("", "must be an object")
    scope = raw.get("scope") or ANY
    if scope not in SCOPES:
        raise SelectorError("scope", f"{scope!r} is not one of {', '.join(SCOPES)}")
    name = raw.get("name") or ""
    _check_wildcards("name", [name] if name else [])
    return ConstraintMatch(
        kinds=tuple(_kind_selector(f"kinds[{i}]", k) for i, k in enumerate(_list(raw, "kinds"))),
        scope=scope,
        namespaces=_check_wildcards("namespaces", _list(raw, "namespaces")),
        excluded_namespaces=_check_wildcards("excludedNamespaces", _list(raw, "excludedNamespaces")),
        label_selector=_selector(raw, "labelSelector"),
        namespace_selector=_selector(raw, "namespaceSelector"),
        name=name,
    )


def _list(raw: Mapping[str, Any], key: str) -> list[Any]:
    value = raw.get(key) or []
    if not isinstance(value, list):
        raise SelectorError(key, "must be a list")
    return value


def _kind_selector(path: str, raw: Any) -> KindSelector:
    if not isinstance(raw, Mapping):
        raise SelectorError(path, "must be an object with apiGroups and kinds")
    groups, kinds = raw.get("apiGroups") or [], raw.get("kinds") or []
    for key, values in (("apiGroups", groups), ("kinds", kinds)):
        if not isinstance(values, list) or not all(isinstance(v, str) for v in values):
            raise SelectorError(f"{path}.{key}", "must be a list of strings")
    return KindSelector(frozenset(groups), frozenset(kinds))


def _check_wildcards(path: str, values: list[Any]) -> tuple[str, ...]:
    for i, value in enumerate(values):
        if not isinstance(value, str) or not _WILDCARD.match(value):
            raise SelectorError(
                f"{path}[{i}]" if path != "name" else path,
                f"{value!r} is not a name with an optional leading or trailing '*'",
            )
    return tuple(values)


def _selector(raw: Mapping[str, Any], key: str) -> LabelSelector | None:
    value = raw.get(key)
    if value is None:
        return None
    if not isinstance(value, Mapping):
        raise SelectorError(key, "must be a label selector object")
    try:
        return LabelSelector.parse(value)
    except SelectorError as e:
        raise SelectorError(f"{key}.{e.path}", e.reason) from e


T = TypeVar("T")


# Places remembered per index. Kinds and namespaces of a cluster are few, but a request names
# its own: past this many, the memory starts again rather than grow without bound.
PLACES_KEPT = 4096


class MatchIndex(Generic[T]):
    """Candidates by kind and namespace, so a request only meets the constraints that may apply.

    The index only narrows; every candidate still runs the full `ConstraintMatch`. `at` also
    remembers, per place, which candidates its place criteria keep.
    """

    def __init__(self, items: Iterable[T], match_of: Callable[[T], ConstraintMatch]) -> None:
        self.items: Sequence[T] = tuple(items)
        self._matches = tuple(match_of(item) for item in self.items)
        self._buckets: dict[tuple[str, str], list[int]] = {}
        self._namespaced: dict[str, list[int]] = {}  # kind -> items limited to named namespaces
        self._places: dict[Place, Placed] = {}
        for position, match in enumerate(self._matches):
            kinds = match.exact_kinds or frozenset({ANY})
            namespaces = match.exact_namespaces
            for kind in kinds:
                if namespaces is None:
                    self._buckets.setdefault((kind, ANY), []).append(position)
                    continue
                self._namespaced.setdefault(kind, []).append(position)
                for namespace in namespaces:
                    self._buckets.setdefault((kind, namespace), []).append(position)

    def candidates(self, kind: str, namespace: str) -> list[int]:
        keys = [(kind, ANY), (ANY, ANY)]
        found: list[int] = []
        for key in keys:
            found += self._buckets.get(key, [])
        if namespace:
            found += self._buckets.get((kind, namespace), []) + self._buckets.get((ANY, namespace), [])
        else:
            found += self._namespaced.get(kind, []) + self._namespaced.get(ANY, [])
        return found

    def at(self, place: Place) -> Placed:
        """What is known of the items at `place` (see Placed)."""
        found = self._places.get(place)
        if found is None:
            if len(self._places) >= PLACES_KEPT:
                self._places.clear()
            kept = dict.fromkeys(self.candidates(place.kind, place.namespace))
            admitted = [p for p in kept if self._matches[p].applies_at(place)]
            found = Placed(
                tuple((p, self._matches[p].reads_object) for p in admitted),
                tuple(sorted(p for p in admitted if not self._matches[p].reads_object)),
            )
            self._places[place] = found
        return found


@dataclass(frozen=True)
class Placed:
    """The items whose kinds, scope and namespaces admit one place."""

    # In `candidates` order without repeats, each with whether its match still reads the object.
    candidates: tuple[tuple[int, bool], ...]
    # In order: those that match every object at the place, whatever its name and labels.
    certain: tuple[int, ...]

    @property
    def settled(self) -> bool:
        """True when `certain` is every candidate: nothing is left to read of the object."""
        return len(self.certain) == len(self.candidates)
