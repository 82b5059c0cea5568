"""MIG profile choice and resource-name facts."""

from __future__ import annotations

import pytest

from webhook import gpu
from webhook.accounting import names

PROFILE_CHOICES = [
    # (model, memory MiB, cores %, expected profile)
    ("H100-80GB", 15 * 1024, None, "1g.20gb"),
    ("H100-80GB", 30 * 1024, None, "3g.40gb"),
    ("H100-80GB", 10 * 1024, None, "1g.10gb"),
    ("H100-80GB", 20 * 1024, None, "1g.20gb"),  # tie on memory: fewer slices
    ("H100-80GB", 1, 50, "4g.40gb"),  # 50% of compute needs 4 of 7 slices
    ("H100-80GB", 80 * 1024, None, "7g.80gb"),
    ("A100-40GB", 4 * 1024, None, "1g.5gb"),
    ("A100-40GB", 6 * 1024, None, "1g.10gb"),
    ("A100-40GB", 5 * 1024, None, "1g.10gb"),  # 1g.5gb is 4864 MiB (go-nvml a100.go)
    ("A100-80GB", 10 * 1024, None, "1g.20gb"),  # 1g.10gb is 9856 MiB (go-nvml a100.go)
    ("H100-94GB", 30 * 1024, None, "3g.47gb"),
    ("H200-141GB", 100 * 1024, None, "7g.141gb"),
]


@pytest.mark.parametrize(("model", "mib", "cores", "expected"), PROFILE_CHOICES)
def test_smallest_fitting_profile(model: str, mib: int, cores: int | None, expected: str) -> None:
    profile = gpu.fitting_profile(model, mib, cores)
    assert profile is not None and profile.name == expected


@pytest.mark.parametrize("model", gpu.GPU_MODELS)
def test_nothing_fits_beyond_the_largest_profile(model: str) -> None:
    assert gpu.fitting_profile(model, gpu.largest_profile(model).memory_mib + 1) is None
    assert gpu.largest_profile(model).slices == gpu.model_slices(model)


@pytest.mark.parametrize(
    ("name", "parsed"),
    [
        ("nvidia.com/mig-1g.10gb", (1, 10)),
        ("nvidia.com/mig-7g.141gb", (7, 141)),
        ("nvidia.com/mig-8g.1gb", None),
        ("nvidia.com/gpu", None),
        ("nvidia.com/mig-1g.10gb-me", (1, 10)),
        ("nvidia.com/mig-1g.10gb.me", (1, 10)),
        ("nvidia.com/mig-1g.24gb.me.all", (1, 24)),
        ("nvidia.com/mig-2g.48gb.gfx", (2, 48)),
        ("nvidia.com/mig-1g.10gb+me", None),
        ("nvidia.com/mig-1g.10gb.xx", None),
    ],
)
def test_mig_resource_names(name: str, parsed: tuple[int, int] | None) -> None:
    profile = gpu.parse_mig_resource(name)
    assert (profile.slices, profile.memory_gib) == parsed if profile else parsed is None


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("nvidia.com/gpu", True),
        ("nvidia.com/mig-2g.20gb", True),
        ("nvidia.com/gpumem", True),
        ("nvidia.com/gpu.shared", True),
        ("example.com/shared-gpu", False),
        ("cpu", False),
    ],
)
def test_gpu_resource_names(name: str, expected: bool) -> None:
    assert names.is_accelerator(name) is expected
    assert names.is_accelerator(name, ["example.com/shared-gpu"]) is (expected or "example" in name)
