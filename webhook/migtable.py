"""MIG profile tables per GPU model: profiles, instance counts, compute slices, real memory. Data only.

Where each number comes from:
- Profile names and instance counts: NVIDIA/mig-parted `deployments/systemd/config-default.yaml`
  (the same `mig-configs` as NVIDIA/gpu-operator `assets/state-mig-manager/0400_configmap.yaml`):
  `all-<profile>` gives the most instances of one profile per card, and the model comments and
  `device-filter` PCI ids say which card each belongs to.
- Real memory in MiB: NVIDIA/go-nvml `pkg/nvml/mock/gpus/{a100,a30,h100,h200,b200}.go`,
  `GpuInstanceProfileInfo.MemorySizeMB`; the `_REV1` profile is the media-extension (`+me`)
  variant of the 1-slice profile, with the same memory.
- Models go-nvml has no table for (`MEASURED` is False): every Hopper and Blackwell table that
  go-nvml has (h100.go, h200.go, b200.go) gives each slice exactly its nominal size
  (`1g.23gb` is 23 * 1024 = 23552 MiB), so these models take that rule; Ampere's tables are
  smaller than nominal, and no model without a table is Ampere. `review` says which applies.
- Attributes: go-nvlib `pkg/nvlib/device/mig_profile.go` (`+me`, `+me.all`, `+gfx`, `-me`); the
  device plugin turns `+` into `.` in the resource name (k8s-device-plugin `internal/rm/rm.go`).
"""

from __future__ import annotations

# (name, instances, MiB or None for "nominal"). A name's attributes follow the size.
Row = tuple[str, int, int | None]

_SEVEN = ("1g.{a}gb", "1g.{a}gb+me", "1g.{b}gb", "2g.{b}gb", "3g.{c}gb", "4g.{c}gb", "7g.{d}gb")
_SEVEN_COUNTS = (7, 1, 4, 3, 2, 1, 1)


def _seven(a: int, b: int, c: int, d: int, mib: tuple[int, ...] | None = None) -> tuple[Row, ...]:
    """The 7-slice layout every A100, Hopper and Blackwell data-center card shares in mig-parted."""
    names = [n.format(a=a, b=b, c=c, d=d) for n in _SEVEN]
    sizes: tuple[int | None, ...] = mib if mib is not None else (None,) * len(names)
    return tuple(zip(names, _SEVEN_COUNTS, sizes, strict=True))


# Compute slices of a whole card: A30 and the RTX PRO 6000 have 4 (their largest profile is 4g).
SLICES: dict[str, int] = {"A30-24GB": 4, "RTX-PRO-6000-96GB": 4}

# Whole-card memory in MiB (go-nvml `Config.MemoryMB`); other models: their name's GB * 1024.
CARD_MIB: dict[str, int] = {
    "A100-40GB": 40960,
    "A100-80GB": 81920,
    "A30-24GB": 24576,
    "H100-80GB": 81920,
    "H200-141GB": 144384,
    "B200-180GB": 184320,
}

TABLES: dict[str, tuple[Row, ...]] = {
    # go-nvml a100.go a100_40gb_GpuInstanceProfiles
    "A100-40GB": _seven(5, 10, 20, 40, (4864, 4864, 9856, 9856, 19968, 19968, 40192)),
    # go-nvml a100.go a100_80gb_GpuInstanceProfiles
    "A100-80GB": _seven(10, 20, 40, 80, (9856, 9856, 19968, 19968, 40192, 40192, 80384)),
    # go-nvml a30.go a30_24gb_GpuInstanceProfiles; mig-parted "# A30-24GB"
    "A30-24GB": (
        ("1g.6gb", 4, 5836),
        ("1g.6gb+me", 1, 5836),
        ("2g.12gb", 2, 11672),
        ("2g.12gb+me", 1, 11672),
        ("4g.24gb", 1, 23344),
    ),
    # go-nvml h100.go h100_80gb_GpuInstanceProfiles
    "H100-80GB": _seven(10, 20, 40, 80, (10240, 10240, 20480, 20480, 40960, 40960, 81920)),
    # mig-parted "# H100 NVL, H800 NVL": 1g.12gb, 1g.24gb, 2g.24gb, 3g.47gb, 4g.47gb, 7g.94gb
    "H100-94GB": _seven(12, 24, 47, 94),
    # mig-parted "# H100-96GB, PG506-96GB, GH200" and all-balanced "H100-96GB, PG506-96GB, GH200, H20"
    "H100-96GB": _seven(12, 24, 48, 96),
    "H20-96GB": _seven(12, 24, 48, 96),
    "GH200-96GB": _seven(12, 24, 48, 96),
    # mig-parted "# GH200 144G HBM3e": 1g.18gb, 1g.36gb, 2g.36gb, 3g.72gb, 4g.72gb, 7g.144gb
    "GH200-144GB": _seven(18, 36, 72, 144),
    # go-nvml h200.go h200_141gb_GpuInstanceProfiles
    "H200-141GB": _seven(18, 35, 71, 141, (18432, 18432, 35840, 35840, 72704, 72704, 144384)),
    # go-nvml b200.go b200_180gb_GpuInstanceProfiles
    "B200-180GB": _seven(23, 45, 90, 180, (23552, 23552, 46080, 46080, 92160, 92160, 184320)),
    # mig-parted "# GB200 HGX": 1g.23gb, 1g.47gb, 2g.47gb, 3g.93gb, 4g.93gb, 7g.186gb
    "GB200-186GB": _seven(23, 47, 93, 186),
    # mig-parted all-balanced "# B300" (0x3182): 1g.34gb, 2g.67gb, 3g.135gb; all-1g.67gb, all-7g.269gb
    "B300-288GB": _seven(34, 67, 135, 269),
    # mig-parted all-balanced "# GB300" (0x31C2) and all-1g.35gb (7 on GB300): up to 7g.278gb
    "GB300-288GB": _seven(35, 70, 139, 278),
    # mig-parted "# RTX PRO 6000 Blackwell": 4 slices, graphics (+gfx), no-media (-me), media-all
    "RTX-PRO-6000-96GB": (
        ("1g.24gb", 4, None),
        ("1g.24gb+gfx", 4, None),
        ("1g.24gb-me", 4, None),
        ("1g.24gb+me.all", 1, None),
        ("2g.48gb", 2, None),
        ("2g.48gb+gfx", 2, None),
        ("2g.48gb-me", 2, None),
        ("2g.48gb+me.all", 1, None),
        ("4g.96gb", 1, None),
        ("4g.96gb+gfx", 1, None),
    ),
}

MEASURED: dict[str, bool] = {
    model: all(mib is not None for _, _, mib in rows) for model, rows in TABLES.items()
}
