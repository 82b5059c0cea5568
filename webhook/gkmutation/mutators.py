"""The four mutator kinds, compiled: where each writes, what, and to which objects. Pure.

Each setter follows its Gatekeeper counterpart: Assign and AssignMetadata
(core/setter.go defaultSetter), ModifySet (mutators/modifyset/modify_set_mutator.go setter),
AssignImage (mutators/assignimage/assignimage_mutator.go setter). Matching is
pkg/mutation/match: `applyTo` names exact groups, versions and kinds (and operations),
and `match` is read against the object as it stands when the mutator runs, so a label an
earlier mutator adds can bring a later one into play.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from webhook.gkmutation.image import Image
from webhook.gkmutation.path import Path, render
from webhook.gkmutation.walk import MutationError, Setter, Tester, copied, mutate, same_json
from webhook.validation.constraint_match import ConstraintMatch, Subject

OPERATIONS = ("CREATE", "UPDATE")  # the only ones Gatekeeper's mutation webhook runs on
MetadataField = Literal["namespace", "name"]


@dataclass(frozen=True)
class Target:
    """What a request tells every mutator: the object's type, the operation, its namespace."""

    group: str
    version: str
    kind: str
    operation: str
    namespace: str
    namespace_labels: Mapping[str, str]


@dataclass(frozen=True)
class ApplyTo:
    groups: frozenset[str]
    versions: frozenset[str]
    kinds: frozenset[str]
    operations: frozenset[str] = frozenset()  # empty or "*": every operation in OPERATIONS

    def matches(self, target: Target) -> bool:
        """No globs: every part is an exact name (match/apply_to.go)."""
        return (
            target.group in self.groups
            and target.version in self.versions
            and target.kind in self.kinds
            and target.operation in OPERATIONS
            and (not self.operations or "*" in self.operations or target.operation in self.operations)
        )


@dataclass(frozen=True)
class AssignValue:
    """assign.value, or assign.fromMetadata (the object's namespace or name)."""

    value: Any = None
    from_metadata: MetadataField | None = None

    def setter(self, obj: Mapping[str, Any], target: Target) -> Setter:
        if self.from_metadata == "namespace":
            return _ValueSetter(target.namespace)
        if self.from_metadata == "name":
            metadata = obj.get("metadata")
            name = metadata.get("name") if isinstance(metadata, dict) else None
            return _ValueSetter(name if isinstance(name, str) else "")
        return _ValueSetter(self.value)


class _ValueSetter:
    keyed_list_okay = True

    def __init__(self, value: Any) -> None:
        self.value = value

    def set_value(self, obj: dict[str, Any], key: str) -> None:
        obj[key] = copied(self.value)

    def keyed_list_value(self) -> dict[str, Any]:
        if not isinstance(self.value, dict):
            raise MutationError("assign.value for a keyed list element must be an object")
        return dict(copied(self.value))


@dataclass(frozen=True)
class ModifySet:
    """Merge values into a list treated as a set, or prune them from it."""

    operation: Literal["merge", "prune"]
    values: tuple[Any, ...]
    keyed_list_okay = False

    def setter(self, obj: Mapping[str, Any], target: Target) -> Setter:
        return self

    def set_value(self, obj: dict[str, Any], key: str) -> None:
        if key not in obj:
            if self.operation == "merge":
                obj[key] = [copied(v) for v in self.values]
            return
        current = obj[key]
        if not isinstance(current, list):
            raise MutationError(f"{key} is not a list of values, so it cannot be treated as a set")
        if self.operation == "merge":
            merged = list(current)
            for value in self.values:
                if not any(same_json(value, existing) for existing in merged):
                    merged.append(copied(value))
            obj[key] = merged
        else:
            obj[key] = [e for e in current if not any(same_json(v, e) for v in self.values)]

    def keyed_list_value(self) -> dict[str, Any]:
        raise MutationError("ModifySet cannot set a keyed list element")


@dataclass(frozen=True)
class AssignImage:
    """Replace the domain, path or tag of an image reference; unset parts are kept."""

    domain: str
    path: str
    tag: str
    keyed_list_okay = False

    def setter(self, obj: Mapping[str, Any], target: Target) -> Setter:
        return self

    def set_value(self, obj: dict[str, Any], key: str) -> None:
        current = obj.get(key, "")
        if not isinstance(current, str):
            raise MutationError(f"the image at {key} is not a string")
        obj[key] = Image.parse(current).assigned(self.domain, self.path, self.tag).reference()

    def keyed_list_value(self) -> dict[str, Any]:
        raise MutationError("AssignImage cannot set a keyed list element")


Action = AssignValue | ModifySet | AssignImage


@dataclass(frozen=True)
class Mutator:
    kind: str  # Assign, AssignMetadata, ModifySet or AssignImage
    name: str
    location: Path
    tests: Tester
    action: Action
    match: ConstraintMatch
    apply_to: tuple[ApplyTo, ...] | None  # None: AssignMetadata, which applies to any kind
    generated_only: bool = False  # match.source Generated: objects Gatekeeper expands, never a request

    @property
    def id(self) -> str:
        return f"{self.kind}/{self.name}"

    def describe(self) -> str:
        return f"{self.kind} {self.name} ({render(self.location)})"

    def applies(self, obj: Mapping[str, Any], target: Target) -> bool:
        if self.generated_only or target.operation not in OPERATIONS:
            return False
        if self.apply_to is not None and not any(a.matches(target) for a in self.apply_to):
            return False
        return self.match.matches(_subject(obj, target))

    def mutate(self, obj: dict[str, Any], target: Target) -> bool:
        return mutate(obj, self.location, self.tests, self.action.setter(obj, target))


def _subject(obj: Mapping[str, Any], target: Target) -> Subject:
    metadata = obj.get("metadata")
    metadata = metadata if isinstance(metadata, dict) else {}
    labels = metadata.get("labels")
    is_namespace = target.kind == "Namespace" and target.group == ""
    name = metadata.get("name")
    generate_name = metadata.get("generateName")
    name = name if isinstance(name, str) else ""
    return Subject(
        group=target.group,
        kind=target.kind,
        name=name,
        generate_name=generate_name if isinstance(generate_name, str) else "",
        namespace=name if is_namespace else target.namespace,
        labels={k: v for k, v in labels.items() if isinstance(v, str)} if isinstance(labels, dict) else {},
        is_namespace=is_namespace,
        namespace_labels=target.namespace_labels,
    )
