from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from tests.manifests.objects import run_cli
from tests.support.cel import CelProcess
from tests.support.policies import TEAM_SHARING
from webhook.manifests import Manifest

# A team's own policies beside the bundle: a sharing policy in a nested directory, and a suite
# that installs leave out.
POLICY_FILES = {
    "team/sharing.yaml": TEAM_SHARING,
    "team/sharing.test.yaml": "apiVersion: gpuwebhook.io/v1alpha1\nkind: PolicyTest\n",
}


@pytest.fixture(scope="session")
def policy_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    directory = tmp_path_factory.mktemp("policies")
    for name, text in POLICY_FILES.items():
        (directory / name).parent.mkdir(parents=True, exist_ok=True)
        (directory / name).write_text(text)
    return directory


@pytest.fixture(scope="session")
def rendered(cert_dir: Path, policy_dir: Path) -> list[Manifest]:
    """What the lead's check runs: `gpu-webhook manifests --namespace gpu-system --cert-dir ...`."""
    result = run_cli("--namespace", "gpu-system", "--cert-dir", str(cert_dir), "--policies", str(policy_dir))
    assert result.returncode == 0, result.stderr
    return [doc for doc in yaml.safe_load_all(result.stdout) if doc is not None]


@pytest.fixture(scope="session")
def cel() -> Iterator[CelProcess]:
    process = CelProcess()
    yield process
    process.close()
