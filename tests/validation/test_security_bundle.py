"""The default GPU security bundle: its suites pass on both engines, and the directory holds only policies."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pytest

from tests.support.fakeopa import FakeOpa, running
from webhook.policy import suite
from webhook.policy.engines import Engine
from webhook.policy.engines.opa import OpaEngine
from webhook.validation.gatekeeper import (
    Constraint,
    ConstraintTemplate,
    Where,
    is_constraint,
    is_template,
    parse_documents,
)
from webhook.validation.yamldoc import load_documents

REPO = Path(__file__).resolve().parents[2]
BUNDLE = REPO / "policies" / "security"
SUITES = REPO / "tests" / "policies" / "security"
RULES = sorted(p.name for p in BUNDLE.iterdir() if p.is_dir())


def test_bundle_holds_one_template_and_one_constraint_per_rule() -> None:
    documents = [
        (d.value, Where(d.file, d.line_of)) for f in sorted(BUNDLE.rglob("*.yaml")) for d in load_documents(f)
    ]
    assert all(is_template(doc) or is_constraint(doc) for doc, _ in documents)
    policies = parse_documents(documents)
    assert len(policies.templates) == len(policies.constraints) == len(RULES) == 13
    assert all(c.action == "deny" for c in policies.constraints)
    # Our own namespace is left to the server's --exclude-namespaces, which knows where it runs.
    # The Namespace rule has no exclusions: an exemption must not be grantable anywhere.
    assert all(
        "kube-system" in c.match.excluded_namespaces
        for c in policies.constraints
        if c.kind != "GpuIgnoreLabel"
    )


# Rules on other kinds: Namespaces (the exemption label) and DRA claims (their device classes).
POD_RULES = [rule for rule in RULES if rule not in ("gpu-ignore-label", "gpu-dra-device-classes")]


@pytest.mark.parametrize("rule", POD_RULES)
def test_every_rule_has_a_suite_covering_pods_and_workloads(rule: str) -> None:
    kinds = {d.value["kind"] for f in (SUITES / rule / "samples").glob("*.yaml") for d in load_documents(f)}
    kinds |= {
        d.value["request"]["object"]["kind"]
        for f in (SUITES / rule / "samples").glob("*.yaml")
        for d in load_documents(f)
        if d.value["kind"] == "AdmissionReview"
    }
    assert "Pod" in kinds
    assert kinds & {"Deployment", "StatefulSet", "DaemonSet", "Job", "CronJob", "ReplicaSet"}


def _opa_factory(opa: FakeOpa) -> suite.EngineFactory:
    def factory(templates: Sequence[ConstraintTemplate], _: Sequence[Constraint]) -> Engine:
        return OpaEngine.connect(templates, opa.settings())

    return factory


@pytest.mark.parametrize("engine", ["regopy", "opa"])
def test_bundle_suites_pass(engine: str) -> None:
    if engine == "regopy":
        report = suite.run_paths([SUITES])
    else:
        with running() as opa:
            report = suite.run_paths([SUITES], _opa_factory(opa))
    failures = [f"{r.label}: {r.reason}" for r in report.results if not r.passed]
    assert failures == []
    assert report.passed >= 60
