"""An install that leaves the bundle out of its ConfigMap runs its server without the bundle too."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from tests.manifests.objects import one, run_cli
from tests.support.policies import TEAM_SHARING
from webhook.cli import build_parser, serve_policies


@pytest.mark.parametrize(("flags", "bundle"), [((), True), (("--no-security-bundle",), False)])
def test_the_server_enforces_what_the_configmap_ships(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, flags: tuple[str, ...], bundle: bool
) -> None:
    (tmp_path / "team.yaml").write_text(TEAM_SHARING)
    result = run_cli("--policies", str(tmp_path), *flags)
    assert result.returncode == 0, result.stderr
    server = one(list(yaml.safe_load_all(result.stdout)), "StatefulSet")
    args = server["spec"]["template"]["spec"]["containers"][0]["args"]
    assert ("--no-bundle=true" in args) is not bundle
    monkeypatch.delenv("GPU_WEBHOOK_NO_BUNDLE", raising=False)
    monkeypatch.delenv("GPU_WEBHOOK_POLICIES", raising=False)
    assert serve_policies(build_parser().parse_args(["serve", *args])).bundle is bundle
