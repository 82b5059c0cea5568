"""The reservation step: check a pod against its quotas and count it at once if admitted.

Between admission and the moment the watch shows the new pod, the cache does not
know it. Without a reservation, N requests arriving together would each see the
same free room and all be admitted. A gate makes check-and-reserve one step, so N
concurrent admissions against room for k admit exactly k.

Two gates:
- LocalGate (`--quota-consistency per-replica`, the default): reservations live in
  this process. Exact within one replica; replicas do not see each other's
  admissions in flight, so with R replicas up to R pods may fill the same last room
  until the watch catches up (typically well under a second).
- LedgerGate (`--quota-consistency strict`, in ledger.py): reservations live in a
  Kubernetes object shared by every replica.

Call `admit()` after every other validation has allowed the request, or call
`release()` when a later check denies it; dry runs never reserve.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from typing import Protocol

from webhook.accounting.count import GpuCount
from webhook.accounting.demand import DEFAULT_SETTINGS, QuotaSettings
from webhook.accounting.tally import Tally
from webhook.cache import ClusterCache
from webhook.dra.index import DraIndex
from webhook.quota.check import QuotaOutcome, check_quota, request_pod_key
from webhook.quota.policy import GPUQuota
from webhook.types import AdmissionRequest


class QuotaGate(Protocol):
    mode: str

    def admit(
        self, request: AdmissionRequest, quotas: Sequence[GPUQuota], reading: GpuCount | None = None
    ) -> QuotaOutcome: ...

    def peek(
        self, request: AdmissionRequest, quotas: Sequence[GPUQuota], reading: GpuCount | None = None
    ) -> QuotaOutcome: ...

    def release(self, outcome: QuotaOutcome) -> None: ...


def peek(
    cache: ClusterCache,
    request: AdmissionRequest,
    quotas: Sequence[GPUQuota],
    settings: QuotaSettings,
    reading: GpuCount | None = None,
) -> QuotaOutcome:
    """The outcome without reserving anything: for advisory reviews, which never admit."""
    view = _WithoutOwnReservation(cache, request_pod_key(request))
    return check_quota(request, quotas, view, settings, reading)


class LocalGate:
    """Per-replica consistency: one lock around check and reservation."""

    mode = "per-replica"

    def __init__(self, cache: ClusterCache, settings: QuotaSettings = DEFAULT_SETTINGS) -> None:
        self.cache = cache
        self.settings = settings
        self._lock = threading.Lock()

    def admit(
        self, request: AdmissionRequest, quotas: Sequence[GPUQuota], reading: GpuCount | None = None
    ) -> QuotaOutcome:
        with self._lock:
            view = _WithoutOwnReservation(self.cache, request_pod_key(request))
            outcome = check_quota(request, quotas, view, self.settings, reading)
            key = outcome.reserve_key
            if key is not None and outcome.shape is not None:
                self.cache.reserve(outcome.namespace, key, outcome.shape, outcome.uid)
            return outcome

    def peek(
        self, request: AdmissionRequest, quotas: Sequence[GPUQuota], reading: GpuCount | None = None
    ) -> QuotaOutcome:
        return peek(self.cache, request, quotas, self.settings, reading)

    def release(self, outcome: QuotaOutcome) -> None:
        if outcome.reserve_key is not None:
            self.cache.release(outcome.namespace, outcome.reserve_key)


class LookOnlyGate:
    """Judges without reserving: offline reviews weigh each object against the inventory alone."""

    def __init__(self, gate: QuotaGate) -> None:
        self._gate = gate
        self.mode = f"{gate.mode}, look only"

    def admit(
        self, request: AdmissionRequest, quotas: Sequence[GPUQuota], reading: GpuCount | None = None
    ) -> QuotaOutcome:
        return self._gate.peek(request, quotas, reading)

    def peek(
        self, request: AdmissionRequest, quotas: Sequence[GPUQuota], reading: GpuCount | None = None
    ) -> QuotaOutcome:
        return self._gate.peek(request, quotas, reading)

    def release(self, outcome: QuotaOutcome) -> None:
        """Nothing was reserved."""


class _WithoutOwnReservation:
    """The cache, minus an earlier reservation of the same pod: a create that is retried (say,
    after another webhook refused it) must not count against itself."""

    def __init__(self, cache: ClusterCache, key: str | None) -> None:
        self.cache = cache
        self.key = key

    def namespace_labels(self, namespace: str) -> Mapping[str, str]:
        return self.cache.namespace_labels(namespace)

    def tally(self, namespace: str, settings: QuotaSettings) -> Tally:
        return self.cache.tally(namespace, settings, excluding=self.key)

    def dra(self) -> DraIndex | None:
        return self.cache.dra()

    def claims_in_use(self, namespace: str) -> frozenset[str]:
        return self.cache.claims_in_use(namespace)
