"""Which workload a pod belongs to: from cluster objects when given, else from the pod's name. Pure.

Controllers name their pods predictably: a Deployment's ReplicaSet adds a
pod-template-hash and a 5-character suffix, both drawn from the same 27-character
alphabet; a StatefulSet adds an ordinal; a CronJob's Job adds the scheduled minute.
A Job's pods and a DaemonSet's look alike (name plus suffix) and are reported as a
Job; an inventory with the pods (and their ReplicaSets and Jobs) removes every guess.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from webhook.types import KubeObject

_SAFE = "[bcdfghjklmnpqrstvwxz2456789]"
_PATTERNS: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("CronJob", re.compile(rf"(?P<name>.+)-[0-9]{{8,}}-{_SAFE}{{5}}")),
    ("Deployment", re.compile(rf"(?P<name>.+)-{_SAFE}{{6,10}}-{_SAFE}{{5}}")),
    ("Job", re.compile(rf"(?P<name>.+)-{_SAFE}{{5}}")),
    ("StatefulSet", re.compile(r"(?P<name>.+)-[0-9]{1,4}")),
)
# Labels controllers put on every pod that say nothing about which workload it is.
VOLATILE_LABELS = frozenset(
    {
        "pod-template-hash",
        "controller-revision-hash",
        "statefulset.kubernetes.io/pod-name",
        "apps.kubernetes.io/pod-index",
        "batch.kubernetes.io/job-completion-index",
        "batch.kubernetes.io/controller-uid",
        "controller-uid",
        "pod-template-generation",
    }
)
_PARENT_KINDS = {"ReplicaSet": "Deployment", "Job": "CronJob"}


@dataclass(frozen=True, order=True)
class Workload:
    namespace: str
    kind: str
    name: str

    def describe(self) -> str:
        return f"{self.kind}/{self.name}"


def owner_from_name(namespace: str, pod: str) -> Workload:
    for kind, pattern in _PATTERNS:
        match = pattern.fullmatch(pod)
        if match:
            return Workload(namespace, kind, match["name"])
    return Workload(namespace, "Pod", pod)


class OwnerIndex:
    """Pods, ReplicaSets and Jobs from an inventory: owner chains and pod labels."""

    def __init__(self, objects: Sequence[KubeObject] = ()) -> None:
        self._owners: dict[tuple[str, str, str], tuple[str, str]] = {}
        self._labels: dict[tuple[str, str], Mapping[str, str]] = {}
        for obj in objects:
            self._add(obj)

    def owner(self, namespace: str, pod: str) -> Workload:
        """The top controller of a pod in the inventory, else the one its name suggests."""
        found = self._owners.get(("Pod", namespace, pod))
        if found is None:
            return owner_from_name(namespace, pod)
        kind, name = found
        while kind in _PARENT_KINDS and (kind, namespace, name) in self._owners:
            kind, name = self._owners[(kind, namespace, name)]
        return Workload(namespace, kind, name)

    def selector(self, workload: Workload, pods: Sequence[str]) -> dict[str, str] | None:
        """Labels every listed pod carries (controller bookkeeping aside); None if unknown or none."""
        label_sets = [self._labels.get((workload.namespace, pod)) for pod in pods]
        if not label_sets or any(labels is None for labels in label_sets):
            return None
        common = dict(label_sets[0] or {})
        for labels in label_sets[1:]:
            common = {k: v for k, v in common.items() if (labels or {}).get(k) == v}
        common = {k: v for k, v in common.items() if k not in VOLATILE_LABELS}
        return dict(sorted(common.items())) or None

    def _add(self, obj: KubeObject) -> None:
        metadata = obj.get("metadata")
        kind = obj.get("kind")
        if not isinstance(metadata, dict) or not isinstance(kind, str):
            return
        namespace, name = str(metadata.get("namespace") or "default"), str(metadata.get("name") or "")
        controller = _controller(metadata.get("ownerReferences"))
        if controller is not None:
            self._owners[(kind, namespace, name)] = controller
        labels = metadata.get("labels")
        if kind == "Pod":
            self._labels[(namespace, name)] = (
                {str(k): str(v) for k, v in labels.items()} if isinstance(labels, dict) else {}
            )


def _controller(references: Any) -> tuple[str, str] | None:
    if not isinstance(references, list):
        return None
    for reference in references:
        if isinstance(reference, dict) and reference.get("controller") and reference.get("name"):
            return str(reference.get("kind", "")), str(reference["name"])
    return None
