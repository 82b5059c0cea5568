"""A mutations.gatekeeper.sh document in, a Mutator or its problems out. Pure.

The checks are those Gatekeeper makes when it admits a mutator (MutatorForAssign,
MutatorForAssignMetadata, MutatorForModifySet, MutatorForAssignImage, core.NewTester,
core.NewValidatedBindings, match.ValidateOperations); each problem carries the field path it
concerns, so the loader can point at its line. What Gatekeeper needs a cluster for is refused
here with the reason: `assign.externalData` calls a Provider, and there is none in process.
`assignIf` was removed from Gatekeeper's Assign (open-policy-agent/gatekeeper#1548) because
it lets mutators oscillate; kube-apiserver prunes it from Gatekeeper's CRDs, so a file that
still has it would not do what it says, and is refused.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from webhook.gkmutation.image import parameter_problems
from webhook.gkmutation.mutators import Action, ApplyTo, AssignImage, AssignValue, ModifySet, Mutator
from webhook.gkmutation.path import Field, ListKey, Path, PathError, parse
from webhook.gkmutation.walk import CONDITIONS, NO_TESTS, Condition, Tester, same_json, tester
from webhook.match import SelectorError
from webhook.validation.constraint_match import ConstraintMatch, parse_match

GROUP = "mutations.gatekeeper.sh"
KINDS: dict[str, tuple[str, ...]] = {
    "Assign": ("v1", "v1beta1", "v1alpha1"),
    "AssignMetadata": ("v1", "v1beta1", "v1alpha1"),
    "ModifySet": ("v1", "v1beta1", "v1alpha1"),
    "AssignImage": ("v1alpha1",),
}
API_KINDS = frozenset(
    (f"{GROUP}/{version}", kind) for kind, versions in KINDS.items() for version in versions
)
MAX_NAME = 63  # core.ValidateName
SOURCES = ("All", "Original", "Generated")
OPERATIONS = ("CREATE", "UPDATE", "*")
_SPEC_FIELDS = {
    "Assign": {"applyTo", "match", "location", "parameters"},
    "AssignMetadata": {"match", "location", "parameters"},
    "ModifySet": {"applyTo", "match", "location", "parameters"},
    "AssignImage": {"applyTo", "match", "location", "parameters"},
}
_PARAMETER_FIELDS = {
    "Assign": {"pathTests", "assign"},
    "AssignMetadata": {"assign"},
    "ModifySet": {"pathTests", "operation", "values"},
    "AssignImage": {"pathTests", "assignDomain", "assignPath", "assignTag"},
}
_ASSIGN_FIELDS = ("value", "fromMetadata", "externalData")
_WHY_NOT = {
    "assignIf": "assignIf was removed from Gatekeeper's Assign (it let mutators oscillate); use pathTests",
}

Where = tuple[str | int, ...]
Problem = tuple[Where, str]


class Problems(Exception):
    """Every problem of one document, each with the field path it concerns."""

    def __init__(self, problems: list[Problem]) -> None:
        super().__init__("; ".join(reason for _, reason in problems))
        self.problems = problems


def is_mutation(api_version: str, kind: str) -> bool:
    return api_version.startswith(f"{GROUP}/") and kind in KINDS


def compile_mutator(data: Mapping[str, Any]) -> Mutator:
    """The mutator a document describes; Problems lists every reason it is refused."""
    kind, api_version = str(data.get("kind", "")), str(data.get("apiVersion", ""))
    if (api_version, kind) not in API_KINDS:
        served = ", ".join(f"{GROUP}/{v}" for v in KINDS.get(kind, ()))
        raise Problems([(("apiVersion",), f"{kind} is served as {served}, not {api_version}")])
    metadata = data.get("metadata")
    name = metadata.get("name") if isinstance(metadata, Mapping) else None
    problems: list[Problem] = []
    if not isinstance(name, str) or not name:
        problems.append((("metadata", "name"), "a mutator needs a name"))
    elif len(name) > MAX_NAME:
        problems.append((("metadata", "name"), f"must be at most {MAX_NAME} characters"))
    spec = data.get("spec")
    if not isinstance(spec, Mapping):
        raise Problems([*problems, (("spec",), "must be an object")])
    problems += _unknown(spec, _SPEC_FIELDS[kind], ("spec",))
    parameters = spec.get("parameters") or {}
    if not isinstance(parameters, Mapping):
        raise Problems([*problems, (("spec", "parameters"), "must be an object")])
    problems += _unknown(parameters, _PARAMETER_FIELDS[kind], ("spec", "parameters"))
    built = _Builder(kind, spec, parameters, problems)
    mutator = built.mutator(str(name or ""))
    if problems or mutator is None:
        raise Problems(problems)
    return mutator


def _unknown(section: Mapping[str, Any], known: set[str], where: Where) -> list[Problem]:
    return [
        ((*where, key), _WHY_NOT.get(str(key), f"unknown field; known: {', '.join(sorted(known))}"))
        for key in section
        if key not in known
    ]


class _Builder:
    """Collects every problem of one spec while building the parts that are sound."""

    def __init__(
        self, kind: str, spec: Mapping[str, Any], parameters: Mapping[str, Any], problems: list[Problem]
    ):
        self.kind, self.spec, self.parameters, self.problems = kind, spec, parameters, problems

    def fail(self, where: Where, reason: str) -> None:
        self.problems.append((where, reason))

    def mutator(self, name: str) -> Mutator | None:
        location = self.location()
        match = self.match()
        apply_to = None if self.kind == "AssignMetadata" else self.apply_to()
        action = self.action(location) if location is not None else None
        tests = self.tests(location) if location is not None else None
        if location is None or match is None or action is None or tests is None:
            return None
        generated_only = (self.spec.get("match") or {}).get("source") == "Generated"
        return Mutator(self.kind, name, location, tests, action, match, apply_to, generated_only)

    def location(self) -> Path | None:
        where: Where = ("spec", "location")
        text = self.spec.get("location")
        if not isinstance(text, str) or not text:
            self.fail(where, "a mutator needs a location, e.g. spec.containers[name: *].image")
            return None
        try:
            location = parse(text)
        except PathError as e:
            self.fail(where, f"{text!r} is not a location: {e}")
            return None
        reason = self._location_problem(location)
        if reason:
            self.fail(where, reason)
            return None
        return location

    def _location_problem(self, location: Path) -> str | None:
        last = location[-1]
        if self.kind == "AssignMetadata":
            valid = len(location) == 3 and all(isinstance(n, Field) for n in location)
            if not valid or location[:2] not in (
                (Field("metadata"), Field("labels")),
                (Field("metadata"), Field("annotations")),
            ):
                return "AssignMetadata writes only metadata.labels.<key> or metadata.annotations.<key>"
            return None
        if location[0] == Field("metadata"):
            return f"{self.kind} cannot change metadata (AssignMetadata writes labels and annotations)"
        if isinstance(last, ListKey) and self.kind in ("ModifySet", "AssignImage"):
            return f"the last node of a {self.kind} location cannot be a list selector"
        if len(location) >= 2 and isinstance(location[-2], ListKey):
            if isinstance(last, ListKey):
                return "a list element cannot be a list: two list selectors in a row"
            if last.name == location[-2].key:
                return f"the location changes the list key {last.name!r} of the element it selects"
        if isinstance(last, ListKey) and last.glob:
            return "a location cannot end in a glob: name the element, e.g. [name: main]"
        return None

    def match(self) -> ConstraintMatch | None:
        raw = self.spec.get("match")
        if isinstance(raw, Mapping) and "source" in raw:
            if raw["source"] not in SOURCES:
                self.fail(("spec", "match", "source"), f"must be one of {', '.join(SOURCES)}")
            raw = {k: v for k, v in raw.items() if k != "source"}
        try:
            return parse_match(raw)
        except SelectorError as e:
            self.fail(("spec", "match", *[p for p in e.path.split(".") if p]), e.reason)
            return None

    def apply_to(self) -> tuple[ApplyTo, ...]:
        where: Where = ("spec", "applyTo")
        raw = self.spec.get("applyTo")
        if not isinstance(raw, list) or not raw:
            self.fail(where, f"applyTo is required for {self.kind}: groups, versions and kinds")
            return ()
        return tuple(a for i, entry in enumerate(raw) if (a := self._one_apply_to((*where, i), entry)))

    def _one_apply_to(self, where: Where, entry: Any) -> ApplyTo | None:
        if not isinstance(entry, Mapping):
            self.fail(where, "must be an object with groups, versions and kinds")
            return None
        parts: dict[str, frozenset[str]] = {}
        for key in ("groups", "versions", "kinds"):
            values = entry.get(key)
            if not isinstance(values, list) or not values or not all(isinstance(v, str) for v in values):
                self.fail(
                    (*where, key), "must be a non-empty list of names (all of groups, versions and kinds)"
                )
                return None
            parts[key] = frozenset(values)
        operations = entry.get("operations") or []
        if not isinstance(operations, list) or any(op not in OPERATIONS for op in operations):
            self.fail((*where, "operations"), f"must list only {', '.join(OPERATIONS)}")
            return None
        if len(set(operations)) != len(operations) or ("*" in operations and len(operations) > 1):
            self.fail((*where, "operations"), "must not repeat an operation or combine '*' with others")
            return None
        return ApplyTo(parts["groups"], parts["versions"], parts["kinds"], frozenset(operations))

    def tests(self, location: Path) -> Tester | None:
        if self.kind == "AssignMetadata":  # never overwrites: the key must not exist
            return tester(location, [(location, "MustNotExist")])
        raw = self.parameters.get("pathTests") or []
        where: Where = ("spec", "parameters", "pathTests")
        if not isinstance(raw, list):
            self.fail(where, "must be a list of {subPath, condition}")
            return None
        found: list[tuple[Path, Condition]] = []
        for i, test in enumerate(raw):
            sub_path = test.get("subPath") if isinstance(test, Mapping) else None
            condition = test.get("condition") if isinstance(test, Mapping) else None
            if condition not in CONDITIONS:
                self.fail((*where, i, "condition"), f"must be one of {', '.join(CONDITIONS)}")
                continue
            try:
                found.append((parse(sub_path if isinstance(sub_path, str) else ""), condition))
            except PathError as e:
                self.fail((*where, i, "subPath"), f"{sub_path!r} is not a path: {e}")
        try:
            return tester(location, found) if found else NO_TESTS
        except PathError as e:
            self.fail(where, str(e))
            return None

    def action(self, location: Path) -> Action | None:
        if self.kind == "ModifySet":
            return self._modify_set()
        if self.kind == "AssignImage":
            return self._assign_image()
        return self._assign(location)

    def _assign(self, location: Path) -> AssignValue | None:
        where: Where = ("spec", "parameters", "assign")
        raw = self.parameters.get("assign")
        if not isinstance(raw, Mapping):
            self.fail(where, "must be an object with one of value, fromMetadata or externalData")
            return None
        unknown = [key for key in raw if key not in _ASSIGN_FIELDS]
        set_fields = [key for key in _ASSIGN_FIELDS if raw.get(key) is not None]
        if unknown:
            self.fail((*where, unknown[0]), f"unknown field; known: {', '.join(_ASSIGN_FIELDS)}")
            return None
        if len(set_fields) != 1:
            self.fail(where, "must set exactly one of value, fromMetadata or externalData")
            return None
        chosen = set_fields[0]
        if chosen == "externalData":
            self.fail((*where, chosen), "external data providers are not available in gpu-webhook")
            return None
        last = location[-1]
        if chosen == "fromMetadata":
            field = raw[chosen].get("field") if isinstance(raw[chosen], Mapping) else None
            if field not in ("namespace", "name"):
                self.fail((*where, chosen, "field"), "must be namespace or name")
                return None
            if isinstance(last, ListKey):
                self.fail((*where, chosen), "cannot assign a metadata field to a list element")
                return None
            return AssignValue(from_metadata=field)
        value = raw["value"]
        reason = self._value_problem(location, value)
        if reason:
            self.fail((*where, "value"), reason)
            return None
        return AssignValue(value=value)

    def _value_problem(self, location: Path, value: Any) -> str | None:
        last = location[-1]
        if self.kind == "AssignMetadata" and not isinstance(value, str):
            return "must be a string: labels and annotations hold strings"
        if not isinstance(last, ListKey):
            return None
        if not isinstance(value, Mapping):
            return "only an object can be set as a keyed list element"
        if last.key not in value or not same_json(value[last.key], last.value):
            return f"the element must carry the key of its selector: {last.key}: {last.value!r}"
        return None

    def _modify_set(self) -> ModifySet | None:
        where: Where = ("spec", "parameters")
        operation = self.parameters.get("operation") or "merge"
        values = self.parameters.get("values") or {}
        if operation not in ("merge", "prune"):
            self.fail((*where, "operation"), "must be merge or prune")
            return None
        listed = values.get("fromList") if isinstance(values, Mapping) else None
        if (
            not isinstance(values, Mapping)
            or set(values) - {"fromList"}
            or not isinstance(listed, list | None)
        ):
            self.fail((*where, "values"), "must be an object with fromList, a list of values")
            return None
        return ModifySet("prune" if operation == "prune" else "merge", tuple(listed or ()))

    def _assign_image(self) -> AssignImage | None:
        parts = {key: self.parameters.get(key) or "" for key in ("assignDomain", "assignPath", "assignTag")}
        for key, value in parts.items():
            if not isinstance(value, str):
                self.fail(("spec", "parameters", key), "must be a string")
                return None
        found = parameter_problems(parts["assignDomain"], parts["assignPath"], parts["assignTag"])
        for key, reason in found:
            self.fail(("spec", "parameters", *([key] if key else [])), reason)
        if found:
            return None
        return AssignImage(parts["assignDomain"], parts["assignPath"], parts["assignTag"])
