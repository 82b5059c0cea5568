from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

from tests.support.server import ServerProcess, start_server
from webhook import certs

REPO = Path(__file__).resolve().parent.parent
EXAMPLES = REPO / "examples"
BUNDLED_POLICIES = REPO / "policies"

# A busy machine slows every draw and example alike: no property test may depend on wall-clock
# speed, so neither the per-example deadline nor the slow-generation health check applies. A
# settings() that names its own suppress_health_check replaces this list: keep too_slow in it.
settings.register_profile("any-machine", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("any-machine")


@pytest.fixture(scope="session", autouse=True)
def no_cluster_access(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """Servers started by tests never reach a real cluster through a developer's kubeconfig."""
    home = tmp_path_factory.mktemp("home")
    patch = pytest.MonkeyPatch()
    patch.setenv("HOME", str(home))
    patch.setenv("KUBECONFIG", str(home / "no-kubeconfig"))
    patch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    yield
    patch.undo()


@pytest.fixture(scope="session")
def cert_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    directory = tmp_path_factory.mktemp("certs")
    certs.generate(directory, "gpu-webhook", "gpu-system", days=30)
    return directory


@pytest.fixture(scope="session")
def server(cert_dir: Path) -> Iterator[ServerProcess]:
    """One real `gpu-webhook serve` over TLS, shared by tests that do not change its state."""
    process = start_server(
        ["--cert-dir", str(cert_dir), "--policies", str(BUNDLED_POLICIES)],
        ca_file=cert_dir / certs.CA_CERT,
    )
    yield process
    process.stop()
