"""A stand-in for NVIDIA's dcgm-exporter: serves its metric names and labels for a synthetic fleet.

Each scrape moves every value to the next point of a fixed cycle between the GPU's
low and high bounds, so averages and quantiles land where the fleet says they do,
whatever the number of scrapes. Only the exposition format is faked; Prometheus,
which scrapes it, is real.
"""

from __future__ import annotations

import itertools
import threading
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from tests.support.quiethttp import QuietHandler, QuietHTTPServer

DRIVER = "535.104.12"
CYCLE = (0.0, 0.5, 1.0, 0.25, 0.75, 0.1, 0.9, 0.4, 0.6, 0.3)  # spans [0, 1], mean 0.48


@dataclass(frozen=True)
class FakeGpu:
    node: str
    index: int
    model: str
    memory_total_mib: int
    util: tuple[float, float]  # percent, low and high
    memory_used_mib: tuple[float, float]
    namespace: str | None = None
    pod: str | None = None
    container: str = "main"
    mig_profile: str | None = None
    mig_instance: int | None = None
    engine_active: bool = False  # profiling metrics on: DCGM_FI_PROF_GR_ENGINE_ACTIVE is exported

    @property
    def uuid(self) -> str:
        return f"GPU-{self.node}-{self.index:04d}"

    def labels(self) -> dict[str, str]:
        labels = {
            "gpu": str(self.index),
            "UUID": self.uuid,
            "device": f"nvidia{self.index}",
            "modelName": self.model,
            "Hostname": self.node,
            "DCGM_FI_DRIVER_VERSION": DRIVER,
        }
        if self.mig_profile is not None:
            labels |= {"GPU_I_PROFILE": self.mig_profile, "GPU_I_ID": str(self.mig_instance)}
        if self.pod is not None and self.namespace is not None:
            labels |= {"namespace": self.namespace, "pod": self.pod, "container": self.container}
        return labels


def _between(bounds: tuple[float, float], step: float) -> float:
    low, high = bounds
    return low + (high - low) * step


def exposition(gpus: Sequence[FakeGpu], scrape: int) -> str:
    """The text dcgm-exporter would serve at its `scrape`-th scrape."""
    families: dict[str, tuple[str, list[str]]] = {
        "DCGM_FI_DEV_GPU_UTIL": ("GPU utilization (in %).", []),
        "DCGM_FI_DEV_FB_FREE": ("Framebuffer memory free (in MiB).", []),
        "DCGM_FI_DEV_FB_USED": ("Framebuffer memory used (in MiB).", []),
        "DCGM_FI_PROF_GR_ENGINE_ACTIVE": ("Ratio of time the graphics engine is active.", []),
    }
    for offset, gpu in enumerate(gpus):
        step = CYCLE[(scrape + offset) % len(CYCLE)]
        util, used = _between(gpu.util, step), round(_between(gpu.memory_used_mib, step))
        labels = ",".join(f'{k}="{v}"' for k, v in gpu.labels().items())
        if gpu.mig_profile is None:  # DCGM reports no GPU_UTIL for MIG instances
            families["DCGM_FI_DEV_GPU_UTIL"][1].append(f"DCGM_FI_DEV_GPU_UTIL{{{labels}}} {util:.0f}")
        families["DCGM_FI_DEV_FB_FREE"][1].append(
            f"DCGM_FI_DEV_FB_FREE{{{labels}}} {gpu.memory_total_mib - used}"
        )
        families["DCGM_FI_DEV_FB_USED"][1].append(f"DCGM_FI_DEV_FB_USED{{{labels}}} {used}")
        if gpu.engine_active:
            families["DCGM_FI_PROF_GR_ENGINE_ACTIVE"][1].append(
                f"DCGM_FI_PROF_GR_ENGINE_ACTIVE{{{labels}}} {util / 100:.6f}"
            )
    return "".join(_family(name, text, lines) for name, (text, lines) in families.items() if lines)


def _family(name: str, text: str, lines: list[str]) -> str:
    return f"# HELP {name} {text}\n# TYPE {name} gauge\n" + "".join(line + "\n" for line in lines)


class FakeExporter:
    """Serves /metrics on a free loopback port from a background thread."""

    def __init__(self, gpus: Sequence[FakeGpu]) -> None:
        self.gpus = tuple(gpus)
        self._scrapes: Iterator[int] = itertools.count()
        self._server = QuietHTTPServer(("127.0.0.1", 0), self._handler())
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.02}, name="fake-dcgm", daemon=True
        )

    @property
    def target(self) -> str:
        return f"127.0.0.1:{self._server.server_address[1]}"

    def start(self) -> FakeExporter:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    def _handler(self) -> type[QuietHandler]:
        exporter = self

        class Handler(QuietHandler):
            def do_GET(self) -> None:
                body = exposition(exporter.gpus, next(exporter._scrapes)).encode()
                self.send_body(200, body, "text/plain; version=0.0.4; charset=utf-8")

        return Handler
