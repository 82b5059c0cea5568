"""What `advise` cannot measure: pods holding accelerators that DCGM does not report on. Pure.

`advise` reads NVIDIA's DCGM exporter, so it sees NVIDIA GPUs only (those of NVIDIA's own
device plugin, HAMi, Volcano's vGPU and gpushare alike). Pods of the inventory that hold
another vendor's devices (AMD, Intel, Ascend and the rest of webhook/vendors.py) are named
in a note instead of being left out without a word.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable

from webhook.accounting import names
from webhook.accounting.count import count_gpus
from webhook.accounting.demand import is_finished
from webhook.types import KubeObject

SHOWN = 3  # pods named per vendor; the rest are counted


def unmeasured_notes(objects: Iterable[KubeObject]) -> tuple[str, ...]:
    held: dict[str, list[str]] = defaultdict(list)
    for obj in objects:
        if obj.get("kind") != "Pod" or is_finished(obj):
            continue
        for vendor in sorted({names.vendor(name) or "" for name in count_gpus(obj).names} - {"nvidia", ""}):
            held[vendor].append(_describe(obj))
    return tuple(_note(vendor, pods) for vendor, pods in sorted(held.items()))


def _describe(pod: KubeObject) -> str:
    metadata = pod.get("metadata")
    metadata = metadata if isinstance(metadata, dict) else {}
    return f"{metadata.get('namespace', 'default')}/{metadata.get('name', '?')}"


def _note(vendor: str, pods: list[str]) -> str:
    shown = ", ".join(sorted(pods)[:SHOWN]) + (f" and {len(pods) - SHOWN} more" if len(pods) > SHOWN else "")
    return (
        f"no metrics for {vendor} accelerators: advise reads NVIDIA's DCGM exporter only, so "
        f"{len(pods)} pod(s) holding them are not judged ({shown})"
    )
