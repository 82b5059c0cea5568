"""Wire the audit log from Settings: the composition root calls these, nothing else does."""

from __future__ import annotations

import sys
from collections.abc import Callable

from prometheus_client import CollectorRegistry

from webhook.audit.checkpoint import Checkpointer
from webhook.audit.journal import Journal, JournalOptions
from webhook.audit.journald import HelperConfig
from webhook.audit.metrics import AuditMetrics
from webhook.audit.recorder import AuditRecorder, default_instance
from webhook.audit.remote import JournalHelper
from webhook.audit.signing import SigningKey
from webhook.audit.syncer import FsyncHelper
from webhook.audit.writer import AuditWriter
from webhook.config import Settings


def build_recorder(
    settings: Settings, registry: CollectorRegistry, policy_version: Callable[[], str]
) -> tuple[AuditRecorder, AuditWriter] | None:
    if settings.audit_log is None:
        return None
    metrics = AuditMetrics(registry)
    helper = (
        JournalHelper(helper_config(settings), on_batch=metrics.batch.observe)
        if settings.audit_writer == "helper"
        else None
    )
    # Without the journal helper (--audit-writer worker, or it could not start, or exited) the
    # worker writes its records itself, its fsyncs in the fsync helper.
    writer = AuditWriter(
        build_journal(settings), on_batch=metrics.batch.observe, syncer=FsyncHelper(), helper=helper
    )
    recorder = AuditRecorder(
        writer,
        policy_version=policy_version,
        failure_mode=settings.audit_failure_mode,
        metrics=metrics,
        replica=settings.audit_replica,
        node=settings.audit_node,
    )
    return recorder, writer


def build_journal(settings: Settings) -> Journal:
    assert settings.audit_log is not None
    options = JournalOptions(
        path=settings.audit_log,
        fsync=settings.audit_fsync,
        max_bytes=settings.audit_max_bytes,
        keep=settings.audit_keep,
        copy_fd=sys.stdout.fileno() if settings.audit_stdout else None,
    )
    return Journal(options, checkpointer=_checkpointer(settings))


def helper_config(settings: Settings) -> HelperConfig:
    """The journal helper opens the same log as build_journal, and signs as this worker."""
    assert settings.audit_log is not None
    key = settings.audit_signing_key
    return HelperConfig(
        path=str(settings.audit_log),
        fsync=settings.audit_fsync,
        max_bytes=settings.audit_max_bytes,
        keep=settings.audit_keep,
        copy_fd=sys.stdout.fileno() if settings.audit_stdout else None,
        signing_key=None if key is None else str(key),
        checkpoint_records=settings.audit_checkpoint_records,
        checkpoint_seconds=settings.audit_checkpoint_seconds,
        instance=default_instance(),
    )


def check_audit(settings: Settings) -> None:
    """Fail at start-up, with one clear line, on an unusable log or key; repair a torn last line."""
    if settings.audit_log is None:
        return
    journal = build_journal(settings)
    journal.open()
    journal.close()


def _checkpointer(settings: Settings) -> Checkpointer | None:
    if settings.audit_signing_key is None:
        return None
    return Checkpointer(
        SigningKey.load(settings.audit_signing_key),
        every_records=settings.audit_checkpoint_records,
        every_seconds=settings.audit_checkpoint_seconds,
        instance=default_instance(),
    )
