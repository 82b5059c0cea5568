"""Run Gatekeeper `Suite` files (test.gatekeeper.sh/v1alpha1), as `gator verify` does.

Each test pairs a template with a constraint; each case reviews one object (a manifest
or an AdmissionReview) with an optional inventory, and asserts how many violations
match a message regex. Paths are relative to the suite file.

    python -m webhook.policy.suite PATH…   # prints failures and `N passed, N failed`
"""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from webhook.errors import PolicyError
from webhook.policy.engines import ConstraintSet, Engine
from webhook.policy.engines.cel import with_cel
from webhook.policy.selection import EVERYTHING, Selection
from webhook.validation.gatekeeper import (
    Constraint,
    ConstraintTemplate,
    Where,
    parse_constraint,
    parse_template,
)
from webhook.validation.gatekeeper_input import inventory_of, review_of_admission_review, review_of_object
from webhook.validation.results import ConstraintResult
from webhook.validation.yamldoc import Document, load_documents

SUITE_API_VERSION = "test.gatekeeper.sh/v1alpha1"
NOT_SELECTED = "not selected by --run"
# The same shape as the policy loader's: the constraints let an engine specialise (fixed parameters).
EngineFactory = Callable[[Sequence[ConstraintTemplate], Sequence[Constraint]], Engine]


@dataclass(frozen=True)
class CaseResult:
    suite: str
    test: str
    case: str
    passed: bool
    skipped: bool = False
    reason: str = ""

    @property
    def label(self) -> str:
        return f"{self.suite} {self.test}/{self.case}" if self.case else f"{self.suite} {self.test}"


@dataclass
class SuiteReport:
    results: list[CaseResult] = field(default_factory=list)

    @property
    def passed(self) -> int:
        return sum(1 for r in self.results if r.passed and not r.skipped)

    @property
    def failed(self) -> int:
        return sum(1 for r in self.results if not r.passed)

    @property
    def skipped(self) -> int:
        return sum(1 for r in self.results if r.skipped)

    def summary(self) -> str:
        return f"{self.passed} passed, {self.failed} failed"


class CaseError(Exception):
    """A case could not run, or an assertion did not hold."""


def find_suites(paths: Iterable[Path]) -> list[Path]:
    """Suite files among `paths`; directories are searched recursively."""
    found: list[Path] = []
    for path in paths:
        candidates = sorted(path.rglob("*.y*ml")) if path.is_dir() else [path]
        found += [p for p in candidates if path.is_file() or is_suite_file(p)]
    return found


def is_suite_file(path: Path) -> bool:
    try:
        head = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return False
    return "kind: Suite" in head and SUITE_API_VERSION in head


def run_paths(
    paths: Iterable[Path], engine_factory: EngineFactory | None = None, selection: Selection = EVERYTHING
) -> SuiteReport:
    report = SuiteReport()
    for suite in find_suites(paths):
        report.results += run_suite(suite, engine_factory, selection)
    return report


def run_suite(
    path: Path, engine_factory: EngineFactory | None = None, selection: Selection = EVERYTHING
) -> list[CaseResult]:
    """A file that is no Suite fails whatever `selection` says: the run named a broken path."""
    factory = with_cel(engine_factory or _default_factory)
    name = str(path)
    try:
        suite = _single(path)
    except CaseError as e:
        return [CaseResult(name, "", "", passed=False, reason=str(e))]
    if suite.get("kind") != "Suite" or suite.get("apiVersion") != SUITE_API_VERSION:
        return [CaseResult(name, "", "", passed=False, reason=f"not a Suite ({SUITE_API_VERSION})")]
    if suite.get("skip"):
        return [CaseResult(name, "", "", passed=True, skipped=True)]
    results: list[CaseResult] = []
    for test in suite.get("tests") or []:
        results += _Test(name, path.parent, test, factory, selection).run()
    return results


def _default_factory(templates: Sequence[ConstraintTemplate], constraints: Sequence[Constraint]) -> Engine:
    """As the server compiles them, fixed parameter sets included (not isolated: a test can crash)."""
    from webhook.policy.engines.regopy import RegoEngine
    from webhook.policy.loader import single_parameter_sets

    return RegoEngine.compile(templates, fixed=single_parameter_sets(constraints))


class _Test:
    def __init__(
        self,
        suite: str,
        base: Path,
        raw: Mapping[str, Any],
        factory: EngineFactory,
        selection: Selection = EVERYTHING,
    ) -> None:
        self.suite, self.base, self.raw, self.factory = suite, base, raw, factory
        self.name = str(raw.get("name", ""))
        self.selection = selection

    def result(self, case: str, passed: bool, reason: str = "", skipped: bool = False) -> CaseResult:
        return CaseResult(self.suite, self.name, case, passed, skipped, reason)

    def run(self) -> list[CaseResult]:
        cases = self.raw.get("cases") or []
        names = [str(c.get("name", "")) for c in cases]
        if self.raw.get("skip"):
            return [self.result(name, True, skipped=True) for name in names] or [
                self.result("", True, skipped=True)
            ]
        if not self.selection.selects_test(self.name, names):
            return [self.result(name, True, NOT_SELECTED, skipped=True) for name in names] or [
                self.result("", True, NOT_SELECTED, skipped=True)
            ]
        try:
            template = parse_template(*self._document("template"))
            if self.raw.get("invalid"):
                return [self._expect_invalid(template)]
            constraint = parse_constraint(*self._document("constraint"), {template.kind: template})
            engine = self.factory([template], [constraint])
        except (PolicyError, CaseError) as e:
            return [self._unrunnable(name, _reason(e)) for name in names] or [
                self.result("", False, _reason(e))
            ]
        try:
            return [self._case(engine, constraint, case) for case in cases]
        finally:
            engine.close()

    def _unrunnable(self, case: str, reason: str) -> CaseResult:
        if self.selection.selects_case(self.name, case):
            return self.result(case, False, reason)
        return self.result(case, True, NOT_SELECTED, skipped=True)

    def _expect_invalid(self, template: ConstraintTemplate) -> CaseResult:
        try:
            parse_constraint(*self._document("constraint"), {template.kind: template})
        except PolicyError as e:
            if any(p.path.startswith("spec.parameters") for p in e.problems):
                return self.result("invalid", True)
            return self.result("invalid", False, f"want a parameter schema error, got: {e}")
        except CaseError as e:
            return self.result("invalid", False, str(e))
        return self.result(
            "invalid", False, "want the constraint to be rejected by the schema, it was accepted"
        )

    def _document(self, key: str) -> tuple[Mapping[str, Any], Where]:
        relative = self.raw.get(key)
        if not relative:
            raise CaseError(f"test has no {key}")
        path = self.base / str(relative)
        document = _single_document(path)
        return document.value, Where(document.file, document.line_of)

    def _case(self, engine: Engine, constraint: Constraint, case: Mapping[str, Any]) -> CaseResult:
        name = str(case.get("name", ""))
        if case.get("skip"):
            return self.result(name, True, skipped=True)
        if not self.selection.selects_case(self.name, name):
            return self.result(name, True, NOT_SELECTED, skipped=True)
        try:
            results = self._review(engine, constraint, case)
            for assertion in _assertions(case):
                assertion.check(results)
        except CaseError as e:
            return self.result(name, False, str(e))
        return self.result(name, True)

    def _review(
        self, engine: Engine, constraint: Constraint, case: Mapping[str, Any]
    ) -> list[ConstraintResult]:
        if not case.get("object"):
            raise CaseError("case has no object")
        obj = _single(self.base / str(case["object"]))
        inventory = inventory_of(
            doc.value for item in case.get("inventory") or [] for doc in _documents(self.base / str(item))
        )
        try:
            review = review_of_admission_review(obj) if _is_admission_review(obj) else review_of_object(obj)
        except ValueError as e:
            raise CaseError(str(e)) from e
        results = engine.evaluate(review, ConstraintSet([constraint]), inventory)
        errors = [r.error for r in results if r.error]
        if errors:
            raise CaseError("; ".join(errors))
        return results


def _is_admission_review(obj: Mapping[str, Any]) -> bool:
    group = str(obj.get("apiVersion", "")).rpartition("/")[0]
    return obj.get("kind") == "AdmissionReview" and group == "admission.k8s.io"


@dataclass(frozen=True)
class Assertion:
    violations: int | str
    message: re.Pattern[str] | None

    def check(self, results: list[ConstraintResult]) -> None:
        messages = [v.msg for r in results for v in r.violations]
        matching = sum(1 for m in messages if self.message is None or self.message.search(m))
        about = f" matching {self.message.pattern!r}" if self.message else ""
        if self.violations == "yes" and matching == 0:
            raise CaseError(f"got 0 violations{about}, want at least 1; messages {messages}")
        if self.violations == "no" and matching:
            raise CaseError(f"got {matching} violations{about}, want none; messages {messages}")
        if isinstance(self.violations, int) and matching != self.violations:
            raise CaseError(f"got {matching} violations{about}, want {self.violations}; messages {messages}")


def _assertions(case: Mapping[str, Any]) -> Iterator[Assertion]:
    raw = case.get("assertions") or []
    if not raw:
        raise CaseError("case has no assertions")
    for item in raw:
        violations = item.get("violations", "yes")
        if isinstance(violations, bool):  # YAML 1.1 reads a bare yes/no as a boolean
            violations = "yes" if violations else "no"
        if isinstance(violations, str) and violations.isdigit():
            violations = int(violations)
        if violations not in ("yes", "no") and not (isinstance(violations, int) and violations >= 0):
            raise CaseError(f"violations must be yes, no or a count, got {violations!r}")
        message = item.get("message")
        try:
            pattern = re.compile(str(message)) if message is not None else None
        except re.error as e:
            raise CaseError(f"invalid message regex {message!r}: {e}") from e
        yield Assertion(violations, pattern)


def _documents(path: Path) -> list[Document]:
    try:
        return load_documents(path)
    except (OSError, yaml.YAMLError) as e:
        raise CaseError(f"{path}: {e}") from e


def _single_document(path: Path) -> Document:
    documents = _documents(path)
    if len(documents) != 1:
        raise CaseError(f"{path} holds {len(documents)} documents, want exactly 1")
    return documents[0]


def _single(path: Path) -> Mapping[str, Any]:
    value = _single_document(path).value
    if not isinstance(value, Mapping):
        raise CaseError(f"{path} is not a YAML object")
    return value


def _reason(error: Exception) -> str:
    return str(error).replace("\n", "; ")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m webhook.policy.suite", description=__doc__.split("\n")[0]
    )
    parser.add_argument("paths", nargs="+", type=Path)
    parser.add_argument("-v", "--verbose", action="store_true", help="list passing cases too")
    args = parser.parse_args(argv)
    report = run_paths(args.paths)
    for result in report.results:
        if not result.passed:
            print(f"FAIL {result.label}: {result.reason}")
        elif args.verbose:
            print(f"{'SKIP' if result.skipped else 'ok  '} {result.label}")
    print(report.summary())
    return 1 if report.failed else 0


if __name__ == "__main__":
    sys.exit(main())
