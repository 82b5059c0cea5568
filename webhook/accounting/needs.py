"""What a pod says it needs, from its annotations: memory and compute per GPU, or an opt-out."""

from __future__ import annotations

from dataclasses import dataclass

from webhook import quantity
from webhook.accounting.target import PodTarget
from webhook.errors import AdmissionDenied

PREFIX = "gpuwebhook.io/"
MEMORY = PREFIX + "gpu-memory"
CORES = PREFIX + "gpu-cores"
SHARING = PREFIX + "sharing"
APPLIED = PREFIX + "applied"
OPT_OUT = "exclusive"


@dataclass(frozen=True)
class PodNeeds:
    memory_mib: int | None = None
    cores: int | None = None
    opt_out: bool = False


def read_needs(target: PodTarget) -> PodNeeds:
    annotations = target.annotations
    try:
        memory = quantity.parse_mib(annotations[MEMORY], MEMORY) if MEMORY in annotations else None
        cores = quantity.parse_percent(annotations[CORES], CORES) if CORES in annotations else None
    except quantity.QuantityError as e:
        raise AdmissionDenied(f"{target.describe()}: {e}") from e
    sharing = annotations.get(SHARING)
    if sharing not in (None, OPT_OUT):
        raise AdmissionDenied(f"{target.describe()}: {SHARING} may only be {OPT_OUT!r}, got {sharing!r}")
    return PodNeeds(memory, cores, sharing == OPT_OUT)
