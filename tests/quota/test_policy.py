"""The GPUQuota parser: good documents, and every problem named with file, line and field path."""

from __future__ import annotations

from fractions import Fraction
from pathlib import Path
from typing import Any

import pytest

from tests.support.pods import quota_doc
from webhook.errors import PolicyError
from webhook.policy.quota_files import load_quotas, quotas_from_text
from webhook.quota.policy import parse_quota

GOOD = """\
apiVersion: gpuwebhook.io/v1alpha1
kind: GPUQuota
metadata: {name: ml-team}
spec:
  match:
    namespaces: ["ml-team", "ml-*"]
    excludedNamespaces: [ml-sandbox]
    namespaceSelector: {matchLabels: {team: ml}}
  limits:
    gpus: 8
    gpuMemory: 320Gi
    resources: {nvidia.com/mig-1g.10gb: 14, nvidia.com/gpu.shared: 20}
  enforcementAction: warn
"""


def test_a_complete_quota() -> None:
    (quota,) = quotas_from_text(GOOD, "ml.yaml")
    assert quota.name == "ml-team"
    assert quota.action == "warn"
    assert quota.limits.items() == [
        ("gpus", Fraction(8)),
        ("gpuMemory", Fraction(320 * 1024)),
        ("nvidia.com/gpu.shared", Fraction(20)),
        ("nvidia.com/mig-1g.10gb", Fraction(14)),
    ]
    assert quota.applies_to("ml-team", {"team": "ml"})
    assert not quota.applies_to("ml-sandbox", {"team": "ml"})
    assert not quota.applies_to("ml-team", {"team": "web"})
    assert (quota.file, quota.line) == ("ml.yaml", 1)


def test_defaults() -> None:
    quota = parse_quota(quota_doc("q", {"gpus": "0.5"}), "f", lambda _: 0)
    assert quota.action == "deny"
    assert quota.limits.gpus == Fraction(1, 2)
    assert quota.applies_to("anything", {})
    assert quota.settings is None


def test_accounting_overrides_the_default_weights() -> None:
    doc = quota_doc(
        "q", {"gpus": 1}, accounting={"cardMemory": "40Gi", "sharedReplicas": {"example.com/vgpu": 8}}
    )
    settings = parse_quota(doc, "f", lambda _: 0).settings
    assert settings is not None
    assert settings.card_memory_mib == 40 * 1024
    assert settings.replicas("example.com/vgpu") == 8
    model = parse_quota(quota_doc("q", {"gpus": 1}, accounting={"gpuModel": "H100-94GB"}), "f", lambda _: 0)
    assert model.settings is not None and model.settings.card_memory_mib == 94 * 1024


BAD: list[tuple[dict[str, Any], str, str]] = [
    ({**quota_doc("q", {"gpus": 1}), "apiVersion": "v1"}, "apiVersion", "must be gpuwebhook.io/v1alpha1"),
    (quota_doc("Bad_Name", {"gpus": 1}), "metadata.name", "DNS name"),
    (quota_doc("q", {"gpus": -1}), "spec.limits.gpus", "negative"),
    (quota_doc("q", {"gpus": "eight"}), "spec.limits.gpus", "not a valid quantity"),
    (quota_doc("q", {"gpuMemory": "320GB"}), "spec.limits.gpuMemory", "not a valid quantity"),
    (quota_doc("q", {"gpus": 1, "cpus": 4}), "spec.limits.cpus", "unknown field"),
    (quota_doc("q", {}), "spec.limits", "at least one"),
    (quota_doc("q", {"resources": {"gpu": 1}}), "spec.limits.resources.gpu", "extended resource name"),
    (
        quota_doc("q", {"resources": {"nvidia.com/gpu": 1.5}}),
        "spec.limits.resources[nvidia.com/gpu]",
        "whole",
    ),
    (quota_doc("q", {"resources": [1]}), "spec.limits.resources", "must map"),
    (quota_doc("q", {"gpus": 1}, enforcementAction="block"), "spec.enforcementAction", "deny, warn, dryrun"),
    (quota_doc("q", {"gpus": 1}, match={"namespaces": "ml"}), "spec.match.namespaces", "list"),
    (quota_doc("q", {"gpus": 1}, match={"namespaces": ["ML"]}), "spec.match.namespaces[0]", "glob"),
    (quota_doc("q", {"gpus": 1}, match={"kinds": ["Pod"]}), "spec.match.kinds", "unknown field"),
    (
        quota_doc(
            "q",
            {"gpus": 1},
            match={"namespaceSelector": {"matchExpressions": [{"key": "a", "operator": "Is"}]}},
        ),
        "spec.match.namespaceSelector.matchExpressions[0].operator",
        "not one of",
    ),
    (quota_doc("q", {"gpus": 1}, priority=3), "spec.priority", "unknown field"),
    (
        quota_doc("q", {"gpus": 1}, accounting={"gpuModel": "T4"}),
        "spec.accounting.gpuModel",
        "unknown GPU model",
    ),
    (
        quota_doc("q", {"gpus": 1}, accounting={"sharedReplicas": {"nvidia.com/gpu": 0}}),
        "spec.accounting.sharedReplicas[nvidia.com/gpu]",
        "at least 1",
    ),
    (
        {"apiVersion": "gpuwebhook.io/v1alpha1", "kind": "GPUQuota", "metadata": {"name": "q"}},
        "spec",
        "required",
    ),
    ({**quota_doc("q", {"gpus": 1}), "status": {}}, "status", "unknown field"),
]


@pytest.mark.parametrize(("doc", "path", "words"), BAD)
def test_problems_name_the_field(doc: dict[str, Any], path: str, words: str) -> None:
    with pytest.raises(PolicyError) as info:
        parse_quota(doc, "team.yaml", lambda _: 7)
    assert [p.path for p in info.value.problems] == [path], info.value
    problem = info.value.problems[0]
    assert words in problem.reason
    assert (problem.file, problem.line) == ("team.yaml", 7)


def test_every_problem_is_reported_at_its_line(tmp_path: Path) -> None:
    text = GOOD.replace("gpus: 8", "gpus: -8").replace("enforcementAction: warn", "enforcementAction: nope")
    (tmp_path / "quota.yaml").write_text("# comment\n---\n" + text)
    with pytest.raises(PolicyError) as info:
        load_quotas(tmp_path)
    found = {(p.path, p.line) for p in info.value.problems}
    assert found == {("spec.limits.gpus", 12), ("spec.enforcementAction", 15)}
    assert str(info.value).startswith(f"{tmp_path}/quota.yaml:12: spec.limits.gpus:")


def test_a_directory_of_policies_yields_only_quotas(tmp_path: Path) -> None:
    (tmp_path / "a.yaml").write_text(
        GOOD + "---\napiVersion: gpuwebhook.io/v1alpha1\nkind: GPUSharingPolicy\n"
        "metadata: {name: shared}\nspec: {sharing: {mode: timeslice}}\n"
    )
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "b.yml").write_text(GOOD.replace("ml-team}", "other}"))
    (tmp_path / ".hidden.yaml").write_text("kind: GPUQuota\n")
    assert sorted(q.name for q in load_quotas(tmp_path)) == ["ml-team", "other"]


def test_invalid_yaml_is_located(tmp_path: Path) -> None:
    (tmp_path / "broken.yaml").write_text("kind: GPUQuota\nspec: [\n")
    with pytest.raises(PolicyError) as info:
        load_quotas(tmp_path)
    assert info.value.problems[0].reason.startswith("not valid YAML: the file ends where")
    assert info.value.problems[0].line == 3
