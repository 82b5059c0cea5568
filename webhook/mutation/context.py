"""What mutators share while working on one pod."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from webhook.accounting.needs import PodNeeds
from webhook.capacity import CapacityView
from webhook.dra.index import DraIndex
from webhook.kubeversion import Version
from webhook.mutation.draft import Draft
from webhook.sharing_policy import SharingPolicy


@dataclass
class MutationContext:
    policy: SharingPolicy
    needs: PodNeeds
    mode: str
    shared_names: tuple[str, ...] = ()
    warnings: dict[str, None] = field(default_factory=dict)
    placement: CapacityView | None = None  # spare GPU capacity for placement hints, if known
    # Node requirements a rewrite adds beside the policy's own (MIG: the slice's GFD labels).
    required: list[dict[str, Any]] = field(default_factory=list)
    kubernetes_version: Version | None = None  # the cluster's, when known (native sidecars need 1.29)
    # The DRA snapshot and the pod's namespace: which of its claims get GPUs (the device variable).
    dra: DraIndex | None = None
    namespace: str = ""
    # What the mutators may write (webhook/mutation/draft.py); a caller that passes its own
    # clone of the pod (the /validate sharing check) has every part writable.
    draft: Draft = field(default_factory=lambda: Draft(in_place=True))

    def warn(self, message: str) -> None:
        self.warnings[message] = None  # one may say it of several containers; say it once

    def require(self, requirements: list[dict[str, Any]]) -> None:
        self.required.extend(r for r in requirements if r not in self.required)
