"""Audit series on the service's own Prometheus registry."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

BATCH_BUCKETS = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024)


class AuditMetrics:
    def __init__(self, registry: CollectorRegistry) -> None:
        self.records = Counter(
            "gpu_webhook_audit_records", "Decision records written to the audit log.", registry=registry
        )
        self.write_failures = Counter(
            "gpu_webhook_audit_write_failures",
            "Decisions that could not be recorded (answered per --audit-failure-mode).",
            registry=registry,
        )
        self.writable = Gauge(
            "gpu_webhook_audit_writable",
            "1 while this worker can write its audit log; 0 from a failed write until the log "
            "holds the outage record (in --audit-failure-mode closed, /readyz is unready meanwhile).",
            registry=registry,
        )
        self.batch = Histogram(
            "gpu_webhook_audit_batch_records",
            "Records per group commit: how many decisions shared one write and fsync.",
            buckets=BATCH_BUCKETS,
            registry=registry,
        )
