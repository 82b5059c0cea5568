"""A sharing policy that rewrites to a resource name nothing serves: review and /readyz warn."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.conftest import BUNDLED_POLICIES
from tests.dra.objects import device_class
from tests.support.policies import bundled_policies
from tests.support.reviews import make_review
from tests.support.schema import assert_valid
from tests.support.server import start_server
from webhook.dra.served import allocatable_names, unserved
from webhook.inventory import Inventory
from webhook.offline import offline_deps
from webhook.review import review

NAMESPACE = "example-timeslice"  # policies/examples/timeslice.yaml rewrites to nvidia.com/gpu.shared
NODE = {
    "apiVersion": "v1",
    "kind": "Node",
    "metadata": {"name": "gpu-node-1"},
    "status": {"allocatable": {"cpu": "64", "nvidia.com/gpu": "8"}},
}
SHARED_NODE = {**NODE, "status": {"allocatable": {"nvidia.com/gpu.shared": "32"}}}
# Kubernetes 1.34's DRA extended resources, in the shape of NVIDIA/k8s-dra-driver-gpu
# demo/specs/extended-resources/mig-1g-12gb.yaml.
SHARED_CLASS = device_class(
    "shared.gpu.nvidia.com", "device.driver == 'gpu.nvidia.com'", "nvidia.com/gpu.shared"
)
POD = {
    "apiVersion": "v1",
    "kind": "Pod",
    "metadata": {"name": "nb", "namespace": NAMESPACE},
    "spec": {
        "containers": [{"name": "nb", "image": "jupyter:1", "resources": {"limits": {"nvidia.com/gpu": "1"}}}]
    },
}
WARNING = "which no node and no DeviceClass serves"


@pytest.mark.parametrize(
    ("case", "objects", "warned"),
    [
        ("nodes advertise only whole GPUs", [NODE], True),
        ("a node advertises the shared name", [NODE, SHARED_NODE], False),
        ("a DeviceClass serves the shared name", [NODE, SHARED_CLASS], False),
        ("no nodes known: nothing is claimed", [], False),
    ],
)
def test_review_warns_of_a_rewrite_to_an_unserved_name(case: str, objects: list[Any], warned: bool) -> None:
    for obj in objects:
        assert_valid(obj)
    deps = offline_deps(bundled_policies(), Inventory("test", tuple(objects)))
    decision = review(make_review(POD)["request"], "mutate", deps)
    assert decision.allowed and decision.patch, case
    assert any(WARNING in w for w in decision.warnings) is warned, (case, decision.warnings)


def test_unserved_names() -> None:
    known = allocatable_names([NODE])
    assert known == frozenset({"nvidia.com/gpu"})
    assert unserved(["nvidia.com/gpu", "nvidia.com/gpu.shared"], known, None) == ["nvidia.com/gpu.shared"]
    assert unserved(["nvidia.com/gpu.shared"], None, None) == []
    assert allocatable_names([]) is None


def test_readyz_names_policy_resources_nothing_serves(cert_dir: Path, tmp_path: Path) -> None:
    inventory = tmp_path / "inventory.yaml"
    inventory.write_text(yaml.safe_dump_all([NODE]))
    home = tmp_path / "home"
    home.mkdir()
    server = start_server(
        ["--cert-dir", str(cert_dir), "--policies", str(BUNDLED_POLICIES), "--inventory", str(inventory)],
        ca_file=cert_dir / "ca.crt",
        env={"HOME": str(home), "KUBECONFIG": ""},
    )
    try:
        reply = server.client().request("GET", "/readyz")
        assert reply.status == 200  # a warning, never a reason to stop serving
        checks = reply.json()["checks"]
        assert isinstance(checks, dict)
        assert checks["resources"] == "no node and no DeviceClass serves nvidia.com/gpu.shared"
    finally:
        server.stop()
