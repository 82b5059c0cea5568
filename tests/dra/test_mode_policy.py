"""GPUSharingPolicy mode dra: its fields, defaults and the combinations the loader refuses.

The GpuConfig rules mirror NVIDIA k8s-dra-driver-gpu api/nvidia.com/resource/v1beta1/sharing.go
(one config section per strategy, TimeSliceInterval values) and validate.go (thread percentage 0..100).
"""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from tests.support.policies import sharing_policy
from webhook.errors import PolicyError
from webhook.policy.loader import load_directory
from webhook.sharing_policy import Dra

HEADER = "apiVersion: gpuwebhook.io/v1alpha1\nkind: GPUSharingPolicy\nmetadata:\n  name: p\nspec:\n"


@pytest.mark.parametrize(
    ("sharing", "expected"),
    [
        ("{mode: dra}", Dra()),
        ("{mode: dra, strategy: Exclusive}", Dra("Exclusive", "gpu.nvidia.com")),
        (
            "{mode: dra, strategy: TimeSlicing, timeSlicing: {interval: Long}}",
            Dra("TimeSlicing", "gpu.nvidia.com", time_slice_interval="Long"),
        ),
        (
            "{mode: dra, strategy: MPS, mps: "
            "{defaultActiveThreadPercentage: 50, defaultPinnedDeviceMemoryLimit: 10Gi}}",
            Dra("MPS", "gpu.nvidia.com", mps_thread_percentage=50, mps_pinned_memory="10Gi"),
        ),
        ("{mode: dra, strategy: MIG, gpuModel: A100-40GB}", Dra("MIG", "mig.nvidia.com")),
        ("{mode: dra, deviceClassName: gpu.example.com}", Dra("Exclusive", "gpu.example.com")),
    ],
)
def test_dra_fields_compile(sharing: str, expected: Dra) -> None:
    policy = sharing_policy(f"sharing: {sharing}\n")
    assert policy.sharing.mode == "dra"
    assert policy.sharing.dra == expected


def test_mig_strategy_keeps_model_and_memory() -> None:
    policy = sharing_policy("sharing: {mode: dra, strategy: MIG, gpuModel: A100-40GB, defaultMemory: 8Gi}\n")
    assert (policy.sharing.gpu_model, policy.sharing.default_memory_mib) == ("A100-40GB", 8192)


BAD = [
    ("{mode: dra, strategy: Shared}", "spec.sharing.strategy", "is not one of"),
    ("{mode: dra, strategy: MIG}", "spec.sharing.gpuModel", "strategy MIG needs gpuModel"),
    ("{mode: dra, gpuModel: A100-40GB}", "spec.sharing.gpuModel", "only to strategy MIG"),
    ("{mode: dra, strategy: MPS, defaultMemory: 4Gi}", "spec.sharing.defaultMemory", "only to strategy MIG"),
    (
        "{mode: dra, strategy: MPS, timeSlicing: {interval: Short}}",
        "spec.sharing.timeSlicing",
        "only to strategy TimeSlicing",
    ),
    (
        "{mode: dra, strategy: TimeSlicing, mps: {defaultActiveThreadPercentage: 5}}",
        "spec.sharing.mps",
        "only to strategy MPS",
    ),
    (
        "{mode: dra, strategy: TimeSlicing, timeSlicing: {interval: Tiny}}",
        "spec.sharing.timeSlicing.interval",
        "is not one of",
    ),
    (
        "{mode: dra, strategy: MPS, mps: {defaultActiveThreadPercentage: 101}}",
        "spec.sharing.mps.defaultActiveThreadPercentage",
        "maximum",
    ),
    (
        "{mode: dra, strategy: MPS, mps: {defaultPinnedDeviceMemoryLimit: lots}}",
        "spec.sharing.mps.defaultPinnedDeviceMemoryLimit",
        "not a valid quantity",
    ),
    (
        "{mode: dra, strategy: MIG, gpuModel: A100-40GB, defaultMemory: 40500Mi}",
        "spec.sharing.defaultMemory",
        "largest MIG slice",
    ),
    ("{mode: dra, deviceClassName: Not_A_Class}", "spec.sharing.deviceClassName", "DNS subdomain"),
    ("{mode: dra, cores: 20}", "spec.sharing.cores", "applies only to modes"),
    ("{mode: mig, gpuModel: A100-40GB, strategy: MIG}", "spec.sharing.strategy", "applies only to modes dra"),
    ("{mode: timeslice, mps: {}}", "spec.sharing.mps", "applies only to modes dra"),
]


@pytest.mark.parametrize(("sharing", "path", "reason"), BAD)
def test_invalid_combinations_are_located(tmp_path: Path, sharing: str, path: str, reason: str) -> None:
    (tmp_path / "p.yaml").write_text(HEADER + textwrap.indent(f"sharing: {sharing}\n", "  "))
    with pytest.raises(PolicyError) as info:
        load_directory(tmp_path)
    found = [(p.file, p.line, p.path, p.reason) for p in info.value.problems]
    assert any(f.endswith("p.yaml") and line == 6 and p == path and reason in r for f, line, p, r in found), (
        found
    )
