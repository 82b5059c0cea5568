"""What `review()` decides, independent of how it travels back to kube-apiserver."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from fractions import Fraction
from typing import Any, Literal

from webhook.types import EnforcementAction, KubeObject, PatchOperation

WARNING_MAX_CHARS = 120
WARNINGS_TOTAL_MAX_CHARS = 4096
MESSAGE_MAX_CHARS = 4096
REASONS = {
    400: "BadRequest",
    403: "Forbidden",
    422: "Invalid",
    429: "TooManyRequests",
    500: "InternalError",
    503: "ServiceUnavailable",
    504: "Timeout",
}


@dataclass(frozen=True)
class Finding:
    """One policy's verdict on one request; the audit log keeps every finding."""

    policy: str
    action: EnforcementAction
    message: str


Unreviewed = Literal["overload", "timeout", "internal"]


@dataclass(frozen=True)
class Decision:
    allowed: bool
    code: int = 200
    message: str = ""
    warnings: tuple[str, ...] = ()
    patch: tuple[PatchOperation, ...] = ()
    audit_annotations: Mapping[str, str] = field(default_factory=dict)
    findings: tuple[Finding, ...] = ()
    object: KubeObject | None = None
    sharing_mode: str | None = None
    # Quota usage before and after this admission, for the audit log (see quota.check.QuotaOutcome.audit).
    quota: Mapping[str, Any] | None = None
    # GPU-equivalents of an admitted GPU pod, as every rule counted them (the audit record's "gpus").
    gpus: Fraction | None = None
    # Why the failure mode answered instead of a review; None when it was reviewed. Metrics and
    # the audit log keep the two apart.
    unreviewed: Unreviewed | None = None
    # Which of `warnings` the webhook wrote itself (the MIG rounding explanation, the DRA estimate):
    # texts of ours, which the audit log records without scanning the request for secrets.
    # Warnings that policies wrote (constraint findings) are never in it.
    own_warnings: frozenset[str] = frozenset()

    @property
    def reason(self) -> str:
        return REASONS.get(self.code, "Forbidden" if self.code < 500 else "InternalError")


ALLOW = Decision(allowed=True)


def deny(message: str, *, code: int = 403, findings: tuple[Finding, ...] = ()) -> Decision:
    """One printable line per reason (kubectl prints them as they are), at most 4096 characters."""
    lines = [line for line in (clean_text(part, MESSAGE_MAX_CHARS) for part in message.split("\n")) if line]
    text = (
        clean_text(" ".join(lines), MESSAGE_MAX_CHARS)
        if len("\n".join(lines)) > MESSAGE_MAX_CHARS
        else "\n".join(lines)
    )
    return Decision(allowed=False, code=code, message=text or "denied by policy", findings=findings)


def failure_decision(mode: str, endpoint: str, why: str, *, code: int, unreviewed: Unreviewed) -> Decision:
    """What we answer when we cannot review: the operator's failure mode decides; advisory never denies.

    `unreviewed` names the cause for metrics and the audit log (Decision.unreviewed).
    """
    if mode == "open" or endpoint == "advisory":
        warnings = clamp_warnings([f"gpu-webhook {why}; admitted without review"])
        return Decision(allowed=True, warnings=warnings, unreviewed=unreviewed)
    return replace(deny(f"gpu-webhook {why}; failing closed", code=code), unreviewed=unreviewed)


def clamp_warnings(warnings: Iterable[str]) -> tuple[str, ...]:
    """Apply kube-apiserver's limits: each under 120 characters, 4096 in total."""
    kept: list[str] = []
    total = 0
    for warning in warnings:
        text = clean_text(warning, WARNING_MAX_CHARS - 1)
        if not text or text in kept:
            continue
        if total + len(text) > WARNINGS_TOTAL_MAX_CHARS:
            break
        kept.append(text)
        total += len(text)
    return tuple(kept)


def clean_text(text: str, limit: int) -> str:
    """One printable line of at most `limit` characters; user strings may carry anything."""
    printable = text if text.isprintable() else "".join(ch if ch.isprintable() else " " for ch in text)
    flat = printable.strip()
    return flat if len(flat) <= limit else flat[: limit - 3] + "..."
