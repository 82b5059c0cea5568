"""`gpu-webhook policies check PATH…`: compile policy directories or files as the server would
load them (on top of the security bundle unless --no-bundle), and name every problem."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from webhook.errors import PolicyError, PolicyProblem
from webhook.policy.model import PolicySet
from webhook.policy.sources import PolicySources, load_policies


def add_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    group = commands.add_parser("policies", help="work with policy directories")
    actions = group.add_subparsers(title="actions", required=True, metavar="ACTION")
    check = actions.add_parser(
        "check", help="lint and compile policy directories or files, with the security bundle"
    )
    check.add_argument("paths", nargs="+", type=Path, metavar="PATH", help="a policy directory or file")
    check.add_argument(
        "--no-bundle", action="store_true", help="compile the paths alone, without the security bundle"
    )
    check.add_argument(
        "--strict",
        action="store_true",
        help="fail (exit 1) when documents of other projects' kinds are skipped, not only report them",
    )
    check.set_defaults(command=command)


def command(args: argparse.Namespace) -> int:
    sources = PolicySources(tuple(args.paths), bundle=not args.no_bundle)
    try:
        policies = load_policies(sources)
    except PolicyError as e:
        for problem in e.problems:
            print(problem, file=sys.stderr)
        _report_skipped(e.skipped)
        print(f"{len(e.problems)} problem(s) in {sources.describe()}", file=sys.stderr)
        return 1
    _report_skipped(policies.skipped)
    if policies.skipped and args.strict:
        print(f"{len(policies.skipped)} document(s) skipped in {sources.describe()}", file=sys.stderr)
        return 1
    print(f"{sources.describe()}: {contents(policies)}; version {policies.version}: OK")
    return 0


def _report_skipped(skipped: tuple[PolicyProblem, ...]) -> None:
    for problem in skipped:
        print(f"warning: {problem}", file=sys.stderr)


def contents(policies: PolicySet) -> str:
    """What the set holds, every kind named, so an empty kind is as visible as a full one."""
    constraints = policies.constraints.constraints if policies.constraints is not None else ()
    templates = policies.engine.templates if policies.engine is not None else {}
    held = (
        f"{_count(len(policies.sharing), 'GPU sharing policy', 'GPU sharing policies')}, "
        f"{_count(len(policies.quotas), 'GPU quota', 'GPU quotas')}, "
        f"{_count(len(constraints), 'constraint', 'constraints')} "
        f"of {_count(len(templates), 'template', 'templates')}" + _mutators(policies)
    )
    return held + (
        f", {_count(len(policies.skipped), 'document', 'documents')} skipped" if policies.skipped else ""
    )


def _mutators(policies: PolicySet) -> str:
    """Named once a set has Gatekeeper mutators (sets without them print as they always have)."""
    if policies.mutators is None:
        return ""
    return f", {_count(len(policies.mutators), 'Gatekeeper mutator', 'Gatekeeper mutators')}"


def _count(number: int, one: str, many: str) -> str:
    return f"{number} {one if number == 1 else many}"
