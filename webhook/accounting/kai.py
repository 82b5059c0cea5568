"""KAI-Scheduler's own pod validation, rule for rule. Pure.

KAI's binder refuses a pod with these errors (NVIDIA/KAI-Scheduler
`pkg/binder/plugins/gpusharing/gpu-request/gpu_request_validator.go`, ValidateGpuRequests),
after the scheduler has already placed it; checking at admission says it at `kubectl apply`.
The order of the checks and the messages are KAI's. Numbers are read as Go reads them:
`strconv.ParseUint(s, 10, 64)` (plain digits) and `strconv.ParseFloat(s, 64)`.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping
from typing import Any

from webhook import gpu

MPS = "mps"  # KAI's constants.MpsAnnotation
_UINT64 = re.compile(r"^[0-9]+$")
_GO_DECIMAL = re.compile(r"^[+-]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?$")
_GO_HEX = re.compile(r"^[+-]?0[xX]([0-9a-fA-F]+\.?[0-9a-fA-F]*|\.[0-9a-fA-F]+)[pP][+-]?[0-9]+$")


def problem(annotations: Mapping[str, str], containers: Iterable[Mapping[str, Any]]) -> str | None:
    """KAI's error for the pod, or None; `containers`: app and init containers."""
    fraction, memory, count = (
        _text(annotations.get(key)) for key in (gpu.KAI_FRACTION, gpu.KAI_MEMORY, gpu.KAI_NUM_DEVICES)
    )
    whole = _first_gpu_limit(containers)
    fractional = fraction is not None or memory is not None
    if not fractional and annotations.get(MPS) == "true":
        return "MPS is only supported with GPU fraction request"
    if fraction is not None and whole:
        return "cannot have both GPU fraction request and whole GPU resource request/limit"
    if memory is not None and (fraction is not None or whole):
        return "cannot request both GPU and GPU memory"
    if count is not None and not fractional:
        return "cannot request multiple fractional devices without specifying fraction portion or gpu-memory"
    if memory is not None and not _positive_uint(memory):
        return "gpu-memory annotation value must be a positive integer greater than 0"
    if fraction is not None and not _proper_fraction(fraction):
        return "gpu-fraction annotation value must be a positive number smaller than 1.0"
    if count is not None and not _positive_uint(count):
        return "fraction count annotation value must be a positive integer greater than 0"
    return None


def _text(value: object) -> str | None:
    """Annotations are strings; anything else (never past the API server) is read as its text."""
    return None if value is None else value if isinstance(value, str) else str(value)


def _first_gpu_limit(containers: Iterable[Mapping[str, Any]]) -> bool:
    """getFirstGPULimit: any container whose limits name nvidia.com/gpu, whatever the value."""
    for container in containers:
        resources = container.get("resources")
        limits = resources.get("limits") if isinstance(resources, dict) else None
        if isinstance(limits, dict) and gpu.GPU in limits:
            return True
    return False


def _positive_uint(text: str) -> bool:
    return bool(_UINT64.fullmatch(text)) and 0 < int(text) < 2**64


def parse_go_float(text: str) -> float | None:
    """strconv.ParseFloat(text, 64), or None where Go returns an error."""
    word = text.lower()
    if word == "nan":
        return math.nan
    if word.lstrip("+-") in ("inf", "infinity"):
        return -math.inf if word.startswith("-") else math.inf
    if _GO_DECIMAL.fullmatch(text):
        value = float(text)
    elif _GO_HEX.fullmatch(text):
        value = float.fromhex(text)
    else:
        return None
    return None if math.isinf(value) else value  # "1e400": Go's ErrRange


def is_decimal(text: str) -> bool:
    """Plain decimal notation (with an exponent or not), which Python's Fraction reads exactly."""
    return bool(_GO_DECIMAL.fullmatch(text))


def _proper_fraction(text: str) -> bool:
    value = parse_go_float(text)
    # As in Go: NaN compares false both ways, so KAI lets it through.
    return value is not None and not (value <= 0 or value >= 1)
