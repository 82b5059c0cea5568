"""`gpu-webhook quota status`: a table of namespaces, their GPU limits, what is used, and a bar each."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import orjson

from webhook.commands.common import add_policy_source_options, policy_sources
from webhook.config import Settings
from webhook.policy.sources import load_policies
from webhook.quota.status import render_table, status_rows


def add_quota_commands(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    group = commands.add_parser("quota", help="GPU quotas per namespace")
    actions = group.add_subparsers(title="actions", required=True, metavar="ACTION")
    status = actions.add_parser("status", help="limits, used amounts and a bar for every namespace")
    add_policy_source_options(status)
    status.add_argument("--inventory", type=Path, help="cluster objects from a file instead of the API")
    status.add_argument("--kubeconfig", type=Path, help="default: in-cluster, $KUBECONFIG, ~/.kube/config")
    status.add_argument("-o", "--output", choices=["table", "json"], default="table")
    status.set_defaults(command=quota_status)


def quota_status(args: argparse.Namespace) -> int:
    from webhook.clusterstate import snapshot

    sources = policy_sources(args)
    quotas = list(load_policies(sources).quotas)
    state = snapshot(Settings(inventory=args.inventory, kubeconfig=args.kubeconfig))
    rows = status_rows(quotas, state.cache)
    if args.output == "json":
        document = {"source": state.origin, "rows": [row.as_json() for row in rows]}
        sys.stdout.write(orjson.dumps(document, option=orjson.OPT_INDENT_2).decode() + "\n")
        return 0
    print(f"GPU quotas from {sources.describe()}, usage from {state.origin}", file=sys.stderr)
    if not quotas:
        print(f"no GPUQuota policies in {sources.describe()}")
    elif not rows:
        print("no namespace matches a GPUQuota")
    else:
        print(render_table(rows))
    return 0
