"""GPUSharingPolicy documents for recommendations, in the shape `policies check` accepts. Pure."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

import yaml

from webhook.policy.schemas import GROUP_VERSION
from webhook.utilization.advice import GIB, Fit
from webhook.utilization.owners import Workload

NAME_PREFIX = "advise-"
MAX_NAME = 253
MANAGED_BY = {"app.kubernetes.io/managed-by": "gpu-webhook-advise"}
ADVICE_ANNOTATION = "gpuwebhook.io/advice"
# A policy for one workload is more specific than one for its namespace, so it wins.
NAMESPACE_PRIORITY = 10
WORKLOAD_PRIORITY = 20


def policy_name(namespace: str, workload: Workload | None = None) -> str:
    parts = [namespace] + ([workload.kind.lower(), workload.name] if workload else [])
    name = re.sub(r"[^a-z0-9.-]+", "-", NAME_PREFIX + "-".join(parts).lower())
    return name[:MAX_NAME].strip("-.")


def policy_document(
    name: str, namespace: str, fit: Fit, selector: Mapping[str, str] | None, advice: str
) -> dict[str, Any]:
    match: dict[str, Any] = {"namespaces": [namespace]}
    if selector:
        match["podSelector"] = {"matchLabels": dict(selector)}
    return {
        "apiVersion": GROUP_VERSION,
        "kind": "GPUSharingPolicy",
        "metadata": {"name": name, "labels": dict(MANAGED_BY), "annotations": {ADVICE_ANNOTATION: advice}},
        "spec": {
            "priority": WORKLOAD_PRIORITY if selector else NAMESPACE_PRIORITY,
            "match": match,
            "sharing": sharing_section(fit),
        },
    }


def sharing_section(fit: Fit) -> dict[str, Any]:
    # allowOptOut leaves an escape: a pod annotated gpuwebhook.io/sharing=exclusive keeps whole GPUs.
    section: dict[str, Any] = {"mode": fit.mode}
    if fit.gpu_model is not None:
        section["gpuModel"] = fit.gpu_model
    if fit.memory_mib is not None:
        section["defaultMemory"] = f"{fit.memory_mib // GIB}Gi"
    if fit.cores is not None:
        section["cores"] = fit.cores
    section["allowOptOut"] = True
    return section


def policy_yaml(document: Mapping[str, Any], comments: list[str]) -> str:
    header = "".join(f"# {line}\n" for line in comments)
    return header + yaml.safe_dump(dict(document), sort_keys=False)
