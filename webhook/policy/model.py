"""The compiled policy set that review() reads. Immutable; reload builds a new one."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class PolicySet:
    version: str = "empty"
    files: tuple[str, ...] = ()
