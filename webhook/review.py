"""review(): one admission request in, one decision out. No HTTP, no I/O.

The server and the offline CLI both call this function, so what a user checks
offline is what the cluster gets.
"""

from __future__ import annotations

from dataclasses import dataclass

from webhook.decision import ALLOW, Decision
from webhook.policy.model import PolicySet
from webhook.types import AdmissionRequest, Endpoint


@dataclass(frozen=True)
class ReviewDeps:
    """Everything a review may read: immutable snapshots, swapped whole between requests."""

    policies: PolicySet


def review(request: AdmissionRequest, endpoint: Endpoint, deps: ReviewDeps) -> Decision:
    if endpoint == "mutate":
        return mutate(request, deps)
    return validate(request, deps)


def mutate(request: AdmissionRequest, deps: ReviewDeps) -> Decision:
    return ALLOW


def validate(request: AdmissionRequest, deps: ReviewDeps) -> Decision:
    return ALLOW
