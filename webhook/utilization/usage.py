"""One row per (GPU, pod) from the answers of the window queries, joined on labels. Pure.

A GPU that changed hands during the window has a row per pod that held it; a GPU
no pod holds has a row with `pod=None`. Utilization prefers the engine-active
ratio where the series has it, else DCGM_FI_DEV_GPU_UTIL.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from webhook.config import PodLabels
from webhook.utilization.labels import Device, PodRef, device_of, pod_reader
from webhook.utilization.prometheus import Sample
from webhook.utilization.promql import Window

Answers = Mapping[str, Sequence[Sample]]
RowKey = tuple[tuple[str, str, str, str], PodRef | None]


@dataclass(frozen=True)
class DeviceUsage:
    device: Device
    pod: PodRef | None
    util_mean: float | None = None
    util_p95: float | None = None
    memory_peak_mib: float | None = None
    memory_p95_mib: float | None = None
    memory_total_mib: float | None = None
    present: bool = False  # reports now: the pod holds the GPU at the end of the window


@dataclass(frozen=True)
class FleetReading:
    """Every GPU's usage over `window`, ending at `at` (unix seconds)."""

    at: float
    window: Window
    rows: tuple[DeviceUsage, ...]


def join_usage(answers: Answers, pod_labels: PodLabels = "auto") -> list[DeviceUsage]:
    """Rows sorted by device then pod, so every report built from them is stable."""
    read_pod = pod_reader(pod_labels, (s.labels for samples in answers.values() for s in samples))
    values: dict[RowKey, dict[str, float]] = {}
    devices: dict[RowKey, Device] = {}
    for name, samples in answers.items():
        for sample in samples:
            device, pod = device_of(sample.labels), read_pod(sample.labels)
            key: RowKey = (device.key, pod)
            devices.setdefault(key, device)
            values.setdefault(key, {})[name] = sample.value
    rows = [_row(devices[key], key[1], found) for key, found in values.items()]
    return sorted(rows, key=lambda r: (r.device.key, r.pod or PodRef("", "")))


def _row(device: Device, pod: PodRef | None, found: Mapping[str, float]) -> DeviceUsage:
    engine = "active_mean" in found
    return DeviceUsage(
        device=device,
        pod=pod,
        util_mean=_clamp(found.get("active_mean" if engine else "util_mean")),
        util_p95=_clamp(found.get("active_p95" if engine else "util_p95")),
        memory_peak_mib=found.get("memory_peak"),
        memory_p95_mib=found.get("memory_p95"),
        memory_total_mib=found.get("memory_total"),
        present="present" in found,
    )


def _clamp(percent: float | None) -> float | None:
    return None if percent is None else min(max(percent, 0.0), 100.0)
