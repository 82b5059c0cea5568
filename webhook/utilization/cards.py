"""Which GPU model of our MIG tables a DCGM `modelName` is. Pure.

DCGM names cards as the driver does ("NVIDIA A100-SXM4-40GB", "NVIDIA H100 80GB
HBM3", "NVIDIA H100 NVL", "NVIDIA H200"), which does not always state the memory;
the memory DCGM reports (used + free) settles it. A MIG instance's memory is the
instance's, so for MIG the profile name settles it instead.
"""

from __future__ import annotations

from webhook import gpu

# Longest first: "GH200" holds "H200", "GB300" holds "B300", "H200" holds "H20".
FAMILIES = ("RTX-PRO-6000", "GH200", "GB200", "GB300", "A100", "H100", "H200", "B200", "B300", "H20", "A30")


def _upper_name(model_name: str) -> str:
    return model_name.upper().replace(" ", "-")


def family(model_name: str) -> str | None:
    upper = _upper_name(model_name)
    return next((f for f in FAMILIES if f in upper), None)


def card_model(model_name: str, total_mib: float | None) -> str | None:
    """The GPU_MODELS entry for a whole card: its family, then the nearest nominal memory."""
    found = family(model_name)
    if found is None or total_mib is None or total_mib <= 0:
        return None
    candidates = [m for m in gpu.GPU_MODELS if m.startswith(found + "-")]
    best = min(candidates, key=lambda m: abs(gpu.model_memory_mib(m) - total_mib), default=None)
    # Reported memory sits a few percent under the nominal size; far off means a card we do not know.
    if best is None or abs(gpu.model_memory_mib(best) - total_mib) > 0.15 * gpu.model_memory_mib(best):
        return None
    return best


def mig_card_model(model_name: str, profile: str) -> str | None:
    """The card a MIG instance lives on: the one model of the family whose table has the profile."""
    found = family(model_name)
    if found is None:
        return None
    owners = [
        m
        for m in gpu.GPU_MODELS
        if m.startswith(found + "-") and any(p.name == profile for p in gpu.MIG_PROFILES[m])
    ]
    # H100-94GB and H100-96GB share 1g.12gb: any owner serves when their slices are alike.
    alike = {(mig_profile(m, profile), gpu.model_slices(m)) for m in owners}
    return owners[0] if owners and len(alike) == 1 else None


def mig_profile(model: str, name: str) -> gpu.MigProfile | None:
    return next((p for p in gpu.MIG_PROFILES[model] if p.name == name), None)


def product_label(model_name: str) -> str:
    """GPU Feature Discovery's `nvidia.com/gpu.product` for a DCGM modelName (spaces become dashes)."""
    return "-".join(model_name.split())
