"""Time budgets: kube-apiserver appends `?timeout=<duration>` to every webhook call and gives up
after it. We answer before that, so the operator's failurePolicy is never decided by a timeout."""

from __future__ import annotations

import functools
import re

APISERVER_DEFAULT_SECONDS = 10.0  # what kube-apiserver uses when the configuration sets no timeout
MAX_SECONDS = 30.0  # the largest timeoutSeconds the API allows
_DURATION = re.compile(r"(\d+(?:\.\d+)?)(h|ms|m|s|us|µs|ns)")
_UNITS = {"h": 3600.0, "m": 60.0, "s": 1.0, "ms": 1e-3, "us": 1e-6, "µs": 1e-6, "ns": 1e-9}


@functools.lru_cache(maxsize=64)  # kube-apiserver sends the same few values on every call
def parse_duration(text: str) -> float | None:
    """A Go duration such as "10s", "1m30s" or "500ms", in seconds; None if it is not one."""
    if not text or len(text) > 32:
        return None
    parts = _DURATION.findall(text)
    if "".join(n + u for n, u in parts) != text:
        return None
    return sum(float(number) * _UNITS[unit] for number, unit in parts)


def budget_seconds(timeout: str | None) -> float:
    """The time we allow ourselves: the caller's timeout less a margin for the network and encoding."""
    seconds = parse_duration(timeout or "") or APISERVER_DEFAULT_SECONDS
    seconds = min(max(seconds, 0.0), MAX_SECONDS)
    return max(seconds - min(0.5, seconds * 0.2), seconds * 0.5)
