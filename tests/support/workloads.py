"""Pods, workloads and Namespaces for scan tests: escape routes the default security bundle must
report, benign objects it must not, and canary values that must never reach output or the audit log."""

from __future__ import annotations

import base64
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

ENV_CANARY = "canary-env-value-5Tq9"
ANNOTATION_CANARY = "canary-annotation-value-8Hd2"
SECRET_CANARY = "canary-secret-data-2Wz7"
CANARIES = (ENV_CANARY, ANNOTATION_CANARY, SECRET_CANARY, base64.b64encode(SECRET_CANARY.encode()).decode())
IMAGE = "nvcr.io/nvidia/cuda:12.4.0-base-ubuntu22.04"
TEMPLATE_KINDS = {
    "Deployment": "apps/v1",
    "StatefulSet": "apps/v1",
    "DaemonSet": "apps/v1",
    "ReplicaSet": "apps/v1",
    "Job": "batch/v1",
    "ReplicationController": "v1",
}


def container(gpus: int = 1, **extra: Any) -> dict[str, Any]:
    limits = {"nvidia.com/gpu": str(gpus)} if gpus else {"cpu": "1"}
    return {
        "name": "main",
        "image": IMAGE,
        "resources": {"limits": limits},
        "env": [{"name": "API_TOKEN", "value": ENV_CANARY}],
        **extra,
    }


def metadata(name: str, namespace: str, **extra: Any) -> dict[str, Any]:
    last_applied = json.dumps({"spec": {"containers": [{"env": [{"value": ENV_CANARY}]}]}})
    annotations = {
        "team.example.com/token": ANNOTATION_CANARY,
        "kubectl.kubernetes.io/last-applied-configuration": last_applied,
        **extra.pop("annotations", {}),
    }
    return {
        "name": name,
        "namespace": namespace,
        "uid": f"uid-{namespace}-{name}",
        # Read from the API, as a scan reads objects: only stored objects carry a resourceVersion.
        "resourceVersion": "4711",
        "annotations": annotations,
        **extra,
    }


def pod(
    name: str, namespace: str = "ml", *, main: Mapping[str, Any] | None = None, **spec: Any
) -> dict[str, Any]:
    meta_extra = spec.pop("meta", {})
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": metadata(name, namespace, **meta_extra),
        "spec": {"containers": [dict(main or container())], **spec},
    }


def workload(
    kind: str,
    name: str,
    namespace: str = "ml",
    *,
    main: Mapping[str, Any] | None = None,
    template_annotations: Mapping[str, str] | None = None,
    **spec: Any,
) -> dict[str, Any]:
    template = {
        "metadata": {"labels": {"app": name}, "annotations": dict(template_annotations or {})},
        "spec": {"containers": [dict(main or container())], **spec},
    }
    if kind == "CronJob":
        body: dict[str, Any] = {"schedule": "0 3 * * *", "jobTemplate": {"spec": {"template": template}}}
        api_version = "batch/v1"
    else:
        body = {"selector": {"matchLabels": {"app": name}}, "template": template}
        api_version = TEMPLATE_KINDS[kind]
    return {"apiVersion": api_version, "kind": kind, "metadata": metadata(name, namespace), "spec": body}


def namespace(name: str, **labels: str) -> dict[str, Any]:
    all_labels = {"kubernetes.io/metadata.name": name, **labels}
    meta = {"name": name, "labels": all_labels, "resourceVersion": "4711"}
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": meta}


SECRET = {
    "apiVersion": "v1",
    "kind": "Secret",
    "metadata": {"name": "creds", "namespace": "ml"},
    "data": {"token": base64.b64encode(SECRET_CANARY.encode()).decode()},
}


@dataclass(frozen=True)
class Case:
    obj: dict[str, Any]
    policies: frozenset[str] = frozenset()  # the constraints expected to report it; empty: benign

    @property
    def key(self) -> tuple[str, str, str]:
        meta = self.obj["metadata"]
        return self.obj["kind"], meta.get("namespace", meta["name"]), meta["name"]


def case(obj: dict[str, Any], *policies: str) -> Case:
    return Case(obj, frozenset(policies))


ESCAPES = [
    case(
        pod("visible-devices", main=container(env=[{"name": "NVIDIA_VISIBLE_DEVICES", "value": "all"}])),
        "gpu-no-device-environment",
    ),
    case(
        pod("env-from", main=container(envFrom=[{"secretRef": {"name": "creds"}}])),
        "gpu-no-device-environment",
    ),
    case(
        pod(
            "dev-nvidia",
            volumes=[{"name": "gpu", "hostPath": {"path": "/dev/nvidia0"}}],
            main=container(volumeMounts=[{"name": "gpu", "mountPath": "/dev/nvidia0"}]),
        ),
        "gpu-host-paths-allow-list",
    ),
    case(
        pod("sys-admin", main=container(securityContext={"capabilities": {"add": ["SYS_ADMIN"]}})),
        "gpu-no-host-capabilities",
    ),
    case(
        pod("privileged", main=container(securityContext={"privileged": True})),
        "gpu-no-privileged-containers",
    ),
    case(pod("host-pid", hostPID=True), "gpu-no-host-namespaces"),
    case(
        workload("Deployment", "trainer", main=container(securityContext={"privileged": True})),
        "gpu-no-privileged-containers",
    ),
    case(workload("Deployment", "pinned", nodeName="gpu-node-7"), "gpu-no-preset-node-name"),
    case(
        workload("Deployment", "forged", template_annotations={"hami.io/vgpu-node": "gpu-node-7"}),
        "gpu-scheduler-owned-annotations",
    ),
    case(workload("StatefulSet", "too-big", main=container(gpus=9)), "gpu-max-per-pod"),
    case(
        workload(
            "CronJob",
            "nightly",
            restartPolicy="Never",
            volumes=[{"name": "dri", "hostPath": {"path": "/dev/dri"}}],
        ),
        "gpu-host-paths-allow-list",
    ),
    case(workload("DaemonSet", "exporter", hostIPC=True), "gpu-no-host-namespaces"),
    # Device access needs no GPU request: these rules hold for every pod.
    case(
        pod("cpu-privileged", main=container(gpus=0, securityContext={"privileged": True})),
        "gpu-no-privileged-containers",
    ),
    case(
        pod(
            "cpu-device-list",
            volumes=[{"name": "null", "hostPath": {"path": "/dev/null"}}],
            main=container(
                gpus=0,
                volumeMounts=[{"name": "null", "mountPath": "/var/run/nvidia-container-devices/all"}],
            ),
        ),
        "gpu-host-paths-allow-list",
        "gpu-no-device-list-mounts",
    ),
    case(
        pod("cdi", meta={"annotations": {"cdi.k8s.io/gpu": "nvidia.com/gpu=all"}}, main=container(gpus=0)),
        "gpu-no-cdi-annotations",
    ),
]
BENIGN = [
    case(namespace("ml")),
    case(namespace("opted-out", **{"gpuwebhook.io/ignore": "true"})),
    case(workload("Deployment", "serving")),
    case(workload("ReplicationController", "legacy")),
    case(workload("Job", "train", restartPolicy="Never")),
    # Running pods carry what binding and the scheduler wrote after admission.
    case(
        pod(
            "scheduled",
            nodeName="gpu-node-3",
            meta={
                "annotations": {
                    "hami.io/vgpu-node": "gpu-node-3",
                    "hami.io/vgpu-devices-allocated": "GPU-1,1",
                }
            },
        )
    ),
    case(pod("cpu-only", main=container(gpus=0))),
]
SKIPPED = [
    pod("in-kube-system", "kube-system", main=container(securityContext={"privileged": True})),
    pod("in-opted-out", "opted-out", main=container(securityContext={"privileged": True})),
]
CASES = ESCAPES + BENIGN
INVENTORY = [*(c.obj for c in CASES), *SKIPPED, SECRET]
