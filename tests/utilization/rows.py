"""DeviceUsage rows for pure tests, without Prometheus."""

from __future__ import annotations

from webhook.utilization.labels import Device, PodRef
from webhook.utilization.usage import DeviceUsage

A100_40 = "NVIDIA A100-SXM4-40GB"
H100_80 = "NVIDIA H100 80GB HBM3"
A100_80 = "NVIDIA A100 80GB PCIe"
T4 = "Tesla T4"
TOTALS = {A100_40: 40536.0, H100_80: 81559.0, A100_80: 81251.0, T4: 15360.0}


def row(
    node: str = "n1",
    index: int = 0,
    pod: str | None = None,
    namespace: str = "ns",
    *,
    model: str = A100_40,
    util: tuple[float, float] | None = (1.0, 2.0),
    memory: tuple[float, float] | None = (1000.0, 1200.0),
    total: float | None = None,
    mig: tuple[str, int] | None = None,
    present: bool = True,
) -> DeviceUsage:
    """A GPU (or MIG instance) row: util is (mean, p95) percent, memory is (p95, peak) MiB."""
    profile, instance = mig if mig else ("", 0)
    device = Device(node, f"GPU-{node}-{index}", str(index), str(instance) if mig else "", profile, model)
    return DeviceUsage(
        device=device,
        pod=PodRef(namespace, pod, "main") if pod else None,
        util_mean=util[0] if util else None,
        util_p95=util[1] if util else None,
        memory_p95_mib=memory[0] if memory else None,
        memory_peak_mib=memory[1] if memory else None,
        memory_total_mib=total if total is not None else (None if mig else TOTALS.get(model)),
        present=present,
    )
