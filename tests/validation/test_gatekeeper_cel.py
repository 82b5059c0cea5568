"""ConstraintTemplates with a K8sNativeValidation (CEL) source: loaded, compiled and evaluated.

Upstream: Gatekeeper pkg/drivers/k8scel/schema/schema.go (the source's fields and reserved
names), pkg/drivers/k8scel/driver.go (anyObject, params, object unset on DELETE),
pkg/drivers/k8scel/transform/cel_snippets.go (the two variables), main.go and
website/docs/validating-admission-policy.md (CEL before Rego), and Kubernetes'
apiserver pkg/admission/plugin/policy/validating/validator.go (messages, failure policy).
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.validation import builders as b
from webhook.errors import PolicyError, WouldBlock
from webhook.policy.engines import ConstraintSet, Engine
from webhook.policy.engines.cel import CelEngine, CombinedEngine, with_cel
from webhook.policy.engines.regopy import RegoEngine
from webhook.policy.loader import load_sources
from webhook.validation.gatekeeper import ConstraintTemplate, Where, parse_template
from webhook.validation.results import ConstraintResult

DATA = Path(__file__).parent / "data" / "cel_templates.yaml"
DOCUMENTS = list(yaml.safe_load_all(DATA.read_text()))
TEMPLATES = {t.kind: t for t in (parse_template(d, Where(str(DATA))) for d in DOCUMENTS)}
CEL = CelEngine(list(TEMPLATES.values()))
REGO = RegoEngine.compile([dataclasses.replace(t, cel=None) for t in TEMPLATES.values()])


def cel_template(source: Any, *, kind: str = "TestCel") -> dict[str, Any]:
    return {
        "apiVersion": "templates.gatekeeper.sh/v1",
        "kind": "ConstraintTemplate",
        "metadata": {"name": kind.lower()},
        "spec": {
            "crd": {"spec": {"names": {"kind": kind}}},
            "targets": [
                {
                    "target": "admission.k8s.gatekeeper.sh",
                    "code": [{"engine": "K8sNativeValidation", "source": source}],
                }
            ],
        },
    }


def constraint(kind: str, name: str = "c", **spec: Any) -> dict[str, Any]:
    return b.constraint(kind, name, match={"kinds": [{"apiGroups": [""], "kinds": ["Pod"]}]}, **spec)


def evaluate(
    engine: Engine, templates: dict[str, ConstraintTemplate], request: dict[str, Any], *docs: dict[str, Any]
) -> list[ConstraintResult]:
    constraints = ConstraintSet(b.load_constraint(d, *templates.values()) for d in docs)
    return engine.evaluate(request, constraints)


def pod(**spec: Any) -> dict[str, Any]:
    found = b.pod("p", "registry/app:1", labels={"owner": "ml"})
    found["spec"].update(spec)
    return found


def escalating(image: str, allow: bool | None) -> dict[str, Any]:
    container: dict[str, Any] = {"name": "c", "image": image}
    if allow is not None:
        container["securityContext"] = {"allowPrivilegeEscalation": allow}
    return container


AGREEMENT: list[tuple[str, dict[str, Any], dict[str, Any], str]] = [
    ("host namespace clean", constraint("TestHostNamespace"), b.request(pod()), "CREATE"),
    ("hostPID", constraint("TestHostNamespace"), b.request(pod(hostPID=True)), "CREATE"),
    ("hostIPC", constraint("TestHostNamespace"), b.request(pod(hostIPC=True)), "CREATE"),
    ("hostPID on update", constraint("TestHostNamespace"), b.request(pod(hostPID=True), "UPDATE"), "UPDATE"),
    (
        "labels present",
        constraint(
            "TestRequiredLabels", parameters={"labels": [{"key": "owner", "allowedRegex": "^[a-z]+$"}]}
        ),
        b.request(pod()),
        "CREATE",
    ),
    (
        "label missing",
        constraint("TestRequiredLabels", parameters={"labels": [{"key": "owner"}, {"key": "team"}]}),
        b.request(pod()),
        "CREATE",
    ),
    (
        "label regex mismatch",
        constraint(
            "TestRequiredLabels", parameters={"labels": [{"key": "owner", "allowedRegex": "^[0-9]+$"}]}
        ),
        b.request(pod()),
        "CREATE",
    ),
    (
        "escalation allowed by default",
        constraint("TestPrivilegeEscalation"),
        b.request(pod(containers=[escalating("a:1", None), escalating("b:1", False)])),
        "CREATE",
    ),
    (
        "escalation refused explicitly",
        constraint("TestPrivilegeEscalation"),
        b.request(pod(containers=[escalating("a:1", False)])),
        "CREATE",
    ),
    (
        "exempt by prefix and by name",
        constraint("TestPrivilegeEscalation", parameters={"exemptImages": ["trusted/*", "b:1"]}),
        b.request(pod(containers=[escalating("trusted/x", True), escalating("b:1", True)])),
        "CREATE",
    ),
    (
        "exemption does not cover",
        constraint("TestPrivilegeEscalation", parameters={"exemptImages": ["trusted/*"]}),
        b.request(pod(containers=[escalating("other/x", True)])),
        "CREATE",
    ),
]


@pytest.mark.parametrize(
    ("doc", "request_", "operation"), [c[1:] for c in AGREEMENT], ids=[c[0] for c in AGREEMENT]
)
def test_cel_and_rego_agree_on_library_shaped_templates(
    doc: dict[str, Any], request_: dict[str, Any], operation: str
) -> None:
    """Both blocks of one template give the same violations (the library's templates carry both)."""
    by_cel = evaluate(CEL, TEMPLATES, request_, doc)
    by_rego = evaluate(REGO, TEMPLATES, request_, doc)
    assert [r.error for r in by_cel] == [None]
    assert sorted(v.msg for v in by_cel[0].violations) == sorted(v.msg for v in by_rego[0].violations)
    assert request_["operation"] == operation


def test_a_violation_names_what_failed() -> None:
    results = evaluate(CEL, TEMPLATES, b.request(pod(hostPID=True)), constraint("TestHostNamespace"))
    assert [v.msg for v in results[0].violations] == ["Sharing the host namespace is not allowed: p"]
    assert results[0].denies


def test_with_both_blocks_cel_is_evaluated() -> None:
    """Gatekeeper registers its K8sNativeValidation driver before Rego (main.go) and documents that
    CEL has priority (website/docs/validating-admission-policy.md)."""
    assert all(t.evaluated_by_cel and t.rego is not None for t in TEMPLATES.values())
    policies = load_sources([(str(DATA), DATA.read_bytes())])
    assert isinstance(policies.engine, CelEngine)


def test_rego_and_cel_templates_share_one_results_list() -> None:
    mixed = [
        ("cel.yaml", DATA.read_bytes()),
        (
            "rego.yaml",
            yaml.safe_dump(b.template("K8sAllowedRepos", b.ALLOWED_REPOS, libs=(b.IMAGES_LIB,))).encode(),
        ),
        (
            "constraints.yaml",
            yaml.safe_dump_all(
                [
                    constraint("TestHostNamespace", "host"),
                    constraint("K8sAllowedRepos", "repos", parameters={"repos": ["good/"]}),
                ]
            ).encode(),
        ),
    ]
    policies = load_sources(mixed)
    assert isinstance(policies.engine, CombinedEngine)
    assert policies.constraints is not None
    results = policies.engine.evaluate(b.request(pod(hostPID=True)), policies.constraints)
    assert sorted((r.constraint.name, bool(r.violations)) for r in results) == [
        ("host", True),
        ("repos", True),
    ]
    with pytest.raises(WouldBlock):
        policies.engine.evaluate(b.request(pod()), policies.constraints, may_block=False)


SEMANTICS: list[tuple[str, dict[str, Any], dict[str, Any], list[str], str | None]] = [
    (
        "messageExpression that fails falls back to message",
        {"validations": [{"expression": "false", "messageExpression": "object.nope", "message": " plain "}]},
        b.request(pod()),
        ["plain"],
        None,
    ),
    (
        "a multi-line messageExpression falls back to the expression",
        {"validations": [{"expression": " false ", "messageExpression": "'a\\nb'"}]},
        b.request(pod()),
        ["failed expression: false"],
        None,
    ),
    (
        "an empty messageExpression falls back to message",
        {"validations": [{"expression": "false", "messageExpression": "'  '", "message": "m"}]},
        b.request(pod()),
        ["m"],
        None,
    ),
    (
        "a false match condition skips the constraint",
        {
            # a match condition's name need not be a CEL identifier
            "matchCondition": [{"name": "needs-gpu", "expression": "has(object.metadata.labels.gpu)"}],
            "validations": [{"expression": "false"}],
        },
        b.request(pod()),
        [],
        None,
    ),
    (
        "a false match condition wins over an erroring one",
        {
            "matchCondition": [
                {"name": "broken", "expression": "object.nope == 1"},
                {"name": "gpu", "expression": "has(object.metadata.labels.gpu)"},
            ],
            "validations": [{"expression": "false"}],
        },
        b.request(pod()),
        [],
        None,
    ),
    (
        "an erroring match condition fails the constraint",
        {"matchCondition": [{"name": "broken", "expression": "object.nope == 1"}], "validations": []},
        b.request(pod()),
        [],
        "matchCondition 'broken': no such key: nope",
    ),
    (
        "a runtime error fails the constraint under failurePolicy Fail",
        {"validations": [{"expression": "object.spec.nope == 1"}, {"expression": "false", "message": "m"}]},
        b.request(pod()),
        ["m"],
        "expression 'object.spec.nope == 1' resulted in error: no such key: nope",
    ),
    (
        "a runtime error is dropped under failurePolicy Ignore",
        {"failurePolicy": "Ignore", "validations": [{"expression": "object.spec.nope == 1"}]},
        b.request(pod()),
        [],
        None,
    ),
    (
        "a result that is not true is a violation",
        {"validations": [{"expression": "dyn('yes')", "message": "m"}]},
        b.request(pod()),
        ["m"],
        None,
    ),
    (
        "on DELETE object is null and anyObject is the old object",
        {
            "validations": [
                {"expression": "object == null", "message": "object is set"},
                {
                    "expression": "variables.anyObject.metadata.name != 'p'",
                    "message": "anyObject is the old object",
                },
            ]
        },
        b.request(None, "DELETE", old=pod()),
        ["anyObject is the old object"],
        None,
    ),
    (
        "params is the constraint's parameters, in variables only",
        {
            "variables": [{"name": "wanted", "expression": "variables.params.owner"}],
            "validations": [
                {"expression": "object.metadata.labels.owner == variables.wanted", "message": "m"}
            ],
        },
        b.request(pod()),
        [],
        None,
    ),
    (
        "request is the AdmissionRequest without its objects",
        {"validations": [{"expression": "request.userInfo.username == 'alice' && !has(request.object)"}]},
        b.request(pod()),
        [],
        None,
    ),
    (
        "a variable is evaluated once even when it fails",
        {
            "variables": [{"name": "broken", "expression": "object.nope"}],
            "validations": [{"expression": "true || variables.broken"}, {"expression": "variables.broken"}],
        },
        b.request(pod()),
        [],
        "expression 'variables.broken' resulted in error: no such key: nope",
    ),
]


@pytest.mark.parametrize(
    ("source", "request_", "messages", "error"), [c[1:] for c in SEMANTICS], ids=[c[0] for c in SEMANTICS]
)
def test_validation_semantics(
    source: dict[str, Any], request_: dict[str, Any], messages: list[str], error: str | None
) -> None:
    template = parse_template(cel_template(source), Where("t.yaml"))
    engine = CelEngine([template])
    (result,) = evaluate(
        engine, {template.kind: template}, request_, constraint("TestCel", parameters={"owner": "ml"})
    )
    assert [v.msg for v in result.violations] == messages
    assert result.error == error


def test_enforcement_actions_and_the_failure_annotation_apply_as_for_rego() -> None:
    template = parse_template(cel_template({"validations": [{"expression": "object.nope"}]}), Where("t.yaml"))
    engine, templates = CelEngine([template]), {template.kind: template}
    ignored = constraint("TestCel", "ignored", annotations={"gpu-webhook.io/failure-policy": "Ignore"})
    warned = constraint("TestCel", "warned", action="warn")
    results = {r.constraint.name: r for r in evaluate(engine, templates, b.request(pod()), ignored, warned)}
    assert results["ignored"].error is not None and not results["ignored"].denies
    assert results["warned"].error is not None and not results["warned"].denies
    (failing,) = evaluate(engine, templates, b.request(pod()), constraint("TestCel"))
    assert failing.denies


PROBLEMS: list[tuple[str, Any, str, str]] = [
    (
        "syntax error",
        {"validations": [{"expression": "object.x =="}]},
        "validations[0].expression",
        "CEL: syntax error",
    ),
    (
        "unknown function",
        {"validations": [{"expression": "url(object.x) != null"}]},
        "validations[0].expression",
        "url() is not supported",
    ),
    (
        "params outside variables",
        {"validations": [{"expression": "params.x == 1"}]},
        "validations[0].expression",
        "undeclared reference to 'params'",
    ),
    (
        "a variable declared later",
        {"variables": [{"name": "a", "expression": "variables.b"}, {"name": "b", "expression": "1"}]},
        "variables[0].expression",
        "undefined field 'b' of variables",
    ),
    (
        "a validation that is not a bool",
        {"validations": [{"expression": "'text'"}]},
        "validations[0].expression",
        "must evaluate to bool",
    ),
    (
        "a messageExpression that is not a string",
        {"validations": [{"expression": "true", "messageExpression": "1"}]},
        "validations[0].messageExpression",
        "must evaluate to string",
    ),
    (
        "reserved variable",
        {"variables": [{"name": "anyObject", "expression": "1"}]},
        "variables[0].name",
        "already",
    ),
    (
        "reserved prefix",
        {"matchCondition": [{"name": "gatekeeper_internal_x", "expression": "true"}]},
        "matchCondition[0].name",
        "reserves",
    ),
    ("the field name of match conditions", {"matchConditions": []}, "matchConditions", "matchCondition"),
    ("failure policy", {"failurePolicy": "Sometimes"}, "failurePolicy", "Fail, Ignore"),
    ("no expression", {"validations": [{"message": "m"}]}, "validations[0].expression", "non-empty"),
    ("not a mapping", ["x"], "", "must be a mapping"),
]


@pytest.mark.parametrize(
    ("source", "path", "reason"), [c[1:] for c in PROBLEMS], ids=[c[0] for c in PROBLEMS]
)
def test_bad_sources_are_problems_with_file_line_and_reason(source: Any, path: str, reason: str) -> None:
    text = yaml.safe_dump(cel_template(source), sort_keys=False).encode()
    with pytest.raises(PolicyError) as caught:
        load_sources([("policies/t.yaml", text)])
    (problem,) = caught.value.problems
    assert problem.file == "policies/t.yaml"
    assert problem.path == "spec.targets[0].code[0].source" + ("." + path if path else "")
    assert problem.line > 1
    assert reason in problem.reason


def test_suites_run_cel_templates(tmp_path: Path) -> None:
    """`gpu-webhook test` runs Gatekeeper Suites with CEL templates through the same engines."""
    from webhook.policy import suite

    (tmp_path / "template.yaml").write_text(yaml.safe_dump(DOCUMENTS[0]))
    (tmp_path / "constraint.yaml").write_text(yaml.safe_dump(constraint("TestHostNamespace")))
    (tmp_path / "good.yaml").write_text(yaml.safe_dump(pod()))
    (tmp_path / "bad.yaml").write_text(yaml.safe_dump(pod(hostPID=True)))
    document = {
        "apiVersion": suite.SUITE_API_VERSION,
        "kind": "Suite",
        "metadata": {"name": "s"},
        "tests": [
            {
                "name": "host",
                "template": "template.yaml",
                "constraint": "constraint.yaml",
                "cases": [
                    {"name": "good", "object": "good.yaml", "assertions": [{"violations": "no"}]},
                    {"name": "bad", "object": "bad.yaml", "assertions": [{"violations": 1}]},
                ],
            }
        ],
    }
    (tmp_path / "suite.yaml").write_text(yaml.safe_dump(document))
    report = suite.run_paths([tmp_path])
    assert [(r.case, r.passed) for r in report.results] == [("good", True), ("bad", True)]


def test_with_cel_leaves_rego_only_templates_to_the_factory() -> None:
    rego_only = b.load_template(b.template("K8sAllowedRepos", b.ALLOWED_REPOS, libs=(b.IMAGES_LIB,)))
    built = with_cel(lambda templates, constraints: RegoEngine.compile(templates))([rego_only], [])
    assert isinstance(built, RegoEngine)
