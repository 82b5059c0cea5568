"""A small decision log whose every count is known, shared by the CLI and report tests."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from tests.audit.logs import denied, entry
from webhook.audit.chain import Record
from webhook.decision import Decision, Finding


@dataclass(frozen=True)
class QuotaDecision(Decision):
    """Decision as the quota work will extend it: an optional `quota` attribute."""

    quota: Any = None


def warned(policy: str, message: str) -> Decision:
    return Decision(allowed=True, warnings=(message,), findings=(Finding(policy, "warn", message),))


def admitted(gpus: float) -> Decision:
    return QuotaDecision(allowed=True, quota={"quota": "ml", "demand": {"gpus": gpus}})


def sample() -> list[Record]:
    items: list[Record] = []
    for i in range(6):
        items.append(entry(f"allow-{i}", minute=i, latency_ms=1.0 + i))
    for i in range(3):
        decision = denied("no-privileged", "privileged containers are not allowed")
        items.append(entry(f"priv-{i}", decision, minute=10 + i, namespace="team-b", user="bob@example.com"))
    quota = denied("gpu-quota", "GPU quota exceeded in namespace team-b")
    items.append(
        entry("quota-0", quota, minute=13, namespace="team-b", user="bob@example.com", latency_ms=50.0)
    )
    for i in range(2):
        decision = warned("prefer-mig", "consider a MIG profile")
        items.append(entry(f"warn-{i}", decision, minute=20 + i, user="carol@example.com"))
    for i, mode in enumerate(["mig", "timeslice", "mig"]):
        decision = Decision(allowed=True, sharing_mode=mode, patch=({"op": "add", "path": "/x"},))
        items.append(entry(f"mutate-{i}", decision, endpoint="mutate", minute=30 + i))
    items.append(entry("deploy-0", admitted(2), kind="Deployment", namespace="team-c", name="web", minute=40))
    items.append(entry("gpus-a", admitted(0.5), minute=41))
    items.append(entry("dry-0", admitted(4), minute=42, namespace="team-c", dry_run=True))
    return items


SAMPLE_COUNTS = {"allowed": 12, "denied": 4, "warned": 2}
