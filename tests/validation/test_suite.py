"""Gatekeeper Suite files (test.gatekeeper.sh/v1alpha1), run as gator verify runs them."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.validation import builders as b
from webhook.policy import suite

REPOS_TEMPLATE = b.template("K8sAllowedRepos", b.ALLOWED_REPOS, libs=(b.IMAGES_LIB,), schema=b.REPOS_SCHEMA)
UNIQUE_TEMPLATE = b.template("K8sUniqueSelector", b.UNIQUE_SELECTOR)
UPDATE_REVIEW = {
    "apiVersion": "admission.k8s.io/v1",
    "kind": "AdmissionReview",
    "request": {"operation": "UPDATE", "object": b.pod("p", "evil/x"), "oldObject": b.pod("p", "good/x")},
}


def write_suite(root: Path, tests: list[dict[str, Any]], name: str = "suite.yaml") -> Path:
    files = {
        "template.yaml": REPOS_TEMPLATE,
        "unique/template.yaml": UNIQUE_TEMPLATE,
        "samples/constraint.yaml": b.constraint(
            "K8sAllowedRepos", "trusted", parameters={"repos": ["good/"]}
        ),
        "samples/bad-parameters.yaml": b.constraint("K8sAllowedRepos", "bad", parameters={"repos": "good/"}),
        "samples/good.yaml": b.pod("p", "good/app"),
        "samples/bad.yaml": b.pod("p", "evil/a", "evil/b"),
        "samples/update.yaml": UPDATE_REVIEW,
        "unique/constraint.yaml": b.constraint("K8sUniqueSelector", "unique"),
        "unique/new.yaml": b.service("new", {"app": "web"}),
        "unique/inventory.yaml": b.service("old", {"app": "web"}),
    }
    for relative, document in files.items():
        (root / relative).parent.mkdir(parents=True, exist_ok=True)
        (root / relative).write_text(yaml.safe_dump(document))
    document = {
        "apiVersion": suite.SUITE_API_VERSION,
        "kind": "Suite",
        "metadata": {"name": "s"},
        "tests": tests,
    }
    path = root / name
    path.write_text(yaml.safe_dump(document))
    return path


def repos_test(*cases: dict[str, Any]) -> dict[str, Any]:
    return {
        "name": "repos",
        "template": "template.yaml",
        "constraint": "samples/constraint.yaml",
        "cases": list(cases),
    }


def case(name: str, obj: str, *assertions: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {"name": name, "object": obj, "assertions": list(assertions), **extra}


PASSING = [
    case("allowed", "samples/good.yaml", {"violations": "no"}),
    case("yes", "samples/bad.yaml", {"violations": "yes"}),
    case("count", "samples/bad.yaml", {"violations": 2}),
    case("regex", "samples/bad.yaml", {"violations": 1, "message": "<evil/a>"}),
    case("regex none", "samples/bad.yaml", {"violations": "no", "message": "<good/"}),
    case("default is yes", "samples/bad.yaml", {"message": "container <c1>"}),
    case("admission review", "samples/update.yaml", {"violations": 1}),
    case("skipped", "samples/good.yaml", {"violations": "yes"}, skip=True),
]


def test_passing_cases_and_summary(tmp_path: Path) -> None:
    report = suite.run_paths([write_suite(tmp_path, [repos_test(*PASSING)])])
    assert [r.case for r in report.results if not r.passed] == []
    assert (report.passed, report.failed, report.skipped) == (7, 0, 1)
    assert report.summary() == "7 passed, 0 failed"


FAILING = [
    (case("wrong count", "samples/bad.yaml", {"violations": 3}), "got 2 violations, want 3"),
    (case("wrong no", "samples/bad.yaml", {"violations": "no"}), "want none"),
    (case("wrong regex", "samples/good.yaml", {"violations": "yes", "message": "evil"}), "want at least 1"),
    (case("no assertions", "samples/good.yaml"), "no assertions"),
    (case("missing object", "samples/none.yaml", {"violations": "no"}), "none.yaml"),
    (case("bad violations", "samples/good.yaml", {"violations": "maybe"}), "yes, no or a count"),
]


@pytest.mark.parametrize(("spec", "reason"), FAILING, ids=[c[0]["name"] for c in FAILING])
def test_failing_cases_say_why(tmp_path: Path, spec: dict[str, Any], reason: str) -> None:
    [result] = suite.run_suite(write_suite(tmp_path, [repos_test(spec)]))
    assert not result.passed
    assert reason in result.reason


def test_inventory_paths_are_relative_to_the_suite(tmp_path: Path) -> None:
    test = {
        "name": "unique",
        "template": "unique/template.yaml",
        "constraint": "unique/constraint.yaml",
        "cases": [
            case("alone", "unique/new.yaml", {"violations": "no"}),
            case(
                "taken",
                "unique/new.yaml",
                {"violations": 1, "message": "<old>"},
                inventory=["unique/inventory.yaml"],
            ),
        ],
    }
    results = suite.run_suite(write_suite(tmp_path, [test]))
    assert [r.passed for r in results] == [True, True]


def test_odd_documents_in_an_inventory_file_are_left_out(tmp_path: Path) -> None:
    """A suite's files are untrusted: before, a list where metadata belongs stopped the whole run."""
    write_suite(tmp_path, [])
    odd = ["just text", ["a", "list"], {"kind": "Service", "metadata": ["old"]}, {"kind": "Service"}]
    (tmp_path / "unique/odd.yaml").write_text(yaml.safe_dump_all(odd))
    test = {
        "name": "unique",
        "template": "unique/template.yaml",
        "constraint": "unique/constraint.yaml",
        "cases": [
            case("odd only", "unique/new.yaml", {"violations": "no"}, inventory=["unique/odd.yaml"]),
            case(
                "odd and taken",
                "unique/new.yaml",
                {"violations": 1, "message": "<old>"},
                inventory=["unique/odd.yaml", "unique/inventory.yaml"],
            ),
        ],
    }
    results = suite.run_suite(write_suite(tmp_path, [test]))
    assert [(r.passed, r.reason) for r in results] == [(True, ""), (True, "")]


@pytest.mark.parametrize(
    ("constraint", "passed"), [("samples/bad-parameters.yaml", True), ("samples/constraint.yaml", False)]
)
def test_invalid_tests_expect_a_schema_error(tmp_path: Path, constraint: str, passed: bool) -> None:
    test = {"name": "invalid", "template": "template.yaml", "constraint": constraint, "invalid": True}
    [result] = suite.run_suite(write_suite(tmp_path, [test]))
    assert result.passed is passed


def test_directories_are_searched_for_suites_and_main_exits_non_zero_on_failure(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    write_suite(tmp_path, [repos_test(PASSING[0])], name="a.yaml")
    write_suite(tmp_path, [repos_test(FAILING[0][0])], name="b.yaml")
    assert suite.main([str(tmp_path)]) == 1
    out = capsys.readouterr().out
    assert out.rstrip().endswith("1 passed, 1 failed")
    assert "FAIL" in out and "wrong count" in out
