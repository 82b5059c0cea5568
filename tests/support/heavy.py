"""The Deployments the heavy lane is measured and tested with: an ordinary one, and one that
several security rules refuse in every container (each refusal one more element of a Rego set)."""

from __future__ import annotations

from typing import Any


def deployment(
    name: str, containers: list[dict[str, Any]], volumes: list[Any] | None = None
) -> dict[str, Any]:
    spec: dict[str, Any] = {"containers": containers, **({"volumes": volumes} if volumes else {})}
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "namespace": "team"},
        "spec": {
            "selector": {"matchLabels": {"app": name}},
            "template": {"metadata": {"labels": {"app": name}}, "spec": spec},
        },
    }


def heavy_container(index: int) -> dict[str, Any]:
    return {
        "name": f"c{index}",
        "image": f"registry{index}.example/tool",
        "securityContext": {"privileged": True, "capabilities": {"add": ["SYS_ADMIN", "CAP_BPF"]}},
        "env": [{"name": "NVIDIA_VISIBLE_DEVICES", "value": "all"}, {"name": "NVIDIA_GDS", "value": "1"}],
        "volumeMounts": [{"name": "dev", "mountPath": f"/var/run/nvidia-container-devices/{index}"}],
    }


DEV = [{"name": "dev", "hostPath": {"path": "/dev"}}]
# 60 such containers: within every bound of webhook/validation/bounds.py, and heavy.
HEAVY_DEPLOYMENT = deployment("heavy", [heavy_container(i) for i in range(60)], DEV)
