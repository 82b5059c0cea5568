"""Where the pod is: a Pod itself, or the pod template of a workload object."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from webhook.fields import mapping
from webhook.types import KubeObject

CONTAINER_LISTS = ("initContainers", "containers")
TEMPLATE_PATHS: dict[str, tuple[str, ...]] = {
    "Pod": (),
    "Deployment": ("spec", "template"),
    "StatefulSet": ("spec", "template"),
    "DaemonSet": ("spec", "template"),
    "ReplicaSet": ("spec", "template"),
    "ReplicationController": ("spec", "template"),
    "Job": ("spec", "template"),
    "CronJob": ("spec", "jobTemplate", "spec", "template"),
    "PodTemplate": ("template",),
}


@dataclass(frozen=True)
class PodTarget:
    """A pod-shaped dict (metadata + spec) inside an object, and how to name it to a user."""

    pod: dict[str, Any]
    kind: str
    name: str
    # A workload's own labels (empty for a Pod): KAI's pod grouper reads its queue there first.
    owner_labels: Mapping[str, str] = field(default_factory=dict)

    @property
    def metadata(self) -> dict[str, Any]:
        return mapping(self.pod, "metadata")

    @property
    def spec(self) -> dict[str, Any]:
        return mapping(self.pod, "spec")

    @property
    def labels(self) -> dict[str, str]:
        return self._metadata_map("labels")

    @property
    def annotations(self) -> dict[str, str]:
        return self._metadata_map("annotations")

    def _metadata_map(self, key: str) -> dict[str, str]:
        """Read-only and shape-tolerant: the fast path looks before the shape is checked."""
        metadata = self.pod.get("metadata")
        found = metadata.get(key) if isinstance(metadata, dict) else None
        return found if isinstance(found, dict) else {}

    def containers(self) -> Iterator[tuple[str, dict[str, Any]]]:
        """(list name, container) for init containers, then app containers."""
        spec = self.pod.get("spec")
        if not isinstance(spec, dict):
            return
        for list_name in CONTAINER_LISTS:
            items = spec.get(list_name)
            if isinstance(items, list):
                yield from ((list_name, c) for c in items if isinstance(c, dict))

    def describe(self) -> str:
        return f"{self.kind} {self.name}" if self.name else self.kind

    def describe_container(self, container: dict[str, Any]) -> str:
        """How an error names one of the pod's containers."""
        return f"{self.describe()} container {container.get('name', '?')!r}"


def pod_target(obj: KubeObject | None) -> PodTarget | None:
    """The pod of a Pod or workload; None for other kinds or a template that is not a mapping."""
    if not isinstance(obj, dict):
        return None
    kind = obj.get("kind", "Pod")
    path = TEMPLATE_PATHS.get(kind) if isinstance(kind, str) else None
    if path is None:
        return None
    node: Any = obj
    for key in path:
        node = node.get(key) if isinstance(node, dict) else None
    if not isinstance(node, dict):
        return None
    metadata = obj.get("metadata")
    if not isinstance(metadata, dict):
        metadata = {}
    name = metadata.get("name") or metadata.get("generateName") or ""
    labels = metadata.get("labels") if kind != "Pod" else None
    return PodTarget(node, kind, str(name), labels if isinstance(labels, dict) else {})
