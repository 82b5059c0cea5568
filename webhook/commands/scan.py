"""`gpu-webhook scan`: judge existing Pods, workloads and Namespaces by the validation policies, once."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from webhook.audit.journal import Journal
from webhook.audit.setup import build_journal
from webhook.commands.common import add_policy_source_options, policy_sources
from webhook.config import EXEMPT_NAMESPACES, Settings
from webhook.errors import ConfigError
from webhook.inventory import load_inventory
from webhook.policy.model import PolicySet
from webhook.policy.sources import load_policies
from webhook.review import ReviewSettings
from webhook.scan.output import FORMATS, render
from webhook.scan.publish import Publisher
from webhook.scan.reports import FLAVOURS, Flavour, rules_of
from webhook.scan.sources import Snapshot, from_cluster, from_inventory
from webhook.scan.stream import ScanOutcome, scan_once


def add_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = commands.add_parser(
        "scan", help="judge existing pods, workloads and namespaces by the validation policies"
    )
    add_policy_source_options(parser)
    parser.add_argument("--inventory", type=Path, help="objects from a file (List, multi-document YAML)")
    parser.add_argument(
        "--kubeconfig", type=Path, help="without --inventory: default in-cluster, $KUBECONFIG, ~/.kube/config"
    )
    parser.add_argument("--audit-log", type=Path, help="append scan records to this audit log")
    parser.add_argument(
        "--exclude-namespaces",
        type=_csv,
        default=EXEMPT_NAMESPACES,
        help="comma-separated namespace globs never reviewed, as serve --exclude-namespaces",
    )
    parser.add_argument(
        "--dra-gpu-classes",
        type=_csv,
        default=(),
        help="comma-separated DRA device classes counted as GPUs, as serve --dra-gpu-classes",
    )
    parser.add_argument(
        "-o",
        "--output",
        choices=FORMATS,
        default="table",
        help="policyreport: wgpolicyk8s.io/v1alpha2 PolicyReports; openreports: openreports.io/v1alpha1 "
        "Reports; one per namespace and one cluster-wide, as YAML documents",
    )
    parser.add_argument(
        "--publish",
        nargs="?",
        const="policyreport",
        choices=FLAVOURS,
        help="write the reports to the cluster scanned (default policyreport), replacing our own",
    )
    parser.set_defaults(command=command)


def command(args: argparse.Namespace) -> int:
    if args.publish and args.inventory is not None:
        raise ConfigError("--publish writes reports to the cluster the scan reads: leave out --inventory")
    policies = load_policies(policy_sources(args))
    snapshot = _snapshot(args.inventory, args.kubeconfig, args.dra_gpu_classes)
    settings = ReviewSettings(excluded_namespaces=args.exclude_namespaces)
    journal = _journal(args.audit_log)
    reports = args.publish is not None or args.output in FLAVOURS
    try:
        outcome = scan_once(
            snapshot, policies, settings, sink=journal.append if journal else None, keep=True, reports=reports
        )
    finally:
        if journal is not None:
            journal.close()
    print(render(outcome, args.output, rules_of(policies)))
    published = _publish(args.publish, args.kubeconfig, outcome, policies) if args.publish else True
    return 1 if outcome.summary.by_action()["deny"] or not published else 0


def _publish(flavour: Flavour, kubeconfig: Path | None, outcome: ScanOutcome, policies: PolicySet) -> bool:
    """Write the reports; say on stderr what was written, and what was not and why."""
    from webhook import cluster  # the kubernetes client loads only for a live scan

    connection = cluster.connect(kubeconfig)
    if connection is None:  # _snapshot found one a moment ago
        raise ConfigError("the cluster scanned is no longer configured")
    done = Publisher(cluster.CustomObjectStore(connection), flavour).publish(outcome, policies)
    print(f"published {flavour} reports: {done.created} created, {done.updated} updated", file=sys.stderr)
    for where in done.foreign:
        print(f"left alone (not managed by gpu-webhook): {where}", file=sys.stderr)
    for failure in done.failed:
        print(f"not written: {failure}", file=sys.stderr)
    return done.ok


def _snapshot(inventory: Path | None, kubeconfig: Path | None, gpu_classes: tuple[str, ...]) -> Snapshot:
    if inventory is not None:
        return from_inventory(load_inventory(inventory), gpu_classes)
    from webhook import cluster  # the kubernetes client loads only for a live scan

    connection = cluster.connect(kubeconfig)
    if connection is None:
        raise ConfigError(
            "nothing to scan: no --inventory FILE, and no cluster (no in-cluster service account, "
            "$KUBECONFIG or ~/.kube/config)"
        )
    return from_cluster(cluster.lister(connection), f"cluster ({connection.description})", gpu_classes)


def _journal(path: Path | None) -> Journal | None:
    if path is None:
        return None
    journal = build_journal(Settings(audit_log=path))
    journal.open()
    return journal


def _csv(text: str) -> tuple[str, ...]:
    return tuple(part.strip() for part in text.split(",") if part.strip())
