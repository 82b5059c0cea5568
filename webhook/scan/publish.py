"""Write a scan's policy reports to the cluster: create each, or replace ours in place.

A report is read first: absent, it is created; present and labelled as ours, it is replaced
with the resourceVersion just read, so a concurrent writer makes the API answer 409 and the
report is read again (at most ATTEMPTS times). A report of the same name that someone else
owns is left alone. Nothing is deleted. One report that cannot be written does not stop the
others: the outcome counts it, with the first reason.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from webhook.errors import ClusterError, Conflict
from webhook.policy.model import PolicySet
from webhook.scan.reports import APIS, MANAGED_BY, OWNED_LABELS, Flavour, build_reports, rules_of
from webhook.scan.stream import ScanOutcome

log = logging.getLogger("webhook.scan")
ATTEMPTS = 3


class ReportStore(Protocol):
    """Custom objects by apiVersion, plural and namespace ("" for cluster-scoped ones)."""

    def read(self, api_version: str, plural: str, namespace: str, name: str) -> dict[str, Any] | None: ...

    def create(self, api_version: str, plural: str, namespace: str, body: Mapping[str, Any]) -> None:
        """Raises Conflict if the object exists."""
        ...

    def replace(self, api_version: str, plural: str, namespace: str, body: Mapping[str, Any]) -> None:
        """Raises Conflict if the body's resourceVersion is no longer the stored one."""
        ...


@dataclass
class Published:
    created: int = 0
    updated: int = 0
    foreign: list[str] = field(default_factory=list)  # names of reports someone else owns
    failed: list[str] = field(default_factory=list)  # "<where>: <reason>", one per report

    @property
    def ok(self) -> bool:
        return not self.failed


@dataclass(frozen=True)
class Publisher:
    """A complete scan's reports, in one API flavour, to one cluster."""

    store: ReportStore
    flavour: Flavour

    def publish(self, outcome: ScanOutcome, policies: PolicySet) -> Published:
        reports = build_reports(
            outcome.entries, self.flavour, namespaces=outcome.summary.namespaces, rules=rules_of(policies)
        )
        api = APIS[self.flavour]
        return publish(reports, self.store, (api.plural, api.cluster_plural))


def publish(reports: Sequence[Mapping[str, Any]], store: ReportStore, plurals: tuple[str, str]) -> Published:
    """`plurals`: the namespaced and the cluster-scoped resource of the reports' kind."""
    outcome = Published()
    for report in reports:
        namespace = str(report["metadata"].get("namespace", ""))
        plural = plurals[0] if namespace else plurals[1]
        where = f"{plural} {namespace}/{report['metadata']['name']}" if namespace else plural
        try:
            _write(report, store, plural, namespace, outcome, where)
        except ClusterError as e:
            outcome.failed.append(f"{where}: {e}")
    if outcome.failed:
        log.warning(
            "some scan reports were not written",
            extra={"failed": len(outcome.failed), "first": outcome.failed[0][:300]},
        )
    return outcome


def _write(
    report: Mapping[str, Any], store: ReportStore, plural: str, namespace: str, outcome: Published, where: str
) -> None:
    for attempt in range(1, ATTEMPTS + 1):
        try:
            _write_once(report, store, plural, namespace, outcome, where)
            return
        except Conflict:  # written meanwhile (or created since it was read): read it again
            if attempt == ATTEMPTS:
                raise


def _write_once(
    report: Mapping[str, Any], store: ReportStore, plural: str, namespace: str, outcome: Published, where: str
) -> None:
    api_version, name = str(report["apiVersion"]), str(report["metadata"]["name"])
    current = store.read(api_version, plural, namespace, name)
    if current is None:
        store.create(api_version, plural, namespace, report)
        outcome.created += 1
    elif not _ours(current):
        outcome.foreign.append(where)
    else:
        version = str((current.get("metadata") or {}).get("resourceVersion", ""))
        metadata = {**report["metadata"], "resourceVersion": version}
        store.replace(api_version, plural, namespace, {**report, "metadata": metadata})
        outcome.updated += 1


def _ours(report: Mapping[str, Any]) -> bool:
    labels = (report.get("metadata") or {}).get("labels")
    return isinstance(labels, dict) and labels.get(MANAGED_BY) == OWNED_LABELS[MANAGED_BY]
