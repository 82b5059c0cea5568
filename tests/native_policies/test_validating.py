"""ValidatingAdmissionPolicy through review(): each rule cites the kube-apiserver file it follows
(kubernetes/kubernetes staging/src/k8s.io/apiserver/pkg/admission/plugin/policy/...)."""

from __future__ import annotations

import orjson
import pytest

from tests.native_policies.support import bundled, deployment, deps, policies, request
from webhook.review import review

POLICY = """
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata: {name: p.example.com}
spec:
  failurePolicy: FAILURE
  matchConstraints:
    resourceRules:
      - {apiGroups: [apps], apiVersions: [v1], operations: [CREATE, UPDATE], resources: [deployments]}
  validations:
    - expression: EXPRESSION
      message: too many replicas
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata: {name: b.example.com}
spec:
  policyName: p.example.com
  validationActions: ACTIONS
"""


def policy(
    expression: str = "object.spec.replicas <= 5", actions: str = "[Deny]", failure: str = "Fail"
) -> str:
    return (
        POLICY.replace("EXPRESSION", repr(expression)).replace("ACTIONS", actions).replace("FAILURE", failure)
    )


@pytest.mark.parametrize(
    ("replicas", "namespace", "allowed"),
    [(5, "test", True), (6, "test", False), (6, "plain", True), (50, "params-free", True)],
    ids=["at-limit", "over-limit", "binding-namespace-not-selected", "unlabelled-namespace"],
)
def test_documented_replica_policy(replicas: int, namespace: str, allowed: bool) -> None:
    """The documentation's demo-policy.example.com, bound to environment=test namespaces only
    (matching.go: the binding's matchResources intersects the policy's matchConstraints)."""
    decision = review(request(deployment(replicas, namespace)), "validate", deps(bundled()))
    assert decision.allowed is allowed


def test_denial_reads_as_kube_apiserver_words_it() -> None:
    """validating/dispatcher.go and validator.go: the default message is the failed expression,
    and the default reason Invalid gives 422."""
    decision = review(request(deployment(6)), "validate", deps(bundled()))
    assert decision.code == 422
    assert decision.message == (
        "[demo-policy.example.com] ValidatingAdmissionPolicy 'demo-policy.example.com' with binding "
        "'demo-binding-test.example.com' denied request: failed expression: object.spec.replicas <= 5"
    )


@pytest.mark.parametrize(
    ("replicas", "allowed", "annotation"),
    [(3, True, None), (4, False, "Deployment spec.replicas set to 4")],
    ids=["within-param-limit", "over-param-limit"],
)
def test_param_limit(replicas: int, allowed: bool, annotation: str | None) -> None:
    """paramKind + paramRef (generic/policy_dispatcher.go CollectParams): the ConfigMap in the
    request's namespace; messageExpression, reason Forbidden (403) and an audit annotation named
    policy/key (dispatcher.go auditAnnotationCollector)."""
    decision = review(request(deployment(replicas, "params")), "validate", deps(bundled()))
    assert decision.allowed is allowed
    assert decision.audit_annotations.get("replicalimit-policy.example.com/high-replica-count") == annotation
    if not allowed:
        assert decision.code == 403
        assert decision.message.endswith("denied request: object.spec.replicas must be no greater than 3")


def test_missing_param_with_deny_action() -> None:
    """parameterNotFoundAction Deny: 'no params found' is a configuration error, and
    failurePolicy Fail denies it."""
    decision = review(request(deployment(1, "params")), "validate", deps(bundled(), params=()))
    assert not decision.allowed
    assert "no params found for policy binding with `Deny` parameterNotFoundAction" in decision.message


def test_unknown_param_kind_follows_failure_policy() -> None:
    """No source of params at all (a server without an inventory): the paramKind is not known."""
    base = deps(bundled())
    decision = review(
        request(deployment(1, "params")),
        "validate",
        base.__class__(**{**base.__dict__, "native_params": None}),
    )
    assert not decision.allowed
    assert "not known" in decision.message


@pytest.mark.parametrize(
    ("actions", "allowed", "warned", "audited"),
    [
        ("[Deny]", False, False, False),
        ("[Warn]", True, True, False),
        ("[Audit]", True, False, True),
        ("[Warn, Audit]", True, True, True),
        ("[Deny, Audit]", False, False, True),
    ],
)
def test_validation_actions(actions: str, allowed: bool, warned: bool, audited: bool) -> None:
    """dispatcher.go: each action of the binding applies to a failed validation."""
    decision = review(request(deployment(9)), "validate", deps(policies(policy(actions=actions))))
    assert decision.allowed is allowed
    assert any("too many replicas" in w for w in decision.warnings) is warned
    failure = decision.audit_annotations.get("validation.policy.admission.k8s.io/validation_failure")
    assert (failure is not None) is audited
    if failure is not None:
        (value,) = orjson.loads(failure)
        assert value == {
            "message": "too many replicas",
            "policy": "p.example.com",
            "binding": "b.example.com",
            "expressionIndex": 0,
            "validationActions": actions.strip("[]").split(", "),
        }


@pytest.mark.parametrize(("failure", "allowed"), [("Fail", False), ("Ignore", True)])
def test_runtime_error_follows_failure_policy(failure: str, allowed: bool) -> None:
    """validator.go: an expression that errors denies under Fail and is skipped under Ignore."""
    text = policy(expression="object.spec.missing.field > 1", failure=failure)
    decision = review(request(deployment(1)), "validate", deps(policies(text)))
    assert decision.allowed is allowed


@pytest.mark.parametrize(
    ("operation", "resource_rule", "matched"),
    [
        (
            "CREATE",
            "{apiGroups: [apps], apiVersions: [v1], operations: [CREATE], resources: [deployments]}",
            True,
        ),
        (
            "UPDATE",
            "{apiGroups: [apps], apiVersions: [v1], operations: [CREATE], resources: [deployments]}",
            False,
        ),
        ("CREATE", "{apiGroups: ['*'], apiVersions: ['*'], operations: ['*'], resources: ['*']}", True),
        (
            "CREATE",
            "{apiGroups: [apps], apiVersions: [v1beta2], operations: [CREATE], resources: [deployments]}",
            True,
        ),
        (
            "CREATE",
            "{apiGroups: [apps], apiVersions: [v1], operations: [CREATE], resources: [deployments/scale]}",
            False,
        ),
        ("CREATE", "{apiGroups: [apps], apiVersions: [v1], operations: [CREATE], resources: ['*/*']}", True),
        (
            "CREATE",
            "{apiGroups: [apps], apiVersions: [v1], operations: [CREATE], resources: [deployments],"
            " scope: Cluster}",
            False,
        ),
    ],
    ids=[
        "exact",
        "other-operation",
        "wildcards",
        "equivalent-version",
        "subresource-only",
        "all-subresources",
        "cluster-scope",
    ],
)
def test_resource_rules(operation: str, resource_rule: str, matched: bool) -> None:
    """predicates/rules/rules.go, and matchPolicy Equivalent (matching.go) for another version."""
    text = policy().replace(
        "{apiGroups: [apps], apiVersions: [v1], operations: [CREATE, UPDATE], resources: [deployments]}",
        resource_rule,
    )
    old = deployment(1) if operation == "UPDATE" else None
    decision = review(request(deployment(9), operation, old), "validate", deps(policies(text)))
    assert decision.allowed is not matched


def test_exclude_rules_win() -> None:
    text = policy().replace(
        "  validations:",
        "    excludeResourceRules:\n"
        "      - {apiGroups: [apps], apiVersions: [v1], operations: [CREATE], resources: [deployments]}\n"
        "  validations:",
    )
    assert review(request(deployment(9)), "validate", deps(policies(text))).allowed


@pytest.mark.parametrize(
    ("condition", "allowed"), [("true", False), ("false", True), ("object.nope.x", False)]
)
def test_match_conditions(condition: str, allowed: bool) -> None:
    """A false condition skips the policy; an error (none false) follows failurePolicy Fail."""
    text = policy().replace(
        "  validations:", f"  matchConditions:\n    - {{name: c, expression: {condition!r}}}\n  validations:"
    )
    assert review(request(deployment(9)), "validate", deps(policies(text))).allowed is allowed
