"""What several offline commands share: the policy options and reading an inventory (the ReviewDeps
they build come from webhook.offline.offline_deps)."""

from __future__ import annotations

import argparse
from pathlib import Path

from webhook import kubeversion
from webhook.inventory import EMPTY, Inventory, load_inventory


def add_policy_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--policies", type=Path, default=Path("policies"), help="policy directory")
    parser.add_argument("--inventory", type=Path, help="existing cluster objects (List, multi-document YAML)")
    parser.add_argument(
        "--kubernetes-version",
        type=_version,
        help="the target cluster's version, e.g. 1.28: below 1.29 a checkpoint agent is no native sidecar",
    )


def _version(text: str) -> kubeversion.Version:
    try:
        return kubeversion.parse(text)
    except kubeversion.VersionError as e:
        raise argparse.ArgumentTypeError(str(e)) from e


def read_inventory(path: Path | None) -> Inventory:
    return load_inventory(path) if path else EMPTY
