"""`gpu-webhook test`: -o text|json|junit, --run, and the exit codes, through the real entry point."""

from __future__ import annotations

import json
import subprocess
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st

from tests.conftest import EXAMPLES
from tests.support import cli
from tests.support.policies import EXAMPLE_POLICIES
from webhook.testreport import Outcome, render

SECURITY_SUITES = Path(__file__).resolve().parents[1] / "policies" / "security" / "gpu-privileged"


def gpu_webhook(*args: str) -> subprocess.CompletedProcess[str]:
    return cli.gpu_webhook("test", *args)


def _failing_suite(tmp_path: Path) -> Path:
    suite = {
        "apiVersion": "gpuwebhook.io/v1alpha1",
        "kind": "PolicyTest",
        "metadata": {"name": "wrong"},
        "spec": {
            "policies": str(EXAMPLE_POLICIES),
            "cases": [
                {"name": "cpu pod allowed", "object": _pod(), "expect": {"allowed": True}},
                # A control character and markup in a name and a reason: the XML must still parse.
                {"name": "<bad> & \x1b[31m", "object": _pod(), "expect": {"allowed": False}},
            ],
        },
    }
    path = tmp_path / "wrong.test.yaml"
    path.write_text(yaml.safe_dump(suite))
    return path


def _pod() -> dict[str, object]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p", "namespace": "default"},
        "spec": {"containers": [{"name": "c", "image": "x"}]},
    }


def test_json_lists_every_case_with_totals_and_is_stable() -> None:
    first = gpu_webhook(str(EXAMPLE_POLICIES), "-o", "json")
    second = gpu_webhook(str(EXAMPLE_POLICIES), "-o", "json")
    assert first.returncode == 0, first.stderr
    assert first.stdout == second.stdout
    document = json.loads(first.stdout)
    cases = document["cases"]
    assert set(document) == {"cases", "totals"}
    assert all(set(c) == {"suite", "test", "case", "result", "reasons"} for c in cases)
    assert {c["result"] for c in cases} == {"pass"}
    assert document["totals"] == {"cases": len(cases), "passed": len(cases), "failed": 0, "skipped": 0}
    text = gpu_webhook(str(EXAMPLE_POLICIES))
    assert text.stdout.strip() == f"{len(cases)} passed, 0 failed"


def test_junit_parses_with_one_testcase_per_case(tmp_path: Path) -> None:
    result = gpu_webhook(
        str(EXAMPLE_POLICIES), str(_failing_suite(tmp_path)), str(SECURITY_SUITES), "-o", "junit"
    )
    assert result.returncode == 1
    root = ET.fromstring(result.stdout.encode())  # noqa: S314 - our own output, from suites we wrote
    listed = json.loads(
        gpu_webhook(
            str(EXAMPLE_POLICIES), str(_failing_suite(tmp_path)), str(SECURITY_SUITES), "-o", "json"
        ).stdout
    )
    testcases = root.findall("./testsuite/testcase")
    assert root.tag == "testsuites" and len(testcases) == len(listed["cases"]) == int(root.get("tests", ""))
    assert int(root.get("failures", "")) == listed["totals"]["failed"] == 1
    assert sum(int(s.get("tests", "")) for s in root.findall("testsuite")) == len(testcases)
    [failed] = [c for c in testcases if c.find("failure") is not None]
    assert failed.get("name") == "<bad> & \ufffd[31m" and failed.get("classname") == "wrong"
    assert "expected allowed=False" in (failed.find("failure").get("message") or "")  # type: ignore[union-attr]


def test_run_selects_cases_and_the_rest_are_skipped() -> None:
    run = "example-mig|shipped//void|^plain$"
    result = gpu_webhook(str(EXAMPLE_POLICIES), str(SECURITY_SUITES), "--run", run, "-o", "json")
    assert result.returncode == 0, result.stderr
    cases = json.loads(result.stdout)["cases"]
    ran = sorted((c["test"], c["case"][:9], c["result"]) for c in cases if c["result"] != "skip")
    assert ran == [("example-mig", "a pod wit", "pass"), ("shipped", "plain", "pass")]
    skipped = [c for c in cases if c["result"] == "skip"]
    assert len(skipped) == len(cases) - 2 and all(c["reasons"] == ["not selected by --run"] for c in skipped)
    text = gpu_webhook(str(EXAMPLE_POLICIES), str(SECURITY_SUITES), "--run", run)
    assert text.stdout.strip() == f"2 passed, 0 failed, {len(skipped)} skipped"


@pytest.mark.parametrize(
    ("args", "code", "says"),
    [
        pytest.param([str(EXAMPLE_POLICIES)], 0, "", id="all pass"),
        pytest.param([str(EXAMPLE_POLICIES), "--run", "^example-mps$"], 0, "", id="selected pass"),
        pytest.param(
            [str(EXAMPLE_POLICIES), "--run", "no-such-case"], 1, "is selected by --run", id="none selected"
        ),
        pytest.param([str(EXAMPLES / "pod-cpu.yaml")], 1, "no PolicyTest", id="no cases"),
        pytest.param([str(EXAMPLE_POLICIES), "--run", "a("], 2, "invalid regular expression", id="bad regex"),
        pytest.param([str(EXAMPLE_POLICIES), "--run", "a//b//c"], 2, "at most one", id="two separators"),
        pytest.param([str(EXAMPLE_POLICIES), "-o", "yaml"], 2, "invalid choice", id="bad format"),
        pytest.param([str(EXAMPLE_POLICIES), "--colour"], 2, "unrecognized arguments", id="bad flag"),
        pytest.param(["/no/such/dir"], 2, "no such file or directory", id="missing path"),
    ],
)
def test_exit_codes(args: list[str], code: int, says: str) -> None:
    result = gpu_webhook(*args)
    assert result.returncode == code, (result.stdout[-300:], result.stderr)
    assert says in result.stderr


def test_a_failure_exits_one_in_every_format(tmp_path: Path) -> None:
    suite = str(_failing_suite(tmp_path))
    assert {gpu_webhook(suite, "-o", output).returncode for output in ("text", "json", "junit")} == {1}


def test_the_help_documents_run_and_the_exit_codes() -> None:
    text = gpu_webhook("--help").stdout
    assert "--run REGEX" in text and "TEST//CASE" in text and "exit codes" in text


NAMES = st.text(max_size=30)


@given(
    st.lists(
        st.tuples(
            NAMES, NAMES, NAMES, st.sampled_from(["pass", "fail", "skip"]), st.lists(NAMES, max_size=3)
        ),
        max_size=8,
    )
)
def test_any_names_and_reasons_give_parsable_junit_and_json(
    cases: list[tuple[str, str, str, str, list[str]]],
) -> None:
    outcomes = [
        Outcome(suite, test, case, result, f"{test} / {case}", tuple(reasons))  # type: ignore[arg-type]
        for suite, test, case, result, reasons in cases
    ]
    root = ET.fromstring(render("junit", outcomes).encode())  # noqa: S314 - our own output
    testcases = root.findall("./testsuite/testcase")
    assert len(testcases) == len(outcomes)
    assert int(root.get("failures", "")) == sum(o.result == "fail" for o in outcomes)
    assert int(root.get("skipped", "")) == sum(o.result == "skip" for o in outcomes)
    document = json.loads(render("json", outcomes))
    assert [(c["suite"], c["case"], c["reasons"]) for c in document["cases"]] == [
        (o.suite, o.case, list(o.reasons)) for o in outcomes
    ]
