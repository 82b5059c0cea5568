"""What several offline commands share: building ReviewDeps from a policy directory and an inventory."""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path

from webhook.objects import namespace_labels, read_objects
from webhook.policy.loader import load_directory
from webhook.review import ReviewDeps
from webhook.types import KubeObject


def add_policy_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--policies", type=Path, default=Path("policies"), help="policy directory")
    parser.add_argument("--inventory", type=Path, help="existing cluster objects (List, multi-document YAML)")


def offline_deps(policies: Path, inventory: Sequence[KubeObject]) -> ReviewDeps:
    labels = namespace_labels(inventory)
    return ReviewDeps(policies=load_directory(policies), namespace_labels=lambda ns: labels.get(ns, {}))


def read_inventory(path: Path | None) -> list[KubeObject]:
    return read_objects(path) if path else []
