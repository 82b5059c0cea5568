"""What several offline commands share: the policy options and reading an inventory (the ReviewDeps
they build come from webhook.offline.offline_deps)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from webhook import kubeversion
from webhook.inventory import EMPTY, Inventory, load_inventory
from webhook.policy.sources import PolicySources, resolve


def add_policy_options(parser: argparse.ArgumentParser) -> None:
    add_policy_source_options(parser)
    parser.add_argument("--inventory", type=Path, help="existing cluster objects (List, multi-document YAML)")
    parser.add_argument(
        "--kubernetes-version",
        type=_version,
        help="the target cluster's version, e.g. 1.28: below 1.29 a checkpoint agent is no native sidecar",
    )


def add_policy_source_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--policies",
        type=Path,
        action="append",
        metavar="PATH",
        help="a policy directory or file, added to the security bundle (repeatable; "
        "default: ./policies if there is one)",
    )
    parser.add_argument(
        "--no-bundle",
        action="store_true",
        help="leave the packaged security bundle out: only --policies is enforced",
    )


def policy_sources(args: argparse.Namespace) -> PolicySources:
    """The sets in force, named on stderr so no one mistakes which rules judged."""
    sources = resolve(args.policies, no_bundle=args.no_bundle)
    print(f"policies in force: {sources.describe()}", file=sys.stderr)
    for path in sources.paths:
        if path.is_dir() and not any(path.rglob("*.y*ml")):
            print(f"note: {path} holds no policy files (*.yaml, *.yml)", file=sys.stderr)
    return sources


def _version(text: str) -> kubeversion.Version:
    try:
        return kubeversion.parse(text)
    except kubeversion.VersionError as e:
        raise argparse.ArgumentTypeError(str(e)) from e


def read_inventory(path: Path | None) -> Inventory:
    return load_inventory(path) if path else EMPTY
