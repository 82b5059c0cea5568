"""`gpu-webhook policies check DIR`: compile a policy directory and name every problem."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from webhook.errors import PolicyError
from webhook.policy.loader import load_directory


def add_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    group = commands.add_parser("policies", help="work with policy directories")
    actions = group.add_subparsers(title="actions", required=True, metavar="ACTION")
    check = actions.add_parser("check", help="lint and compile a policy directory")
    check.add_argument("directory", type=Path, metavar="DIR")
    check.set_defaults(command=command)


def command(args: argparse.Namespace) -> int:
    try:
        policies = load_directory(args.directory)
    except PolicyError as e:
        for problem in e.problems:
            print(problem, file=sys.stderr)
        print(f"{len(e.problems)} problem(s) in {args.directory}", file=sys.stderr)
        return 1
    print(f"{args.directory}: {len(policies.sharing)} sharing policies, version {policies.version}: OK")
    return 0
