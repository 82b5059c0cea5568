"""What the scan reads: the kinds a validation policy judges, and how each is presented to review()."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

IGNORE_LABEL = "gpuwebhook.io/ignore"


@dataclass(frozen=True)
class ScanKind:
    kind: str
    api_version: str
    resource: str
    # Pods and Namespaces are written to after admission (binding sets a pod's nodeName, schedulers
    # add allocation annotations, administrators label namespaces), by hands no longer known; they
    # are judged as an UPDATE that changes nothing. A workload's template is all its author's, and
    # is judged as a CREATE: would applying it again pass?
    operation: str

    @property
    def group(self) -> str:
        return self.api_version.rpartition("/")[0]

    @property
    def version(self) -> str:
        return self.api_version.rpartition("/")[2]


NAMESPACE = ScanKind("Namespace", "v1", "namespaces", "UPDATE")
SCAN_KINDS: tuple[ScanKind, ...] = (
    NAMESPACE,
    ScanKind("Pod", "v1", "pods", "UPDATE"),
    ScanKind("ReplicationController", "v1", "replicationcontrollers", "CREATE"),
    ScanKind("Deployment", "apps/v1", "deployments", "CREATE"),
    ScanKind("StatefulSet", "apps/v1", "statefulsets", "CREATE"),
    ScanKind("DaemonSet", "apps/v1", "daemonsets", "CREATE"),
    ScanKind("ReplicaSet", "apps/v1", "replicasets", "CREATE"),
    ScanKind("Job", "batch/v1", "jobs", "CREATE"),
    ScanKind("CronJob", "batch/v1", "cronjobs", "CREATE"),
)
BY_KIND: Mapping[tuple[str, str], ScanKind] = {(k.api_version, k.kind): k for k in SCAN_KINDS}


def scan_kind(obj: Mapping[str, Any]) -> ScanKind | None:
    """The kind's scan entry, or None for objects the scan does not judge."""
    return BY_KIND.get((str(obj.get("apiVersion", "")), str(obj.get("kind", ""))))


def ignored(namespace: Mapping[str, Any]) -> bool:
    """The webhooks' namespaceSelector never sends objects of such a namespace; neither does the scan."""
    metadata = namespace.get("metadata")
    labels = metadata.get("labels") if isinstance(metadata, dict) else None
    return isinstance(labels, dict) and labels.get(IGNORE_LABEL) == "true"
