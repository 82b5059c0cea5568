"""One scan run: every object of a Snapshot through judge(), counted into a ScanSummary.

No I/O of its own (but a log line when review() fails on an object): objects come from the
snapshot, findings leave through a callback, and `keep_going` lets the caller stop a run
between two objects (shutdown, lost lease).
"""

from __future__ import annotations

import logging
import time
import uuid
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field

from webhook.match import glob_matches
from webhook.native.params import from_layout
from webhook.policy.model import PolicySet
from webhook.review import ReviewDeps, ReviewSettings
from webhook.scan.judge import Judgement, identity, judge, unreviewable
from webhook.scan.kinds import NAMESPACE, ScanKind, ignored
from webhook.scan.sources import Snapshot, every
from webhook.types import EnforcementAction, KubeObject
from webhook.validation.gatekeeper import Constraint

log = logging.getLogger("webhook.scan")
ACTIONS: tuple[EnforcementAction, ...] = ("deny", "warn", "dryrun")
PolicyKey = tuple[str, EnforcementAction]


@dataclass
class ScanSummary:
    scan_id: str
    origin: str
    policy_version: str
    objects: int = 0
    skipped: int = 0
    with_findings: int = 0
    denied: int = 0
    unreviewable: int = 0
    # Findings per (policy, action); every constraint of the policy set is present, at 0 if clean.
    violations: Counter[PolicyKey] = field(default_factory=Counter)
    complete: bool = True
    seconds: float = 0.0
    # Namespaces with a judged object (a Namespace counts as its own): each gets a report, if asked.
    namespaces: set[str] = field(default_factory=set)

    def add(self, judgement: Judgement) -> None:
        self.objects += 1
        self.namespaces.add(judgement.namespace)
        if judgement.findings:
            self.with_findings += 1
        if judgement.denied:
            self.denied += 1
        for finding in judgement.findings:
            self.violations[(finding.policy, finding.action)] += 1

    def by_action(self) -> dict[str, int]:
        totals: dict[str, int] = dict.fromkeys(ACTIONS, 0)
        for (_, action), count in self.violations.items():
            totals[action] += count
        return totals

    def line(self) -> str:
        """The closing line of `gpu-webhook scan`."""
        totals = self.by_action()
        text = (
            f"scanned {self.objects} objects from {self.origin}: {self.with_findings} with findings, "
            f"{self.denied} denied; violations: {totals['deny']} deny, {totals['warn']} warn, "
            f"{totals['dryrun']} dryrun"
        )
        if self.skipped:
            text += f"; {self.skipped} in excluded or ignored namespaces skipped"
        return text if self.complete else text + " (scan stopped before the end)"


def run_scan(
    snapshot: Snapshot,
    policies: PolicySet,
    settings: ReviewSettings,
    *,
    scan_id: str,
    on_finding: Callable[[Judgement], None],
    keep_going: Callable[[], bool] = lambda: True,
) -> ScanSummary:
    started = time.monotonic()
    labels = snapshot.namespace_labels()
    deps = ReviewDeps(
        policies=policies,
        settings=settings,
        namespace_labels=lambda name: labels.get(name, {}),
        quota_gate=None,
        gatekeeper_inventory=lambda: snapshot.gatekeeper_inventory,
        dra=snapshot.dra,
        native_params=from_layout(lambda: snapshot.gatekeeper_inventory),
    )
    summary = ScanSummary(scan_id, snapshot.origin, policies.version)
    summary.violations.update({(c.name, c.action): 0 for c in _constraints(policies)})
    ignoring = {identity(ns, NAMESPACE)[1] for ns in snapshot.namespaces if ignored(ns)}
    for obj, kind in every(snapshot):
        if not keep_going():
            summary.complete = False
            break
        namespace, _ = identity(obj, kind)
        if glob_matches(settings.excluded_namespaces, namespace) or (
            kind is not NAMESPACE and namespace in ignoring
        ):
            summary.skipped += 1
            continue
        judgement = _judge(obj, kind, deps, summary)
        summary.add(judgement)
        if judgement.findings:
            on_finding(judgement)
    summary.seconds = time.monotonic() - started
    return summary


def _judge(obj: KubeObject, kind: ScanKind, deps: ReviewDeps, summary: ScanSummary) -> Judgement:
    try:
        return judge(obj, kind, deps)
    except Exception:  # one object review() cannot judge must not end the scan
        summary.unreviewable += 1
        ref = uuid.uuid4().hex[:12]
        namespace, name = identity(obj, kind)
        where = {"ref": ref, "kind": kind.kind, "namespace": namespace, "object": name}
        log.exception("scan could not review an object", extra=where)
        return unreviewable(obj, kind, f"internal error (ref {ref})")


def _constraints(policies: PolicySet) -> tuple[Constraint, ...]:
    return policies.constraints.constraints if policies.constraints is not None else ()
