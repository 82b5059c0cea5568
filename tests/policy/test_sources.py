"""Which policies are in force: the packaged bundle, the user's paths on top, and --no-bundle."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests.conftest import BUNDLED_POLICIES
from tests.support.policies import TEAM_EXCLUSIVE as SHARING
from tests.support.policies import TEAM_QUOTA as QUOTA
from webhook.bundle import ship
from webhook.errors import ConfigError, PolicyError
from webhook.policy.loader import load_directory
from webhook.policy.model import PolicySet
from webhook.policy.sources import PolicySources, bundle_directory, load_policies, resolve, watched_files

BUNDLE = BUNDLED_POLICIES / "security"


def _actions(policies: PolicySet) -> dict[str, str]:
    assert policies.constraints is not None
    return {c.name: str(c.action) for c in policies.constraints.constraints}


@pytest.fixture(scope="module")
def bundle_only() -> PolicySet:
    return load_policies(PolicySources())


def test_the_bundle_alone_is_the_packaged_directory(bundle_only: PolicySet) -> None:
    assert bundle_directory().resolve() == BUNDLE.resolve()
    assert _actions(bundle_only) == _actions(load_directory(BUNDLE))
    assert bundle_only.version == load_directory(BUNDLE).version


def test_a_team_directory_adds_to_the_bundle(tmp_path: Path, bundle_only: PolicySet) -> None:
    (tmp_path / "sharing.yaml").write_text(SHARING)
    policies = load_policies(PolicySources((tmp_path,)))
    assert [p.name for p in policies.sharing] == ["team"]
    assert _actions(policies) == _actions(bundle_only)


def test_no_bundle_leaves_only_the_paths(tmp_path: Path) -> None:
    (tmp_path / "sharing.yaml").write_text(SHARING)
    policies = load_policies(PolicySources((tmp_path,), bundle=False))
    assert [p.name for p in policies.sharing] == ["team"] and policies.constraints is None


def test_a_same_named_document_replaces_the_bundles(tmp_path: Path, bundle_only: PolicySet) -> None:
    edited = (BUNDLE / "gpu-capabilities" / "constraint.yaml").read_text()
    (tmp_path / "capabilities.yaml").write_text(
        edited.replace("enforcementAction: deny", "enforcementAction: warn")
    )
    actions = _actions(load_policies(PolicySources((tmp_path,))))
    assert actions == {**_actions(bundle_only), "gpu-no-host-capabilities": "warn"}


def test_a_copy_of_the_bundle_loads_as_that_copy_alone() -> None:
    """A checkout's policies/ (or the ConfigMap an install mounts) holds the bundle itself: the
    packaged one adds nothing, not even to the version."""
    assert (
        load_policies(PolicySources((BUNDLED_POLICIES,))).version == load_directory(BUNDLED_POLICIES).version
    )


def test_a_single_file_is_a_path_too(tmp_path: Path) -> None:
    (tmp_path / "quota.yaml").write_text(QUOTA)
    (tmp_path / "sharing.yaml").write_text(SHARING)
    policies = load_policies(PolicySources((tmp_path / "quota.yaml",), bundle=False))
    assert [q.name for q in policies.quotas] == ["team"] and not policies.sharing


@pytest.mark.parametrize(
    ("name", "content", "reason"),
    [
        ("absent", None, "policy path does not exist"),
        ("notes.txt", "hello", "policy path is not a .yaml or .yml policy file"),
    ],
)
def test_a_bad_path_is_named(tmp_path: Path, name: str, content: str | None, reason: str) -> None:
    path = tmp_path / name
    if content is not None:
        path.write_text(content)
    with pytest.raises(PolicyError) as raised:
        load_policies(PolicySources((path,)))
    assert [str(p) for p in raised.value.problems] == [f"{path}: {reason}"]


def test_resolve_takes_the_paths_given(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "policies").mkdir()
    assert resolve([Path("/team")]) == PolicySources((Path("/team"),))


def test_resolve_uses_a_policies_directory_here(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "policies").mkdir()
    assert resolve(None) == PolicySources((Path("policies"),))


def test_resolve_without_a_policies_directory_is_the_bundle(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    sources = resolve(None)
    assert sources == PolicySources()
    assert sources.describe() == "the security bundle"
    with pytest.raises(ConfigError, match="--no-bundle leaves no policies"):
        resolve(None, no_bundle=True)


def test_the_watch_sees_the_bundle_and_the_paths(tmp_path: Path) -> None:
    (tmp_path / "sharing.yaml").write_text(SHARING)
    watched = watched_files(PolicySources((tmp_path,)))
    assert tmp_path / "sharing.yaml" in watched
    assert bundle_directory() / "gpu-capabilities" / "constraint.yaml" in watched
    assert watched_files(PolicySources((tmp_path,), bundle=False)) == [tmp_path / "sharing.yaml"]


def test_a_broken_team_file_is_reported_with_the_bundle_intact(tmp_path: Path) -> None:
    shutil.copy(BUNDLE / "gpu-capabilities" / "constraint.yaml", tmp_path / "capabilities.yaml")
    (tmp_path / "broken.yaml").write_text("kind: GPUQuota\nspec: [\n")
    with pytest.raises(PolicyError) as raised:
        load_policies(PolicySources((tmp_path,)))
    assert {p.file for p in raised.value.problems} == {str(tmp_path / "broken.yaml")}


def test_the_mounted_configmap_loads_as_itself(tmp_path: Path) -> None:
    """An install mounts the bundle as a ConfigMap (keys flattened) and serves it with --policies:
    the packaged bundle underneath changes nothing."""
    for key, text in ship([]).data.items():
        (tmp_path / key).write_text(text)
    alone = load_policies(PolicySources((tmp_path,), bundle=False))
    assert load_policies(PolicySources((tmp_path,))).version == alone.version
    assert _actions(alone) == _actions(load_directory(BUNDLE))
