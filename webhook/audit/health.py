"""Whether this worker can write its audit log: what /readyz and the writable gauge report.

A failed write starts an outage. Only a record that says so ends it: the recorder retries an
`outage` record (when the outage began, why, how many decisions went unrecorded) until the log
takes it, so the log itself shows every stretch in which it could not record, and its chain
stays whole. Pure state: the recorder does the writing and the clock is passed in.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

from webhook.audit.chain import Record
from webhook.audit.record import envelope, rfc3339
from webhook.config import FailureMode

MAX_ERROR_CHARS = 200


@dataclass(frozen=True)
class Outage:
    since: dt.datetime
    error: str  # the first failure's message: the log's path and the OS's reason, nothing of a request
    unrecorded: int = 0  # decisions answered without a record while it lasted


class AuditHealth:
    """The outage in progress, if any. Not thread-safe: the event loop alone calls it."""

    def __init__(self, failure_mode: FailureMode) -> None:
        self.failure_mode = failure_mode
        self.outage: Outage | None = None

    @property
    def writable(self) -> bool:
        return self.outage is None

    def failed(self, error: str, now: dt.datetime, *, decisions: int = 0) -> bool:
        """Note a failed write (of `decisions` decision records); True when it starts an outage."""
        if self.outage is None:
            self.outage = Outage(now, error[:MAX_ERROR_CHARS], decisions)
            return True
        self.outage = Outage(self.outage.since, self.outage.error, self.outage.unrecorded + decisions)
        return False

    def recovered(self, outage: Outage) -> None:
        """The record of `outage` is in the log. Decisions refused meanwhile were counted into
        the record that was written only if they came before it: the rest start a new count."""
        if self.outage is None:
            return
        rest = self.outage.unrecorded - outage.unrecorded
        self.outage = None if rest <= 0 else Outage(self.outage.since, self.outage.error, rest)

    def readiness(self) -> tuple[bool, str]:
        """(ready, one line for /readyz). With --audit-failure-mode open the replica stays ready:
        it still answers as that mode asked, and unready replicas would leave kube-apiserver
        nothing to call, so every pod would meet the webhooks' failurePolicy (Fail: refused)."""
        if self.outage is None:
            return True, "writable"
        answered = "refused" if self.failure_mode == "closed" else "sent unrecorded"
        text = (
            f"unwritable since {rfc3339(self.outage.since)} ({self.outage.error}); "
            f"{self.outage.unrecorded} decisions {answered} (--audit-failure-mode {self.failure_mode})"
        )
        return self.failure_mode == "open", text


def outage_record(outage: Outage, *, now: dt.datetime, instance: str, failure_mode: FailureMode) -> Record:
    """The record that ends an outage: chained like any other, so `audit verify` holds it too."""
    entry = envelope("outage", now=now, instance=instance, policy_version="")
    entry.pop("policyVersion")
    entry.update(
        since=rfc3339(outage.since),
        error=outage.error,
        unrecorded=outage.unrecorded,
        failureMode=failure_mode,
    )
    return entry
