"""The Service's record hook: one record per decision, written before the response leaves.

When the log cannot be written, `failure_mode` decides: `closed` (the default)
answers with a failure decision instead of an unrecorded one, `open` sends the
decision anyway and counts the loss. A failed write also starts an outage (health.py):
/readyz reports it, and a retry, backing off from RETRY_FIRST_SECONDS to RETRY_MAX_SECONDS,
ends it by writing the `outage` record. A successful decision write wakes the retry at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import logging
import os
import socket
import uuid
from collections.abc import Callable

from webhook.audit.facts import encode_facts
from webhook.audit.health import AuditHealth, outage_record
from webhook.audit.journal import AuditWriteError
from webhook.audit.metrics import AuditMetrics
from webhook.audit.record import decision_record, envelope
from webhook.audit.remote import HelperGone
from webhook.audit.writer import AuditWriter
from webhook.config import FailureMode
from webhook.decision import Decision, deny
from webhook.errors import AuditUnavailable
from webhook.types import AdmissionRequest, Endpoint

log = logging.getLogger("webhook.audit")
RETRY_FIRST_SECONDS = 0.5
RETRY_MAX_SECONDS = 5.0  # under the readiness probe's period x failureThreshold (10 s)


def default_instance() -> str:
    """The pod name (the hostname in Kubernetes) and the worker's pid."""
    return f"{socket.gethostname()}/{os.getpid()}"


class AuditRecorder:
    def __init__(
        self,
        writer: AuditWriter,
        *,
        policy_version: Callable[[], str],
        failure_mode: FailureMode,
        metrics: AuditMetrics,
        instance: str | None = None,
        replica: str = "",
        node: str = "",
        clock: Callable[[], dt.datetime] = lambda: dt.datetime.now(dt.UTC),
    ) -> None:
        self._writer = writer
        self._policy_version = policy_version
        self._failure_mode = failure_mode
        self._metrics = metrics
        self._instance = instance or default_instance()
        self._clock = clock
        self._replica = replica or socket.gethostname()
        self._node = node
        self.health = AuditHealth(failure_mode)
        self._wake = asyncio.Event()
        self._retry: asyncio.Task[None] | None = None
        metrics.writable.set(1)

    async def start(self) -> None:
        """Open the log and write this worker's `start` record before any decision.

        The record names the replica (stable across rescheduling in a StatefulSet) and the node,
        and, being chained like any other, its `prev` and `seq` say where this replica's log
        continues: after a pod is deleted or moved, a reader sees the new node and that nothing
        between the last record and this one is missing.
        """
        await self._writer.start()
        entry = envelope("start", now=self._clock(), instance=self._instance, policy_version="")
        entry.pop("policyVersion")  # not loaded yet when the worker starts
        entry.update(replica=self._replica, node=self._node)
        try:
            await self._writer.append(entry)
        except AuditWriteError as e:
            # Decisions follow --audit-failure-mode (and are counted); a missing start record
            # only loses a landmark, and the outage record that follows says the log was unwritable.
            log.error("audit start record not written", extra={"error": str(e)})
            self._failed(str(e), decisions=0)

    async def stop(self) -> None:
        """Stop retrying (at shutdown, before the writer closes)."""
        task, self._retry = self._retry, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    def readiness(self) -> tuple[bool, str]:
        return self.health.readiness()

    async def record(
        self,
        request: AdmissionRequest,
        endpoint: Endpoint,
        decision: Decision,
        seconds: float,
        body: bytes | None = None,
    ) -> Decision:
        """Write the decision's record before it is answered. `body`, the AdmissionReview's bytes as
        read, lets the journal helper build the record off this core (remote.py)."""
        try:
            await self._write(request, endpoint, decision, seconds, body)
        except AuditWriteError as e:
            self._failed(str(e), decisions=1)
            return self._unrecorded(request, endpoint, decision, str(e))
        except Exception as e:
            log.exception("audit record could not be built", extra={"uid": request["uid"]})
            return self._unrecorded(request, endpoint, decision, type(e).__name__)
        self._metrics.records.inc()
        if not self.health.writable:
            self._wake.set()  # the log takes records again: write the outage record now
        return decision

    async def _write(
        self,
        request: AdmissionRequest,
        endpoint: Endpoint,
        decision: Decision,
        seconds: float,
        body: bytes | None,
    ) -> None:
        now, policy_version = self._clock(), self._policy_version()
        if body is not None and self._writer.remote:
            try:
                facts = encode_facts(
                    decision,
                    endpoint=endpoint,
                    latency_ms=seconds * 1000,
                    now=now,
                    instance=self._instance,
                    policy_version=policy_version,
                )
            except TypeError:
                pass  # quota figures JSON cannot carry: the record is built here
            else:
                with contextlib.suppress(HelperGone):  # gone since: nothing was sent, the worker writes
                    await self._writer.append_decision(facts, body)
                    return
        entry = decision_record(
            request,
            decision,
            endpoint=endpoint,
            latency_ms=seconds * 1000,
            now=now,
            instance=self._instance,
            policy_version=policy_version,
        )
        await self._writer.append(entry)

    def _failed(self, error: str, *, decisions: int) -> None:
        if self.health.failed(error, self._clock(), decisions=decisions):
            self._metrics.writable.set(0)
            log.error(
                "audit log unwritable; /readyz says so until the log takes records again",
                extra={"error": error, "failure_mode": self._failure_mode},
            )
        if self._retry is None or self._retry.done():
            self._retry = asyncio.get_running_loop().create_task(self._recover())

    async def _recover(self) -> None:
        """Retry the outage record until the log takes it; then the worker is writable again."""
        delay = RETRY_FIRST_SECONDS
        while self.health.outage is not None:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(delay):
                    await self._wake.wait()
            self._wake.clear()
            delay = min(delay * 2, RETRY_MAX_SECONDS)
            await self._write_outage()

    async def _write_outage(self) -> None:
        outage = self.health.outage
        if outage is None:
            return
        entry = outage_record(
            outage, now=self._clock(), instance=self._instance, failure_mode=self._failure_mode
        )
        try:
            record = await self._writer.append(entry)
        except AuditWriteError:
            return  # still unwritable: the outage goes on, already logged once
        self.health.recovered(outage)
        if self.health.writable:
            self._metrics.writable.set(1)
            log.info(
                "audit log writable again",
                extra={"seq": record["seq"], "unrecorded": outage.unrecorded, "since": entry["since"]},
            )

    def _unrecorded(
        self, request: AdmissionRequest, endpoint: Endpoint, decision: Decision, why: str
    ) -> Decision:
        self._metrics.write_failures.inc()
        ref = uuid.uuid4().hex[:12]
        log.error(
            "decision not recorded in the audit log",
            extra={"uid": request["uid"], "endpoint": endpoint, "ref": ref, "error": why},
        )
        if self._failure_mode == "open":
            return decision
        if endpoint == "advisory":
            # The advisory webhook must never deny; failing the call lets its failurePolicy (Ignore)
            # apply, and nothing unrecorded is acknowledged.
            raise AuditUnavailable(f"audit log unavailable (ref {ref})")
        return deny(f"gpu-webhook cannot write its audit log (ref {ref}); failing closed", code=500)
