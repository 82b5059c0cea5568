"""The same cases on both engines: regopy in process, and OPA's REST API (a fake that delegates to regopy)."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

import pytest

from tests.support.fakeopa import FakeOpa, running
from tests.validation import builders as b
from webhook.errors import PolicyError, WouldBlock
from webhook.policy.engines import ConstraintSet, Engine, plan, vet
from webhook.policy.engines.opa import OpaEngine
from webhook.policy.engines.regopy import RegoEngine
from webhook.validation.gatekeeper import ConstraintTemplate, Where, parse_template
from webhook.validation.gatekeeper_input import inventory_of
from webhook.validation.prechecks import Check, PodCreate, Precheck
from webhook.validation.results import ConstraintResult

Factory = Callable[[Sequence[ConstraintTemplate]], Engine]

REPOS = b.load_template(
    b.template("K8sAllowedRepos", b.ALLOWED_REPOS, libs=(b.IMAGES_LIB,), schema=b.REPOS_SCHEMA)
)
UNIQUE = b.load_template(b.template("K8sUniqueSelector", b.UNIQUE_SELECTOR))
CONFLICT = b.load_template(b.template("K8sConflict", b.CONFLICT))
TEMPLATES = [REPOS, UNIQUE, CONFLICT]


@pytest.fixture(scope="module")
def fake_opa() -> Iterator[FakeOpa]:
    with running() as opa:
        yield opa


@pytest.fixture(params=["regopy", "opa"])
def compile_engine(request: pytest.FixtureRequest, fake_opa: FakeOpa) -> Factory:
    if request.param == "regopy":
        return RegoEngine.compile
    return lambda templates: OpaEngine.connect(templates, fake_opa.settings())


def repos(name: str = "trusted", *, action: str | None = None, **parameters: Any) -> dict[str, Any]:
    match = {"kinds": [{"apiGroups": [""], "kinds": ["Pod"]}], "excludedNamespaces": ["kube-*"]}
    return b.constraint(
        "K8sAllowedRepos", name, parameters=parameters or {"repos": ["good/"]}, match=match, action=action
    )


def evaluate(
    engine: Engine, obj: dict[str, Any], *docs: dict[str, Any], inventory: dict[str, Any] | None = None
) -> dict[str, ConstraintResult]:
    constraints = ConstraintSet(b.load_constraint(d, *TEMPLATES) for d in docs)
    results = engine.evaluate(b.request(obj), constraints, inventory)
    return {r.constraint.name: r for r in results}


CASES: list[tuple[str, dict[str, Any], list[str]]] = [
    ("compliant", b.pod("p", "good/app"), []),
    ("one bad container", b.pod("p", "good/app", "evil/miner"), ["c1"]),
    ("all bad", b.pod("p", "evil/a", "evil/b"), ["c0", "c1"]),
    ("exempt image", b.pod("p", "evil/allowed"), []),
]


@pytest.mark.parametrize(("obj", "containers"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_violations_name_the_containers(
    compile_engine: Factory, obj: dict[str, Any], containers: list[str]
) -> None:
    engine = compile_engine(TEMPLATES)
    result = evaluate(engine, obj, repos(exemptImages=["evil/allowed"], repos=["good/"]))["trusted"]
    assert result.error is None
    assert sorted(v.details["container"] for v in result.violations) == containers
    assert all(v.msg.startswith("container <") for v in result.violations)
    assert result.denies is bool(containers)


def test_each_constraint_gets_its_own_parameters(compile_engine: Factory) -> None:
    engine = compile_engine(TEMPLATES)
    results = evaluate(engine, b.pod("p", "good/app"), repos("strict", repos=["other/"]), repos("lenient"))
    assert len(results["strict"].violations) == 1
    assert results["lenient"].violations == ()


@pytest.mark.parametrize(
    ("action", "denies"), [("deny", True), ("warn", False), ("dryrun", False), (None, True)]
)
def test_enforcement_action_decides_whether_a_violation_denies(
    compile_engine: Factory, action: str | None, denies: bool
) -> None:
    engine = compile_engine(TEMPLATES)
    result = evaluate(engine, b.pod("p", "evil/x"), repos(action=action))["trusted"]
    assert len(result.violations) == 1
    assert result.action == (action or "deny")
    assert result.denies is denies


@pytest.mark.parametrize(
    "obj",
    [
        b.pod("p", "evil/x", namespace="kube-system"),
        b.service("s", {"app": "x"}),
    ],
    ids=["excluded namespace glob", "kind not matched"],
)
def test_constraints_that_do_not_match_are_not_evaluated(
    compile_engine: Factory, obj: dict[str, Any]
) -> None:
    engine = compile_engine(TEMPLATES)
    assert evaluate(engine, obj, repos()) == {}


@pytest.mark.parametrize(("others", "expected"), [([], 0), ([b.service("old", {"app": "web"})], 1)])
def test_inventory_is_gatekeepers_data_inventory(
    compile_engine: Factory, others: list[dict[str, Any]], expected: int
) -> None:
    engine = compile_engine(TEMPLATES)
    doc = b.constraint("K8sUniqueSelector", "unique")
    inventory = inventory_of(others)
    result = evaluate(engine, b.service("new", {"app": "web"}), doc, inventory=inventory)["unique"]
    assert len(result.violations) == expected
    assert all("<old>" in v.msg for v in result.violations)


def test_a_runtime_error_fails_only_that_constraint_and_fails_closed(compile_engine: Factory) -> None:
    engine = compile_engine(TEMPLATES)
    results = evaluate(engine, b.pod("p", "evil/x"), b.constraint("K8sConflict", "broken"), repos())
    broken = results["broken"]
    assert broken.error is not None
    assert "broken" in broken.messages()[0]
    assert broken.denies
    assert len(results["trusted"].violations) == 1


def test_a_failing_constraint_annotated_ignore_does_not_deny(compile_engine: Factory) -> None:
    engine = compile_engine(TEMPLATES)
    doc = b.constraint("K8sConflict", "lenient", annotations={"gpu-webhook.io/failure-policy": "Ignore"})
    result = evaluate(engine, b.pod("p", "good/x"), doc)["lenient"]
    assert result.error is not None
    assert result.error_ignored
    assert not result.denies


SELECTOR = {"namespaceSelector": {"matchLabels": {"gpu": "on"}}}


@pytest.mark.parametrize(
    ("labels", "evaluated", "error"),
    [({"gpu": "on"}, True, False), ({"gpu": "off"}, False, False), (None, True, True)],
    ids=["labels match", "labels differ", "namespace unknown"],
)
def test_namespace_selector_reads_namespace_labels_from_the_inventory(
    compile_engine: Factory, labels: dict[str, str] | None, evaluated: bool, error: bool
) -> None:
    engine = compile_engine(TEMPLATES)
    namespaces = (
        []
        if labels is None
        else [{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team-a", "labels": labels}}]
    )
    doc = b.constraint("K8sAllowedRepos", "selected", parameters={"repos": ["good/"]}, match=SELECTOR)
    results = evaluate(engine, b.pod("p", "evil/x"), doc, inventory=inventory_of(namespaces))
    assert ("selected" in results) is evaluated
    if evaluated:
        assert (results["selected"].error is not None) is error
        assert results["selected"].denies


def test_delete_reviews_the_old_object(compile_engine: Factory) -> None:
    engine = compile_engine(TEMPLATES)
    constraints = ConstraintSet([b.load_constraint(repos(), *TEMPLATES)])
    results = engine.evaluate(b.request(None, "DELETE", old=b.pod("p", "evil/x")), constraints)
    assert len(results[0].violations) == 1


BROKEN = [
    ('package k8sbroken\nviolation[{"msg": m}] {\n  m :=\n}\n', 4, "unexpected '}'"),
    ('package k8sbroken\nviolation[{"msg": m}] {\n  m := if\n}\n', 3, ""),
    ('package k8sbroken\nviolation[{"msg": m}] {\n  m := no_such_function(1)\n}\n', 3, "unknown function"),
    ("package k8sbroken\nallowed { true }\n", 1, "defines no violation rule"),
]


@pytest.mark.parametrize(
    ("rego", "rego_line", "reason"), BROKEN, ids=["syntax", "keyword", "function", "shape"]
)
def test_regopy_compile_errors_name_file_and_line(rego: str, rego_line: int, reason: str) -> None:
    template = parse_template(b.template("K8sBroken", rego), Where("broken.yaml", _rego_at_line_10))
    with pytest.raises(PolicyError) as info:
        RegoEngine.compile([REPOS, template])
    [problem] = info.value.problems
    assert (problem.file, problem.path) == ("broken.yaml", "spec.targets[0].rego")
    assert problem.line == 10 + rego_line
    assert reason in problem.reason


def test_opa_rejections_name_file_and_line(fake_opa: FakeOpa) -> None:
    rego = 'package k8sbroken\n\nviolation[{"msg": m}] {\n  m := if\n}\n'
    template = parse_template(b.template("K8sBroken", rego), Where("broken.yaml", _rego_at_line_10))
    with pytest.raises(PolicyError) as info:
        OpaEngine.connect([template], fake_opa.settings())
    assert [(p.file, p.line) for p in info.value.problems] == [("broken.yaml", 14)]


def _rego_at_line_10(path: str) -> int:
    """`rego: |` on line 10, so the Rego's first line is line 11."""
    return 10 if path.endswith(".rego") else 1


def test_isolated_compile_turns_a_regopy_crash_into_a_problem() -> None:
    crashing = b.template("K8sCrash", b.CRASHES_REGOPY, libs=(b.CRASHES_REGOPY_LIB,))
    template = parse_template(crashing, Where("crash.yaml", _rego_at_line_10))
    with pytest.raises(PolicyError) as info:
        RegoEngine.compile([REPOS, template], isolated=True)
    [problem] = info.value.problems
    assert (problem.file, problem.line) == ("crash.yaml", 11)
    assert "regopy crashed" in problem.reason


def test_workers_skip_the_crash_check_their_supervisor_made(monkeypatch: pytest.MonkeyPatch) -> None:
    crashing = parse_template(
        b.template("K8sCrash", b.CRASHES_REGOPY, libs=(b.CRASHES_REGOPY_LIB,)),
        Where("crash.yaml", _rego_at_line_10),
    )
    monkeypatch.setattr(vet, "_vetted", set())
    monkeypatch.setenv(vet.VETTED_ENV, "")
    RegoEngine.compile([REPOS], isolated=True)  # the supervisor's check, in a child process
    vet.share_with_workers()
    monkeypatch.setattr(vet, "_vetted", set())  # a worker: a new process, with its environment
    children: list[str] = []
    real_child = vet._run_child

    def counted_child(payload: str, timeout: float) -> Any:
        children.append(payload)
        return real_child(payload, timeout)

    monkeypatch.setattr(vet, "_run_child", counted_child)
    RegoEngine.compile([REPOS], isolated=True)
    assert children == []
    with pytest.raises(PolicyError, match="regopy crashed"):  # any other set is still checked
        RegoEngine.compile([REPOS, crashing], isolated=True)
    assert len(children) == 1


@pytest.mark.parametrize(("fail_open", "denies"), [(False, True), (True, False)])
def test_unreachable_opa_follows_the_fail_setting(fail_open: bool, denies: bool) -> None:
    with running() as opa:
        engine = OpaEngine.connect(TEMPLATES, opa.settings(retries=0, fail_open=fail_open))
    [result] = engine.evaluate(
        b.request(b.pod("p", "good/x")), ConstraintSet([b.load_constraint(repos(), *TEMPLATES)])
    )
    assert result.error is not None
    assert "unreachable" in result.error
    assert result.denies is denies


@pytest.mark.parametrize(
    "metadata",
    [True, ["a"], "name", {"labels": True}, {"labels": {"app": 1}}, {"name": None, "labels": None}],
    ids=["bool", "list", "string", "labels bool", "label value int", "nulls"],
)
def test_malformed_metadata_is_still_judged(compile_engine: Factory, metadata: Any) -> None:
    request = b.request(b.pod("p", "evil/miner"))
    request["object"]["metadata"] = metadata
    constraints = ConstraintSet([b.load_constraint(repos(), *TEMPLATES)])
    (result,) = compile_engine(TEMPLATES).evaluate(request, constraints)
    assert [v.details["container"] for v in result.violations] == ["c0"]


@pytest.mark.parametrize(
    ("obj", "blocks"),
    [(b.pod("p", "good/app"), True), (b.pod("p", "evil/x", namespace="kube-system"), False)],
    ids=["needs rego", "nothing matches"],
)
def test_an_engine_that_may_not_block_answers_only_what_needs_no_rego(
    compile_engine: Factory, obj: dict[str, Any], blocks: bool
) -> None:
    engine = compile_engine(TEMPLATES)
    constraints = ConstraintSet([b.load_constraint(repos(), *TEMPLATES)])
    if blocks:
        with pytest.raises(WouldBlock):
            engine.evaluate(b.request(obj), constraints, may_block=False)
    else:
        assert engine.evaluate(b.request(obj), constraints, may_block=False) == []


def _broken_check(pod: PodCreate) -> bool:
    raise KeyError("a bug in a precheck")


def _broken_reading(parameters: Mapping[str, Any]) -> Check | None:
    raise KeyError("a bug in a precheck's reading of its parameters")


@pytest.mark.parametrize(
    ("precheck", "to_rego"),
    [
        (Precheck(lambda parameters: lambda pod: True), False),
        (Precheck(lambda parameters: lambda pod: False), True),
        (Precheck(lambda parameters: _broken_check), True),
        (Precheck(lambda parameters: None), True),
        (Precheck(_broken_reading), True),
    ],
    ids=["clears", "unsure", "raises", "parameters it cannot read", "raises on its parameters"],
)
def test_a_precheck_settles_a_constraint_only_by_saying_clean(precheck: Precheck, to_rego: bool) -> None:
    constraint = b.load_constraint(repos(), *TEMPLATES)
    request = {**b.request(b.pod("p", "good/app")), "oldObject": None}
    work = plan(
        request, ConstraintSet([constraint]), None, {t.kind: t for t in TEMPLATES}, {REPOS.kind: precheck}
    )
    assert (work.by_kind == {REPOS.kind: [constraint]}) is to_rego
    assert work.decided == ([] if to_rego else [ConstraintResult(constraint)])
