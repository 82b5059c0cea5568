"""PromQL for DCGM exporter metrics over a window. Text only; running it is the client's job.

DCGM_FI_DEV_GPU_UTIL is percent of time a kernel ran (whole GPUs only; MIG
instances do not report it). DCGM_FI_PROF_GR_ENGINE_ACTIVE is the graphics engine's
active ratio (0..1), reported per MIG instance too, but only where profiling
metrics are enabled; it is the better measure when present, so both are read.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from webhook.errors import ConfigError

GPU_UTIL = "DCGM_FI_DEV_GPU_UTIL"
ENGINE_ACTIVE = "DCGM_FI_PROF_GR_ENGINE_ACTIVE"
MEMORY_USED = "DCGM_FI_DEV_FB_USED"
MEMORY_FREE = "DCGM_FI_DEV_FB_FREE"
P95 = 0.95

_DURATION = re.compile(r"(?:[0-9]+(?:ms|s|m|h|d|w|y))+")
_UNIT_SECONDS = {"ms": 0.001, "s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800, "y": 31536000}
_SELECTOR = re.compile(r'\{\s*(?:[A-Za-z_][A-Za-z0-9_]*\s*(?:=|!=|=~|!~)\s*"(?:[^"\\]|\\.)*"\s*,?\s*)*\}')


@dataclass(frozen=True)
class Window:
    """A PromQL range like `7d` or `1h30m`, and its length in seconds."""

    text: str
    seconds: float

    @classmethod
    def parse(cls, text: str) -> Window:
        if not _DURATION.fullmatch(text):
            raise ConfigError(f"window {text!r} is not a Prometheus duration like 30m, 24h or 7d")
        seconds = sum(
            int(number) * _UNIT_SECONDS[unit]
            for number, unit in re.findall(r"([0-9]+)(ms|s|m|h|d|w|y)", text)
        )
        if seconds <= 0:
            raise ConfigError(f"window {text!r} must be longer than zero")
        return cls(text, seconds)


def check_selector(selector: str) -> str:
    """A label selector like `{cluster="prod"}` added to every metric; empty means all series."""
    if selector and not _SELECTOR.fullmatch(selector):
        raise ConfigError(f'selector {selector!r} is not a PromQL label selector like {{cluster="prod"}}')
    return selector


def window_queries(window: Window, selector: str = "") -> Mapping[str, str]:
    """Named queries whose answers, joined per series, describe each GPU over the window."""
    w, util, active = window.text, GPU_UTIL + selector, ENGINE_ACTIVE + selector
    used = MEMORY_USED + selector
    return {
        "util_mean": f"avg_over_time({util}[{w}])",
        "util_p95": f"quantile_over_time({P95}, {util}[{w}])",
        "active_mean": f"avg_over_time({active}[{w}]) * 100",
        "active_p95": f"quantile_over_time({P95}, {active}[{w}]) * 100",
        "memory_peak": f"max_over_time({used}[{w}])",
        "memory_p95": f"quantile_over_time({P95}, {used}[{w}])",
        **current_queries(selector),
    }


def current_queries(selector: str = "") -> Mapping[str, str]:
    """What holds now: which GPUs report (and to which pod), and their total memory."""
    used, free = MEMORY_USED + selector, MEMORY_FREE + selector
    return {"present": used, "memory_total": f"{used} + {free}"}


def timeline_queries(step_seconds: float, selector: str = "") -> Mapping[str, str]:
    """Utilization averaged over each step, for charts over time (query_range with that step)."""
    step = f"{max(round(step_seconds * 1000), 1)}ms"
    return {
        "util": f"avg_over_time({GPU_UTIL}{selector}[{step}])",
        "active": f"avg_over_time({ENGINE_ACTIVE}{selector}[{step}]) * 100",
    }
