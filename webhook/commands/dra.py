"""`gpu-webhook dra templates`: the ResourceClaimTemplates that `mode: dra` policies point pods at,
printed for GitOps. Admission creates nothing, so these must exist before such pods arrive."""

from __future__ import annotations

import argparse
import sys

import yaml

from webhook.commands.common import add_policy_source_options, policy_sources
from webhook.dra import templates
from webhook.errors import PolicyError
from webhook.policy.sources import load_policies

METADATA_NAME = "kubernetes.io/metadata.name"


def add_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    group = commands.add_parser("dra", help="Dynamic Resource Allocation helpers")
    actions = group.add_subparsers(title="actions", required=True, metavar="ACTION")
    shown = actions.add_parser(
        "templates", help="print the ResourceClaimTemplates mode dra needs in a namespace"
    )
    add_policy_source_options(shown)
    shown.add_argument("--namespace", required=True, metavar="NS")
    shown.add_argument(
        "--namespace-label",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a label of the namespace, for policies that select namespaces by label (repeatable)",
    )
    shown.set_defaults(command=command)


def command(args: argparse.Namespace) -> int:
    try:
        policies = load_policies(policy_sources(args))
    except PolicyError as e:
        for problem in e.problems:
            print(problem, file=sys.stderr)
        return 1
    labels = {METADATA_NAME: args.namespace}
    for pair in args.namespace_label:
        key, _, value = pair.partition("=")
        labels[key] = value
    needed = templates.needed(policies.sharing, args.namespace, labels)
    if not needed:
        print(f"no dra policy applies in namespace {args.namespace}", file=sys.stderr)
        return 0
    sys.stdout.write(yaml.safe_dump_all(needed, sort_keys=False, explicit_start=True, width=200))
    return 0
