"""`gpu-webhook scan`: judge existing Pods, workloads and Namespaces by the validation policies, once."""

from __future__ import annotations

import argparse
from pathlib import Path

from webhook.audit.journal import Journal
from webhook.audit.setup import build_journal
from webhook.commands.common import add_policy_source_options, policy_sources
from webhook.config import EXEMPT_NAMESPACES, Settings
from webhook.errors import ConfigError
from webhook.inventory import load_inventory
from webhook.policy.sources import load_policies
from webhook.review import ReviewSettings
from webhook.scan.output import render
from webhook.scan.sources import Snapshot, from_cluster, from_inventory
from webhook.scan.stream import scan_once


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
    parser.add_argument("-o", "--output", choices=["table", "json"], default="table")
    parser.set_defaults(command=command)


def command(args: argparse.Namespace) -> int:
    policies = load_policies(policy_sources(args))
    snapshot = _snapshot(args.inventory, args.kubeconfig, args.dra_gpu_classes)
    settings = ReviewSettings(excluded_namespaces=args.exclude_namespaces)
    journal = _journal(args.audit_log)
    try:
        outcome = scan_once(snapshot, policies, settings, sink=journal.append if journal else None, keep=True)
    finally:
        if journal is not None:
            journal.close()
    print(render(outcome, args.output))
    return 1 if outcome.summary.by_action()["deny"] else 0


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
