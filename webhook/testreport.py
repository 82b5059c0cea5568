"""What `gpu-webhook test` prints: the outcome of every case, as text, JSON or JUnit XML.

Pure: outcomes in, a string out. The JSON and the XML carry no times, so the same suites
give the same bytes on every run (CI can diff them).
"""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal

Result = Literal["pass", "fail", "skip"]
FORMATS = ("text", "json", "junit")
# XML 1.0 allows no other control characters, escaped or not; a reason quoting a hostile
# object could hold any of them, and ElementTree writes them as they are.
_NOT_XML = re.compile("[^\t\n\r\x20-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")


@dataclass(frozen=True)
class Outcome:
    """One case. `suite` is the file, `test` the group of cases in it (a Gatekeeper Suite's test,
    a PolicyTest document), `label` how the text output names the case."""

    suite: str
    test: str
    case: str
    result: Result
    label: str
    reasons: tuple[str, ...] = ()


@dataclass(frozen=True)
class Totals:
    passed: int
    failed: int
    skipped: int

    @classmethod
    def of(cls, outcomes: Sequence[Outcome]) -> Totals:
        results = [o.result for o in outcomes]
        return cls(results.count("pass"), results.count("fail"), results.count("skip"))


def render(output: str, outcomes: Sequence[Outcome], *, verbose: bool = False) -> str:
    renderers: dict[str, Callable[[Sequence[Outcome], bool], str]] = {
        "text": _text,
        "json": _json,
        "junit": _junit,
    }
    return renderers[output](outcomes, verbose)


def _text(outcomes: Sequence[Outcome], verbose: bool) -> str:
    lines = [_line(o) for o in outcomes if verbose or o.result == "fail"]
    totals = Totals.of(outcomes)
    skipped = f", {totals.skipped} skipped" if totals.skipped else ""
    return "\n".join([*lines, f"{totals.passed} passed, {totals.failed} failed{skipped}"])


def _line(outcome: Outcome) -> str:
    state = {"pass": "PASS", "fail": "FAIL", "skip": "SKIP"}[outcome.result]
    return "\n    ".join([f"{state} {outcome.label}", *outcome.reasons])


def _json(outcomes: Sequence[Outcome], _: bool) -> str:
    totals = Totals.of(outcomes)
    document = {
        "cases": [
            {
                "suite": o.suite,
                "test": o.test,
                "case": o.case,
                "result": o.result,
                "reasons": list(o.reasons),
            }
            for o in outcomes
        ],
        "totals": {
            "cases": len(outcomes),
            "passed": totals.passed,
            "failed": totals.failed,
            "skipped": totals.skipped,
        },
    }
    return json.dumps(document, indent=2, ensure_ascii=False)


def _junit(outcomes: Sequence[Outcome], _: bool) -> str:
    """The JUnit XML that CI systems read: one <testsuite> per suite file, one <testcase> per case
    (classname: the test), a <failure> or <skipped> child when it did not pass."""
    root = ET.Element("testsuites", {"name": "gpu-webhook test", **_counts(outcomes)})
    for suite in dict.fromkeys(o.suite for o in outcomes):
        cases = [o for o in outcomes if o.suite == suite]
        element = ET.SubElement(root, "testsuite", {"name": _xml(suite), **_counts(cases)})
        for outcome in cases:
            _testcase(element, outcome)
    ET.indent(root)
    return ET.tostring(root, encoding="unicode", xml_declaration=True)


def _counts(outcomes: Sequence[Outcome]) -> dict[str, str]:
    totals = Totals.of(outcomes)
    return {
        "tests": str(len(outcomes)),
        "failures": str(totals.failed),
        "errors": "0",
        "skipped": str(totals.skipped),
    }


def _testcase(parent: ET.Element, outcome: Outcome) -> None:
    case = ET.SubElement(parent, "testcase", {"name": _xml(outcome.case), "classname": _xml(outcome.test)})
    if outcome.result == "pass":
        return
    tag = "failure" if outcome.result == "fail" else "skipped"
    detail = ET.SubElement(case, tag, {"message": _xml(outcome.reasons[0] if outcome.reasons else "")})
    if len(outcome.reasons) > 1:
        detail.text = _xml("\n".join(outcome.reasons))


def _xml(text: str) -> str:
    return _NOT_XML.sub("\ufffd", text)
