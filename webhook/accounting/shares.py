"""How much of a GPU one device is: the one rule every report and every quota shares. Pure.

A MIG slice of `g` compute slices is g / (the card's compute slices) of a GPU: 7 on most
cards, 4 on A30 and RTX PRO 6000 (webhook/migtable.py). Quota, `quota status`, `audit
summary`, utilization and `advise` all count slices this way, so a report and a quota
never call the same slice two sizes.
"""

from __future__ import annotations

from fractions import Fraction

from webhook import gpu


def mig_share(slices: int, model: str | None = None) -> Fraction:
    """GPU-equivalents of one slice; a card model unknown to the tables has 7 compute slices."""
    total = gpu.model_slices(model) if model else gpu.MIG_SLICES
    return Fraction(min(slices, total), total)
