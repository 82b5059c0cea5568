"""A new user's first commands, run from a directory that is not the checkout."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.conftest import BUNDLED_POLICIES
from tests.support.cli import gpu_webhook
from tests.support.policies import TEAM_EXCLUSIVE as SHARING
from tests.support.policies import TEAM_QUOTA as QUOTA

CAPABILITIES = BUNDLED_POLICIES / "security" / "gpu-capabilities" / "constraint.yaml"


def pod(name: str = "trainer", namespace: str = "prod", **security: Any) -> dict[str, Any]:
    container: dict[str, Any] = {
        "name": "main",
        "image": "registry.example.com/train:1",
        "resources": {"limits": {"nvidia.com/gpu": "1"}},
    }
    if security:
        container["securityContext"] = security
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"containers": [container]},
    }


@pytest.fixture
def elsewhere(tmp_path: Path) -> Path:
    """A working directory with no policies/ in it, and a privileged GPU pod to review."""
    (tmp_path / "privileged.yaml").write_text(yaml.safe_dump(pod(privileged=True)))
    team = tmp_path / "team"
    team.mkdir()
    (team / "sharing.yaml").write_text(SHARING)
    return tmp_path


def test_review_enforces_the_bundle_without_a_policies_directory(elsewhere: Path) -> None:
    result = gpu_webhook("review", "privileged.yaml", cwd=elsewhere)
    assert result.returncode == 1 and "Pod prod/trainer: DENIED" in result.stdout
    assert "policies in force: the security bundle\n" in result.stderr


def test_policies_add_to_the_bundle(elsewhere: Path) -> None:
    result = gpu_webhook("review", "privileged.yaml", "--policies", "team", cwd=elsewhere)
    assert result.returncode == 1 and "gpu-no-privileged-containers" in result.stdout
    assert "policies in force: the security bundle + team\n" in result.stderr


def test_no_bundle_is_the_explicit_way_out(elsewhere: Path) -> None:
    result = gpu_webhook("review", "privileged.yaml", "--policies", "team", "--no-bundle", cwd=elsewhere)
    assert result.returncode == 0 and "Pod prod/trainer: allowed" in result.stdout
    assert "policies in force: team\n" in result.stderr


@pytest.mark.parametrize(
    "command",
    [
        ("scan", "--inventory", "privileged.yaml"),
        ("quota", "status", "--inventory", "privileged.yaml"),
        ("dra", "templates", "--namespace", "team"),
    ],
)
def test_other_commands_run_on_the_bundle_too(elsewhere: Path, command: tuple[str, ...]) -> None:
    result = gpu_webhook(*command, cwd=elsewhere)
    assert "does not exist" not in result.stderr and "Traceback" not in result.stderr
    assert "the security bundle" in result.stderr
    assert result.returncode in (0, 1), result.stderr


def test_policies_check_takes_a_file(elsewhere: Path) -> None:
    result = gpu_webhook("policies", "check", "team/sharing.yaml", "--no-bundle", cwd=elsewhere)
    assert result.returncode == 0, result.stderr
    assert result.stdout == (
        "team/sharing.yaml: 1 GPU sharing policy, 0 GPU quotas, 0 constraints of 0 templates; "
        f"version {result.stdout.split('version ')[1].split(':')[0]}: OK\n"
    )


def test_policies_check_names_every_kind_it_found(elsewhere: Path) -> None:
    quotas = elsewhere / "quotas"
    quotas.mkdir()
    (quotas / "quota.yaml").write_text(QUOTA)
    alone = gpu_webhook("policies", "check", "quotas", "--no-bundle", cwd=elsewhere)
    assert "quotas: 0 GPU sharing policies, 1 GPU quota, 0 constraints of 0 templates;" in alone.stdout
    bundled = gpu_webhook("policies", "check", "quotas", cwd=elsewhere)
    assert (
        "the security bundle + quotas: 0 GPU sharing policies, 1 GPU quota, 13 constraints" in bundled.stdout
    )


LISTS = [
    ("a List", {"apiVersion": "v1", "kind": "List", "items": [pod("a"), pod("b")]}, ["prod/a", "prod/b"]),
    ("a YAML sequence", [pod("a"), pod("b")], ["prod/a", "prod/b"]),
    ("a PodList", {"apiVersion": "v1", "kind": "PodList", "items": [pod("a")]}, ["prod/a"]),
]


@pytest.mark.parametrize(("case", "document", "names"), LISTS, ids=[c[0] for c in LISTS])
def test_review_reads_every_item_of_a_list(
    elsewhere: Path, case: str, document: Any, names: list[str]
) -> None:
    (elsewhere / "list.yaml").write_text(yaml.safe_dump(document))
    result = gpu_webhook("review", "list.yaml", cwd=elsewhere)
    assert result.returncode == 0, result.stderr
    assert [line.split(": ")[0] for line in result.stdout.splitlines() if line.startswith("Pod ")] == [
        f"Pod {name}" for name in names
    ]


MISTAKES = [
    ("no kind", "apiVersion: v1\nmetadata: {name: a}\n", "list.yaml: document 1 has no kind"),
    ("a kind in an item", "kind: List\nitems: [{metadata: {name: a}}]\n", "document 1, items[0] has no kind"),
    ("a scalar", "just some text\n", "list.yaml: document 1 is a str, not a Kubernetes object"),
    ("an empty List", "apiVersion: v1\nkind: List\nitems: []\n", "a List without items"),
    ("the second document", "kind: Pod\nmetadata: {name: a}\n---\n42\n", "document 2 is a int"),
]


@pytest.mark.parametrize(("case", "text", "message"), MISTAKES, ids=[c[0] for c in MISTAKES])
def test_review_names_what_is_not_an_object(elsewhere: Path, case: str, text: str, message: str) -> None:
    (elsewhere / "list.yaml").write_text(text)
    result = gpu_webhook("review", "list.yaml", cwd=elsewhere)
    assert result.returncode == 2 and not result.stdout
    assert message in result.stderr and len(result.stderr.splitlines()) == 1


def test_review_namespace_moves_the_object_for_every_rule(elsewhere: Path) -> None:
    """A constraint's excludedNamespaces judges the namespace the output names, not the manifest's."""
    excluding = CAPABILITIES.read_text().replace("    - kube-system\n", "    - kube-system\n    - sandbox\n")
    (elsewhere / "team" / "capabilities.yaml").write_text(excluding)
    capable = pod(capabilities={"add": ["SYS_ADMIN"]})
    (elsewhere / "capable.yaml").write_text(yaml.safe_dump(capable))
    at_home = gpu_webhook("review", "capable.yaml", "--policies", "team", cwd=elsewhere)
    assert at_home.returncode == 1 and "gpu-no-host-capabilities" in at_home.stdout
    moved = gpu_webhook(
        "review", "capable.yaml", "--policies", "team", "--namespace", "sandbox", cwd=elsewhere
    )
    assert moved.returncode == 0, moved.stdout
    assert moved.stdout.startswith("Pod sandbox/trainer: allowed")
