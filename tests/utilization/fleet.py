"""The synthetic fleet: idle, busy and MIG GPUs across namespaces, and what the advisor must see in it.

- node-a (A100 40GB, profiling on): two idle notebook GPUs (research), one busy trainer, one free.
- node-b (H100 80GB, no profiling): a busy trainer and an idle debug pod (training), an
  underused inference API (inference), two free GPUs.
- node-c (A100 80GB, scraped without honor_labels, so pods are in exported_* labels):
  a MIG 3g.40gb instance held by an idle evaluation Job (sandbox), a free 3g.40gb
  instance, and a whole GPU held by a busy trainer.
"""

from __future__ import annotations

from tests.support.dcgm import FakeGpu

A100_40 = "NVIDIA A100-SXM4-40GB"
H100_80 = "NVIDIA H100 80GB HBM3"
A100_80 = "NVIDIA A100 80GB PCIe"
IDLE = (0.0, 3.0)
BUSY = (85.0, 99.0)

HONORED = (
    FakeGpu(
        "node-a",
        0,
        A100_40,
        40536,
        IDLE,
        (2000, 2600),
        "research",
        "notebook-7d9f8b6c5d-x2k4p",
        engine_active=True,
    ),
    FakeGpu(
        "node-a",
        1,
        A100_40,
        40536,
        IDLE,
        (1800, 2400),
        "research",
        "notebook-7d9f8b6c5d-q8w2z",
        engine_active=True,
    ),
    FakeGpu("node-a", 2, A100_40, 40536, BUSY, (30000, 36000), "training", "trainer-0", engine_active=True),
    FakeGpu("node-a", 3, A100_40, 40536, (0.0, 0.0), (0, 1), engine_active=True),
    FakeGpu("node-b", 0, H100_80, 81559, BUSY, (60000, 70000), "training", "trainer-1"),
    FakeGpu("node-b", 1, H100_80, 81559, (10.0, 20.0), (11000, 12000), "inference", "api-6b8c9d7f5b-m4n5p"),
    FakeGpu("node-b", 2, H100_80, 81559, (0.0, 1.0), (500, 800), "training", "debug-shell"),
    FakeGpu("node-b", 3, H100_80, 81559, (0.0, 0.0), (0, 1)),
    FakeGpu("node-b", 4, H100_80, 81559, (0.0, 0.0), (0, 1)),
)
UNHONORED = (
    FakeGpu(
        "node-c",
        0,
        A100_80,
        40192,
        (0.0, 2.0),
        (2500, 3000),
        "sandbox",
        "eval-x7k2m",
        mig_profile="3g.40gb",
        mig_instance=1,
        engine_active=True,
    ),
    FakeGpu(
        "node-c",
        0,
        A100_80,
        40192,
        (0.0, 0.0),
        (0, 1),
        mig_profile="3g.40gb",
        mig_instance=2,
        engine_active=True,
    ),
    FakeGpu(
        "node-c", 1, A100_80, 81251, (90.0, 99.0), (50000, 60000), "training", "trainer-2", engine_active=True
    ),
)
# What Prometheus' own target labels are when it scrapes the exporter pod without honor_labels.
EXPORTER_TARGET = {
    "namespace": "gpu-operator",
    "pod": "nvidia-dcgm-exporter-5x8kq",
    "container": "nvidia-dcgm-exporter",
}
SERIES = len(HONORED) + len(UNHONORED)

IDLE_NAMESPACES = ("research", "sandbox")
BUSY_NAMESPACE = "training"
