"""Bad native policies are refused at load with file, line and reason (kube-apiserver's own
checks: kubernetes/kubernetes pkg/apis/admissionregistration/validation/validation.go)."""

from __future__ import annotations

import pytest

from tests.native_policies.support import bundled, policies
from webhook.errors import PolicyError

HEAD = """apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata:
  name: p.example.com
spec:
"""
RULES = """  matchConstraints:
    resourceRules:
      - {apiGroups: [apps], apiVersions: [v1], operations: [CREATE], resources: [deployments]}
"""


@pytest.mark.parametrize(
    ("text", "line", "reason"),
    [
        (
            HEAD + RULES + "  validations:\n    - expression: 'object.spec.replicas <='\n",
            10,
            "does not compile",
        ),
        (HEAD + "  validations:\n    - expression: 'true'\n", 5, "matchConstraints: is required"),
        (
            HEAD + RULES + "  validations:\n    - expression: 'true'\n      reason: Teapot\n",
            11,
            "must be one of",
        ),
        (
            HEAD + RULES + "  validations:\n    - expression: authorizer.group('').check('x')\n",
            10,
            "authorizer",
        ),
        (
            HEAD + RULES + "  failurePolicy: Sometimes\n  validations:\n    - expression: 'true'\n",
            9,
            "Fail, Ignore",
        ),
    ],
    ids=["cel-syntax", "no-match-constraints", "unknown-reason", "authorizer", "failure-policy"],
)
def test_bad_policy(text: str, line: int, reason: str) -> None:
    with pytest.raises(PolicyError) as raised:
        policies(text, "bad.yaml")
    (problem,) = raised.value.problems
    assert (problem.file, problem.line) == ("bad.yaml", line)
    assert reason in str(problem)


BINDING = """apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata:
  name: b.example.com
spec:
  policyName: POLICY
  validationActions: ACTIONS
"""


@pytest.mark.parametrize(
    ("policy", "actions", "line", "reason"),
    [
        ("nowhere.example.com", "[Deny]", 6, "no ValidatingAdmissionPolicy named 'nowhere.example.com'"),
        ("p.example.com", "[Deny, Warn]", 7, "Deny and Warn together"),
        ("p.example.com", "[]", 7, "is required"),
    ],
)
def test_bad_binding(policy: str, actions: str, line: int, reason: str) -> None:
    text = HEAD + RULES + "  validations:\n    - expression: 'true'\n---\n"
    binding = BINDING.replace("POLICY", policy).replace("ACTIONS", actions)
    with pytest.raises(PolicyError) as raised:
        policies(text + binding, "bad.yaml")
    (problem,) = raised.value.problems
    assert problem.line == 11 + line  # the binding starts on line 12
    assert reason in str(problem)


@pytest.mark.parametrize(
    ("patch_type", "field", "expression", "reason"),
    [
        ("ApplyConfiguration", "applyConfiguration", "{'spec': {}}", "must evaluate to Object, not map"),
        (
            "ApplyConfiguration",
            "applyConfiguration",
            "Object.spec{}",
            "must evaluate to Object, not Object.spec",
        ),
        (
            "JSONPatch",
            "jsonPatch",
            "JSONPatch{op: 'add', path: '/a'}",
            "must evaluate to list, not JSONPatch",
        ),
        ("JSONPatch", "jsonPatch", "[JSONPatch{op: 1}]", "field 'op' of JSONPatch cannot be int"),
        ("JSONPatch", "jsonPatch", "[JSONPatch{name: 'x'}]", "undefined field 'name' of JSONPatch"),
        ("JSONPatch", "jsonPatch", "[Patch{op: 'add'}]", "undeclared reference to 'Patch'"),
    ],
    ids=["map", "inner-object", "one-operation", "op-not-string", "unknown-field", "unknown-type"],
)
def test_mutation_must_construct_its_patch_type(
    patch_type: str, field: str, expression: str, reason: str
) -> None:
    """An apply configuration is an Object, a JSON patch a list of JSONPatch, with fields op,
    path and from strings (kubernetes/kubernetes staging/src/k8s.io/apiserver/pkg/admission/
    plugin/policy/mutating/patch/smd.go and json_patch.go ReturnTypes; pkg/cel/mutation/
    jsonpatch.go): anything else does not load."""
    text = f"""apiVersion: admissionregistration.k8s.io/v1beta1
kind: MutatingAdmissionPolicy
metadata: {{name: m.example.com}}
spec:
  matchConstraints:
    resourceRules:
      - {{apiGroups: [""], apiVersions: [v1], operations: [CREATE], resources: [pods]}}
  mutations:
    - patchType: {patch_type}
      {field}:
        expression: "{expression}"
"""
    with pytest.raises(PolicyError) as raised:
        policies(text, "bad.yaml")
    (problem,) = raised.value.problems
    assert (problem.line, reason in str(problem)) == (11, True), str(problem)


def test_bundled_examples_load() -> None:
    native = bundled().native
    assert [b.policy.name for b in native.validating] == [
        "demo-policy.example.com",
        "replicalimit-policy.example.com",
    ]
    assert [b.policy.name for b in native.mutating] == ["sidecar-policy.example.com"]
