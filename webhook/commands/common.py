"""What several offline commands share: building ReviewDeps from a policy directory and an inventory."""

from __future__ import annotations

import argparse
from pathlib import Path

from webhook import kubeversion
from webhook.inventory import EMPTY, Inventory, cache_from, load_inventory
from webhook.policy.loader import load_directory
from webhook.policy.model import PolicySet
from webhook.quota.gate import LocalGate, LookOnlyGate
from webhook.review import ReviewDeps


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


def offline_deps(
    policies: PolicySet | Path,
    inventory: Inventory,
    kubernetes_version: kubeversion.Version | None = None,
    gpu_classes: tuple[str, ...] = (),
) -> ReviewDeps:
    """What review() reads offline: the policies, and the inventory as the cluster's state;
    `gpu_classes`: DRA device classes counted as GPUs besides NVIDIA's."""
    cache = cache_from(inventory, gpu_classes=gpu_classes)
    return ReviewDeps(
        policies=policies if isinstance(policies, PolicySet) else load_directory(policies),
        namespace_labels=cache.namespace_labels,
        quota_gate=LookOnlyGate(LocalGate(cache)),
        kubernetes_version=kubernetes_version,
        dra=cache.dra(),
        allocatable=cache.allocatable,
    )


def read_inventory(path: Path | None) -> Inventory:
    return load_inventory(path) if path else EMPTY
