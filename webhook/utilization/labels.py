"""What a DCGM exporter series' labels say: which GPU (or MIG instance), and which pod holds it. Pure.

The exporter labels a GPU with `Hostname`, `gpu` (index), `UUID`, `modelName`, and
for a MIG instance `GPU_I_PROFILE` and `GPU_I_ID`. With its Kubernetes pod mapping
on, a GPU held by a pod also gets `namespace`, `pod` and `container`. When
Prometheus scrapes the exporter without `honor_labels`, its own target labels take
those names and the exporter's become `exported_namespace`, `exported_pod` and
`exported_container`; then a plain `pod` label names the exporter, not a workload.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

from webhook.config import PodLabels

EXPORTED = "exported_"
Labels = Mapping[str, str]


@dataclass(frozen=True, order=True)
class Device:
    """One GPU, or one MIG instance of a GPU, on one node."""

    node: str
    uuid: str
    index: str
    mig_instance: str = ""
    mig_profile: str = ""
    model_name: str = ""

    @property
    def key(self) -> tuple[str, str, str, str]:
        return (self.node, self.uuid, self.index, self.mig_instance)

    @property
    def is_mig(self) -> bool:
        return bool(self.mig_profile)

    def describe(self) -> str:
        mig = f" MIG {self.mig_profile} #{self.mig_instance}" if self.is_mig else ""
        return f"{self.node} GPU {self.index}{mig}"


@dataclass(frozen=True, order=True)
class PodRef:
    namespace: str
    pod: str
    container: str = ""


def device_of(labels: Labels) -> Device:
    return Device(
        node=labels.get("Hostname", labels.get("instance", "")),
        uuid=labels.get("UUID", ""),
        index=labels.get("gpu", ""),
        mig_instance=labels.get("GPU_I_ID", ""),
        mig_profile=labels.get("GPU_I_PROFILE", ""),
        model_name=labels.get("modelName", ""),
    )


def pod_reader(scheme: PodLabels, seen: Iterable[Labels]) -> Callable[[Labels], PodRef | None]:
    """How to read the pod from a series.

    `auto` decides per scrape job: a job where any series carries `exported_pod` was
    scraped without honor_labels, so its plain labels name the exporter. A job with
    no GPU held anywhere cannot tell; `exported` then says it outright.
    """
    exported_jobs = {labels.get("job", "") for labels in seen if EXPORTED + "pod" in labels}

    def read(labels: Labels) -> PodRef | None:
        exported = scheme == "exported" or (scheme == "auto" and labels.get("job", "") in exported_jobs)
        prefix = EXPORTED if exported else ""
        pod, namespace = labels.get(prefix + "pod"), labels.get(prefix + "namespace")
        if not pod or not namespace:
            return None
        return PodRef(namespace, pod, labels.get(prefix + "container", ""))

    return read
