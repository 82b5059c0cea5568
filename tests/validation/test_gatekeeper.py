"""Reading ConstraintTemplates and Constraints: what loads, and problems located by file, line and field."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.validation import builders as b
from webhook.errors import PolicyError
from webhook.validation.gatekeeper import Where, parse_constraint, parse_documents, parse_template
from webhook.validation.yamldoc import load_documents

TEMPLATE_YAML = """\
apiVersion: templates.gatekeeper.sh/v1beta1
kind: ConstraintTemplate
metadata:
  name: k8sgpulimit
spec:
  crd:
    spec:
      names:
        kind: K8sGpuLimit
      validation:
        openAPIV3Schema:
          type: object
          properties:
            max:
              type: integer
              minimum: 1
            resources:
              type: array
              items:
                type: string
            note:
              type: string
              nullable: true
  targets:
    - target: admission.k8s.gatekeeper.sh
      rego: |
        package k8sgpulimit

        violation[{"msg": "too many"}] {
          input.review.object.spec.containers[_].resources.limits["nvidia.com/gpu"] > input.parameters.max
        }
"""

CONSTRAINT_YAML = """\
apiVersion: constraints.gatekeeper.sh/v1beta1
kind: K8sGpuLimit
metadata:
  name: at-most-two
spec:
  enforcementAction: warn
  match:
    kinds:
      - apiGroups: [""]
        kinds: ["Pod"]
    excludedNamespaces: ["kube-*"]
  parameters:
    max: {max}
    resources: {resources}
"""


def _load(tmp_path: Path, name: str, text: str) -> tuple[dict[str, Any], Where]:
    path = tmp_path / name
    path.write_text(text)
    [doc] = load_documents(path)
    return doc.value, Where(doc.file, doc.line_of)


def test_a_template_loads_with_its_rego_located(tmp_path: Path) -> None:
    template = parse_template(*_load(tmp_path, "t.yaml", TEMPLATE_YAML))
    assert (template.kind, template.name) == ("K8sGpuLimit", "k8sgpulimit")
    assert template.rego is not None
    assert template.rego.first_line == 27  # the line after `rego: |`
    assert template.rego.path == "spec.targets[0].rego"
    assert not template.rego.v1
    assert template.schema is not None


def test_a_constraint_loads_with_its_match_and_action(tmp_path: Path) -> None:
    template = parse_template(*_load(tmp_path, "t.yaml", TEMPLATE_YAML))
    text = CONSTRAINT_YAML.format(max=2, resources='["nvidia.com/gpu"]')
    constraint = parse_constraint(*_load(tmp_path, "c.yaml", text), {template.kind: template})
    assert constraint.id == "K8sGpuLimit/at-most-two"
    assert constraint.action == "warn"
    assert constraint.match.excluded_namespaces == ("kube-*",)
    assert constraint.parameters == {"max": 2, "resources": ["nvidia.com/gpu"]}


@pytest.mark.parametrize(
    ("max_value", "resources", "path", "line"),
    [
        ("two", "[]", "spec.parameters.max", 13),
        ("0", "[]", "spec.parameters.max", 13),
        ("2", "[1]", "spec.parameters.resources[0]", 14),
        ("2", "gpu", "spec.parameters.resources", 14),
    ],
)
def test_parameter_errors_name_constraint_path_and_line(
    tmp_path: Path, max_value: str, resources: str, path: str, line: int
) -> None:
    template = parse_template(*_load(tmp_path, "t.yaml", TEMPLATE_YAML))
    text = CONSTRAINT_YAML.format(max=max_value, resources=resources)
    with pytest.raises(PolicyError) as info:
        parse_constraint(*_load(tmp_path, "c.yaml", text), {template.kind: template})
    [problem] = info.value.problems
    assert (problem.path, problem.line) == (path, line)
    assert problem.file.endswith("c.yaml")
    assert "K8sGpuLimit/at-most-two" in problem.reason and path in problem.reason


def test_nullable_and_unknown_parameters_are_accepted(tmp_path: Path) -> None:
    template = parse_template(*_load(tmp_path, "t.yaml", TEMPLATE_YAML))
    doc = b.constraint("K8sGpuLimit", "c", parameters={"max": 1, "note": None, "extra": True})
    assert parse_constraint(doc, Where("c.yaml"), {template.kind: template}).parameters["extra"] is True


def _template_with(**changes: Any) -> dict[str, Any]:
    doc = b.template("K8sThing", 'package k8sthing\nviolation[{"msg": "x"}] { true }')
    for dotted, value in changes.items():
        node: Any = doc
        keys = dotted.split("__")
        for key in keys[:-1]:
            node = node[int(key)] if key.isdigit() else node[key]
        node[keys[-1]] = value
    return doc


@pytest.mark.parametrize(
    ("changes", "path"),
    [
        ({"apiVersion": "templates.gatekeeper.sh/v2"}, "apiVersion"),
        ({"metadata__name": "other"}, "metadata.name"),
        ({"spec__crd__spec__names__kind": "not a kind"}, "spec.crd.spec.names.kind"),
        ({"spec__targets__0__target": "validation.example.com"}, "spec.targets[0].target"),
        ({"spec__targets__0__rego": None}, "spec.targets[0]"),
        ({"spec__targets": []}, "spec.targets"),
        (
            {"spec__crd__spec__validation": {"openAPIV3Schema": {"type": "banana"}}},
            "spec.crd.spec.validation",
        ),
    ],
)
def test_template_problems_name_the_field(changes: dict[str, Any], path: str) -> None:
    with pytest.raises(PolicyError) as info:
        parse_template(_template_with(**changes), Where("t.yaml"))
    assert any(p.path.startswith(path) for p in info.value.problems), info.value.problems


def test_rego_v1_is_read_from_code_source_version() -> None:
    doc = b.template("K8sThing", 'package k8sthing\nviolation contains {"msg": "x"} if true', version="v1")
    rego = parse_template(doc, Where("t.yaml")).rego
    assert rego is not None
    assert rego.v1


def test_a_cel_only_template_loads() -> None:
    """Evaluated by the CEL engine: tests/validation/test_gatekeeper_cel.py."""
    doc = _template_with(
        spec__targets=[
            {
                "target": "admission.k8s.gatekeeper.sh",
                "code": [{"engine": "K8sNativeValidation", "source": {}}],
            }
        ]
    )
    template = parse_template(doc, Where("t.yaml"))
    assert template.rego is None
    assert template.evaluated_by_cel


def test_a_template_with_neither_engine_is_refused_naming_both() -> None:
    doc = _template_with(
        spec__targets=[{"target": "admission.k8s.gatekeeper.sh", "code": [{"engine": "Other", "source": {}}]}]
    )
    with pytest.raises(PolicyError, match=r"neither a Rego source .* nor a CEL source"):
        parse_template(doc, Where("t.yaml"))


THING = parse_template(_template_with(), Where("t.yaml"))


@pytest.mark.parametrize(
    ("changes", "path"),
    [
        ({"kind": "K8sUnknown"}, "kind"),
        ({"spec": {"enforcementAction": "block"}}, "spec.enforcementAction"),
        ({"spec": {"match": {"scope": "Everything"}}}, "spec.match.scope"),
        ({"spec": {"match": {"excludedNamespaces": ["kube-*-x*"]}}}, "spec.match.excludedNamespaces[0]"),
        (
            {"spec": {"match": {"labelSelector": {"matchExpressions": [{"key": "a", "operator": "Near"}]}}}},
            "spec.match.labelSelector.matchExpressions[0].operator",
        ),
        ({"spec": {"match": {"kinds": [{"kinds": "Pod"}]}}}, "spec.match.kinds[0].kinds"),
        (
            {"metadata": {"name": "c", "annotations": {"gpu-webhook.io/failure-policy": "Maybe"}}},
            "metadata.annotations",
        ),
    ],
)
def test_constraint_problems_name_the_field(changes: dict[str, Any], path: str) -> None:
    doc = {**b.constraint("K8sThing", "c"), **changes}
    with pytest.raises(PolicyError) as info:
        parse_constraint(doc, Where("c.yaml"), {THING.kind: THING})
    assert info.value.problems[0].path.startswith(path)


def test_enforcement_action_defaults_to_deny() -> None:
    assert (
        parse_constraint(b.constraint("K8sThing", "c"), Where("c.yaml"), {THING.kind: THING}).action == "deny"
    )


def test_documents_load_templates_before_their_constraints_in_any_order() -> None:
    docs = [
        (b.constraint("K8sThing", "first"), Where("c.yaml")),
        ({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "ignored"}}, Where("cm.yaml")),
        (_template_with(), Where("t.yaml")),
    ]
    policies = parse_documents(docs)
    assert [t.kind for t in policies.templates] == ["K8sThing"]
    assert [c.id for c in policies.constraints] == ["K8sThing/first"]


def test_duplicate_templates_and_constraints_are_problems() -> None:
    docs = [
        (_template_with(), Where("t1.yaml")),
        (_template_with(), Where("t2.yaml")),
        (b.constraint("K8sThing", "c"), Where("c1.yaml")),
        (b.constraint("K8sThing", "c"), Where("c2.yaml")),
    ]
    with pytest.raises(PolicyError) as info:
        parse_documents(docs)
    assert [(p.file, "also defined in" in p.reason) for p in info.value.problems] == [
        ("t2.yaml", True),
        ("c2.yaml", True),
    ]
