"""PolicyTest suites: cases that run objects through the offline pipeline and check the result.

A case passes when every expectation holds: the decision, a subset of the resulting
object, JSON pointers that must be absent, message and warning patterns, or no patch.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jsonpointer

from webhook.errors import ConfigError, PolicyError, WebhookError
from webhook.inventory import EMPTY, Inventory, load_inventory
from webhook.objects import read_objects
from webhook.offline import Identity, Outcome, offline_deps, request_for, run
from webhook.policy.loader import load_directory
from webhook.policy.model import PolicySet
from webhook.policy.schemas import GROUP_VERSION, POLICY_TEST
from webhook.policy.selection import EVERYTHING, Selection
from webhook.policy.source import Document, YamlError, parse_documents
from webhook.policy.validate import schema_problems

NOT_SELECTED = "not selected by --run"


@dataclass(frozen=True)
class CaseResult:
    suite: str
    case: str
    failures: tuple[str, ...]
    skipped: str = ""  # why the case did not run

    @property
    def passed(self) -> bool:
        return not self.failures


def is_policy_test(document: Document) -> bool:
    return document.api_version == GROUP_VERSION and document.kind == "PolicyTest"


def run_suite(document: Document, selection: Selection = EVERYTHING) -> list[CaseResult]:
    """Every case of one PolicyTest document; a broken suite is one failed case saying why.
    The document is the test `selection` names (gator's tests and PolicyTest suites alike)."""
    problems = schema_problems(document, POLICY_TEST)
    if problems:
        return [CaseResult(document.name or document.file, "<suite>", tuple(map(str, problems)))]
    base = Path(document.file).parent
    spec = document.data["spec"]
    names = [str(case["name"]) for case in spec["cases"]]
    if not selection.selects_test(document.name, names):  # nothing to run: nothing to load
        return [CaseResult(document.name, name, (), NOT_SELECTED) for name in names]
    try:
        policies = load_directory(base / spec.get("policies", "."))
        inventory = load_inventory(base / spec["inventory"]) if "inventory" in spec else EMPTY
    except (PolicyError, WebhookError) as e:
        return [
            CaseResult(document.name, "<suite>", (f"cannot load the suite's policies or inventory: {e}",))
        ]
    return [
        _run_case(document.name, base, policies, inventory, case)
        if selection.selects_case(document.name, str(case["name"]))
        else CaseResult(document.name, str(case["name"]), (), NOT_SELECTED)
        for case in spec["cases"]
    ]


def _run_case(
    suite: str, base: Path, policies: PolicySet, inventory: Inventory, case: Mapping[str, Any]
) -> CaseResult:
    objects = Inventory(inventory.source, inventory.objects + tuple(case.get("inventory", [])))
    deps = offline_deps(policies, objects)
    try:
        obj = case["object"] if "object" in case else read_objects(base / case["objectFile"])[0]
        identity = Identity(
            case.get("user", "policy-test"), tuple(case.get("groups", ["system:authenticated"]))
        )
        outcome = run(request_for(obj, namespace=case.get("namespace"), identity=identity), deps)
    except (WebhookError, IndexError, KeyError) as e:
        return CaseResult(suite, case["name"], (f"cannot run the case: {e}",))
    return CaseResult(suite, case["name"], tuple(_failures(outcome, case["expect"])))


def _failures(outcome: Outcome, expect: Mapping[str, Any]) -> Iterator[str]:
    if "allowed" in expect and outcome.allowed != expect["allowed"]:
        reason = f": {outcome.status['message']}" if outcome.status else ""
        yield f"expected allowed={expect['allowed']}, got {outcome.allowed}{reason}"
    if "object" in expect:
        yield from (f"object {m}" for m in subset_mismatches(expect["object"], outcome.object, ""))
    for pointer in expect.get("absent", []):
        if _resolves(outcome.object, pointer):
            yield f"{pointer} should be absent"
    message = outcome.status["message"] if outcome.status else ""
    for pattern in expect.get("messages", []):
        if not re.search(pattern, message):
            yield f"no denial message matches {pattern!r} (message: {message!r})"
    for pattern in expect.get("warnings", []):
        if not any(re.search(pattern, w) for w in outcome.warnings):
            yield f"no warning matches {pattern!r} (warnings: {list(outcome.warnings)})"
    if expect.get("unchanged") and outcome.patch:
        yield f"expected no patch, got {len(outcome.patch)} operations"


def subset_mismatches(expected: Any, actual: Any, path: str) -> Iterator[str]:
    """Where `expected` is not contained in `actual`: maps by key, lists by position."""
    if isinstance(expected, dict):
        if not isinstance(actual, dict):
            yield f"{path or '/'}: expected a mapping, got {actual!r}"
            return
        for key, value in expected.items():
            where = f"{path}/{_escape(str(key))}"
            if key not in actual:
                yield f"{where}: missing"
            else:
                yield from subset_mismatches(value, actual[key], where)
    elif isinstance(expected, list):
        if not isinstance(actual, list) or len(actual) < len(expected):
            yield f"{path}: expected a list of at least {len(expected)} items, got {actual!r}"
            return
        for index, value in enumerate(expected):
            yield from subset_mismatches(value, actual[index], f"{path}/{index}")
    elif expected != actual:
        yield f"{path}: expected {expected!r}, got {actual!r}"


def _escape(key: str) -> str:
    return key.replace("~", "~0").replace("/", "~1")


def _resolves(obj: Any, pointer: str) -> bool:
    try:
        jsonpointer.resolve_pointer(obj, pointer)
    except jsonpointer.JsonPointerException:
        return False
    return True


def suites_in(paths: list[Path]) -> Iterator[Document]:
    """PolicyTest documents in the given files and directories (recursively)."""
    for path in paths:
        files = (
            sorted(p for p in path.rglob("*") if p.suffix in (".yaml", ".yml")) if path.is_dir() else [path]
        )
        for file in files:
            yield from (d for d in _documents(file) if is_policy_test(d))


def _documents(file: Path) -> list[Document]:
    try:
        return parse_documents(file.read_text(encoding="utf-8"), str(file))
    except YamlError as e:
        raise ConfigError(str(e.problem)) from e
    except (OSError, UnicodeDecodeError) as e:
        raise ConfigError(f"cannot read {file}: {e}") from e
