"""Walk a location through an object and hand the last step to a setter. Pure.

Gatekeeper's traversal (pkg/mutation/mutators/core/mutation_function.go): missing objects
and keyed list elements on the way are created, every element a glob selects is visited,
and `pathTests` (pkg/mutation/path/tester/tester.go) stop the mutation where a prefix of the
location exists when it must not, or is missing when it must exist. A created element is
kept only if the setter ran below it, so a refused path leaves the object as it was.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, Protocol

from webhook.gkmutation.path import Field, ListKey, Path, PathError, is_prefix, render

Condition = Literal["MustExist", "MustNotExist"]
CONDITIONS: tuple[Condition, ...] = ("MustExist", "MustNotExist")


class MutationError(ValueError):
    """The object does not have the shape the location implies, or a value cannot be set."""


class Setter(Protocol):
    @property
    def keyed_list_okay(self) -> bool: ...

    def set_value(self, obj: dict[str, Any], key: str) -> None: ...

    def keyed_list_value(self) -> dict[str, Any]: ...


@dataclass(frozen=True)
class Tester:
    """The condition on each depth of the location (the index of a subPath's last node)."""

    tests: Mapping[int, Condition]

    def exists_okay(self, depth: int) -> bool:
        return self.tests.get(depth, "MustExist") == "MustExist"

    def missing_okay(self, depth: int) -> bool:
        return self.tests.get(depth, "MustNotExist") == "MustNotExist"


NO_TESTS = Tester({})


def tester(location: Path, tests: Sequence[tuple[Path, Condition]]) -> Tester:
    """Gatekeeper's checks (tester.go New): each subPath a prefix of the location, no depth both
    required and forbidden, and nothing required below a forbidden parent."""
    by_depth: dict[int, Condition] = {}
    lowest_forbidden, highest_required = None, None
    for position, (sub_path, condition) in enumerate(tests):
        if not is_prefix(sub_path, location):
            raise PathError(f"subPath {render(sub_path)!r} is not a prefix of location {render(location)!r}")
        depth = len(sub_path) - 1
        if by_depth.get(depth, condition) != condition:
            raise PathError(f"subPath {render(sub_path)!r} is marked both MustExist and MustNotExist")
        by_depth[depth] = condition
        if condition == "MustNotExist" and lowest_forbidden is None:
            lowest_forbidden = position
        if condition == "MustExist":
            highest_required = position
    if lowest_forbidden is not None and highest_required is not None and highest_required > lowest_forbidden:
        required, forbidden = tests[highest_required][0], tests[lowest_forbidden][0]
        raise PathError(
            f"subPath {render(required)!r} is MustExist under {render(forbidden)!r}, which is MustNotExist"
        )
    return Tester(by_depth)


def same_json(a: Any, b: Any) -> bool:
    """Equality of decoded JSON as Go compares it: 1, 1.0 and true are three different values."""
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(same_json(v, b[k]) for k, v in a.items())
    if isinstance(a, list):
        return len(a) == len(b) and all(same_json(x, y) for x, y in zip(a, b, strict=True))
    return bool(a == b)


def mutate(obj: dict[str, Any], location: Path, tests: Tester, setter: Setter) -> bool:
    """Apply `setter` at `location` in `obj`, in place; True if the setter ran."""
    if not location:
        raise MutationError("the location is empty")
    mutated, _ = _walk(obj, location, 0, tests, setter)
    return mutated


def _walk(current: Any, location: Path, depth: int, tests: Tester, setter: Setter) -> tuple[bool, Any]:
    node = location[depth]
    if isinstance(node, Field):
        return _walk_field(current, node, location, depth, tests, setter)
    return _walk_list(current, node, location, depth, tests, setter)


def _walk_field(
    current: Any, node: Field, location: Path, depth: int, tests: Tester, setter: Setter
) -> tuple[bool, Any]:
    if not isinstance(current, dict):
        raise MutationError(f"{_at(location, depth)} expects an object, found {_json_type(current)}")
    exists = node.name in current
    if not (tests.exists_okay(depth) if exists else tests.missing_okay(depth)):
        return False, None
    if depth == len(location) - 1:
        setter.set_value(current, node.name)
        return True, current
    below = current[node.name] if exists else _missing(location, depth)
    mutated, below = _walk(below, location, depth + 1, tests, setter)
    if mutated:
        current[node.name] = below
    return mutated, current


def _walk_list(
    current: Any, node: ListKey, location: Path, depth: int, tests: Tester, setter: Setter
) -> tuple[bool, Any]:
    if not isinstance(current, list):
        raise MutationError(f"{_at(location, depth)} expects a list, found {_json_type(current)}")
    elements = list(current)
    if depth == len(location) - 1:
        if not setter.keyed_list_okay:
            raise MutationError("this mutator cannot set a keyed list element")
        return _set_element(elements, node, depth, tests, setter)
    if node.glob and not tests.exists_okay(depth):
        return False, None  # MustNotExist on a glob can never hold
    mutated, found = False, False
    for element in elements:
        if node.glob or (isinstance(element, dict) and _has_key(element, node)):
            if not node.glob and not tests.exists_okay(depth):
                return False, None
            changed, _ = _walk(element, location, depth + 1, tests, setter)
            mutated, found = mutated or changed, True
    if not node.glob and not found:
        if not tests.missing_okay(depth):
            return False, None
        element = _missing(location, depth)
        elements.append(element)
        changed, _ = _walk(element, location, depth + 1, tests, setter)
        mutated = mutated or changed
    return mutated, elements


def _set_element(
    elements: list[Any], node: ListKey, depth: int, tests: Tester, setter: Setter
) -> tuple[bool, Any]:
    if node.glob:
        raise MutationError("the last node of a location cannot be a glob")
    value = setter.keyed_list_value()
    for position, element in enumerate(elements):
        if not isinstance(element, dict):
            raise MutationError(
                f"a list element of [{node.key}: ...] is {_json_type(element)}, not an object"
            )
        if _has_key(element, node):
            if not _has_key(value, node):
                raise MutationError("the key value of a replaced list element must not change")
            if not tests.exists_okay(depth):
                return False, None
            elements[position] = value
            return True, elements
    if not tests.missing_okay(depth):
        return False, None
    return True, [*elements, value]


def _has_key(element: Mapping[str, Any], node: ListKey) -> bool:
    return node.key in element and same_json(element[node.key], node.value)


def _missing(location: Path, depth: int) -> Any:
    """A new element for the next node; one under a keyed list carries its key."""
    here, below = location[depth], location[depth + 1]
    created: Any = {} if isinstance(below, Field) else []
    if isinstance(here, ListKey):
        if not isinstance(created, dict):
            raise MutationError("two list selectors in a row are not allowed")
        if here.value is None:
            raise MutationError(f"cannot create an element for the glob [{here.key}: *]")
        created[here.key] = here.value
    return created


def _at(location: Path, depth: int) -> str:
    return render(location[: depth + 1])


def _json_type(value: Any) -> str:
    names = {dict: "an object", list: "a list", str: "a string", bool: "a boolean", type(None): "null"}
    return names.get(type(value), "a number")


def copied(value: Any) -> Any:
    """A value set into an object is its own copy, so later mutators never write into a policy."""
    return copy.deepcopy(value) if isinstance(value, dict | list) else value
