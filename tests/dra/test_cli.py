"""`quota status`, `scan` and `review` offline see claimed GPUs, as users run them."""

from __future__ import annotations

from pathlib import Path

import orjson
import yaml

from tests.conftest import BUNDLED_POLICIES
from tests.dra.objects import NS, claim, device_class, pod, request
from tests.support.cli import gpu_webhook

CLASS_DEVICES = "gpu.nvidia.com.deviceclass.resource.k8s.io/devices"
QUOTA = {
    "apiVersion": "gpuwebhook.io/v1alpha1",
    "kind": "GPUQuota",
    "metadata": {"name": "team-a"},
    "spec": {"match": {"namespaces": [NS]}, "limits": {"gpus": 8, "resources": {CLASS_DEVICES: 4}}},
}


def write(tmp_path: Path) -> None:
    policies = tmp_path / "policies"
    policies.mkdir()
    (policies / "quota.yaml").write_text(yaml.safe_dump(QUOTA))
    objects = [
        claim("shared", request(count=2)),
        pod("a", claim_name="shared"),
        pod("b", claim_name="shared"),  # the same two GPUs: counted once
        claim("three", request(count=3)),
        pod("c", claim_name="three"),
        claim("four", request(count=4)),
    ]
    (tmp_path / "inventory.yaml").write_text(yaml.safe_dump_all(objects))


def test_quota_status_counts_claims_once(tmp_path: Path) -> None:
    write(tmp_path)
    result = gpu_webhook(
        "quota",
        "status",
        "--policies",
        "policies",
        "--inventory",
        "inventory.yaml",
        "-o",
        "json",
        cwd=tmp_path,
    )
    assert result.returncode == 0, result.stderr
    rows = {r["resource"]: r for r in orjson.loads(result.stdout)["rows"]}
    assert rows["gpus"]["used"] == "5"
    assert rows[CLASS_DEVICES]["used"] == "5"


def review(tmp_path: Path, claim_name: str) -> tuple[int, str]:
    (tmp_path / "pod.yaml").write_text(yaml.safe_dump(pod("d", claim_name=claim_name)))
    result = gpu_webhook(
        "review", "pod.yaml", "--policies", "policies", "--inventory", "inventory.yaml", cwd=tmp_path
    )
    return result.returncode, result.stdout


def test_review_offline_holds_claims_to_the_quota(tmp_path: Path) -> None:
    write(tmp_path)
    code, out = review(tmp_path, "three")  # joins a claim already counted: nothing more
    assert code == 0 and "allowed" in out, out
    code, out = review(tmp_path, "four")  # 5 in use + 4 > 8
    assert code == 1, out
    assert 'GPU quota "team-a" exceeded' in out


def test_scan_sees_claimed_gpus(tmp_path: Path) -> None:
    objects = [claim("nine", request(count=9)), pod("big", claim_name="nine"), pod("fine")]
    (tmp_path / "inventory.yaml").write_text(yaml.safe_dump_all(objects))
    result = gpu_webhook(
        "scan", "--policies", str(BUNDLED_POLICIES), "--inventory", "inventory.yaml", cwd=tmp_path
    )
    assert result.returncode == 1, result.stdout + result.stderr
    assert "gpu-max-per-pod" in result.stdout and "Pod big asks for 9 GPUs" in result.stdout


def test_scan_counts_the_classes_configured_as_gpus(tmp_path: Path) -> None:
    """A class of another vendor's driver is a GPU only when named, as serve --dra-gpu-classes."""
    objects = [
        device_class("accel.example.com", "device.driver == 'accel.example.com'"),
        claim("nine", request(count=9, device_class="accel.example.com")),
        pod("big", claim_name="nine"),
    ]
    (tmp_path / "inventory.yaml").write_text(yaml.safe_dump_all(objects))
    command = ("scan", "--policies", str(BUNDLED_POLICIES), "--inventory", "inventory.yaml")
    plain = gpu_webhook(*command, cwd=tmp_path)
    assert plain.returncode == 0 and "Pod big asks for 9 GPUs" not in plain.stdout, plain.stdout
    named = gpu_webhook(*command, "--dra-gpu-classes", "accel.example.com", cwd=tmp_path)
    assert named.returncode == 1 and "Pod big asks for 9 GPUs" in named.stdout, named.stdout
