"""The checkpoint sidecar: a volume, an agent container, and what GPU containers need to use it."""

from __future__ import annotations

from typing import Any

from tests.mutation.old_engine.sharing import KAI_CONTAINER
from webhook import kubeversion
from webhook.accounting import names
from webhook.accounting.target import PodTarget
from webhook.errors import AdmissionDenied
from webhook.mutation import resources
from webhook.mutation.context import MutationContext
from webhook.sharing_policy import Checkpoint

NAME = "gpuwebhook-checkpoint"
DIR_ENV = "CHECKPOINT_DIR"
INTERVAL_ENV = "CHECKPOINT_INTERVAL_SECONDS"
DEFAULT_RESOURCES = {"requests": {"cpu": "10m", "memory": "32Mi"}, "limits": {"memory": "128Mi"}}
SECURITY_CONTEXT = {
    "allowPrivilegeEscalation": False,
    "capabilities": {"drop": ["ALL"]},
    "seccompProfile": {"type": "RuntimeDefault"},
}


def checkpoint(target: PodTarget, context: MutationContext) -> bool:
    config = context.policy.checkpoint
    if config is None:
        return False
    native = config.native_sidecar and _native_supported(target, context)
    changed = _volume(target, config)
    changed |= _sidecar(target, config, native)
    for container in _gpu_containers(target, context):
        changed |= _mount(container, config)
        changed |= _env(container, config)
    changed |= _grace_period(target, config)
    return changed


def _native_supported(target: PodTarget, context: MutationContext) -> bool:
    version = context.kubernetes_version
    if kubeversion.has_native_sidecars(version):
        return True
    assert version is not None
    if _runs_to_completion(target):
        # A regular agent container never exits, so the Job's pod would never complete.
        raise AdmissionDenied(
            f"{target.describe()} runs to completion, but Kubernetes {kubeversion.show(version)} has no "
            "native sidecars (1.29): a checkpoint agent would keep it running forever; use a policy "
            "without checkpoint here, or upgrade the cluster"
        )
    context.warn(
        f"Kubernetes {kubeversion.show(version)} drops restartPolicy from init containers (native "
        "sidecars need 1.29): the checkpoint agent runs as a regular container instead"
    )
    return False


def _runs_to_completion(target: PodTarget) -> bool:
    """A Job's pod (or a Job or CronJob template): its containers are meant to exit."""
    if target.kind in ("Job", "CronJob"):
        return True
    owners = target.metadata.get("ownerReferences") or []
    return any(isinstance(o, dict) and o.get("kind") == "Job" for o in owners)


def _volume(target: PodTarget, config: Checkpoint) -> bool:
    volumes: list[dict[str, Any]] = target.spec.get("volumes") or []
    if any(v.get("name") == NAME for v in volumes):
        return False
    target.spec["volumes"] = [*volumes, {"name": NAME, **_copy(config.volume)}]
    return True


def _sidecar(target: PodTarget, config: Checkpoint, native: bool) -> bool:
    if any(c.get("name") == NAME for _, c in target.containers()):
        return False
    container = _agent(config)
    if not native:
        target.spec["containers"] = [*(target.spec.get("containers") or []), container]
        return True
    container["restartPolicy"] = "Always"  # a native sidecar: starts first, never blocks Job completion
    # Init containers start in order, and a native sidecar runs from its place on: before the
    # first init container that uses a GPU, so that one can already write checkpoints.
    init = list(target.spec.get("initContainers") or [])
    first_gpu = next((i for i, c in enumerate(init) if resources.uses_gpu(c)), len(init))
    init.insert(first_gpu, container)
    target.spec["initContainers"] = init
    return True


def _agent(config: Checkpoint) -> dict[str, Any]:
    return {
        "name": NAME,
        "image": config.image,
        "env": [
            *_checkpoint_env(config),
            {"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
            {"name": "POD_NAMESPACE", "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}}},
        ],
        "volumeMounts": [{"name": NAME, "mountPath": config.mount_path}],
        "resources": _copy(config.resources or DEFAULT_RESOURCES),
        "securityContext": _copy(SECURITY_CONTEXT),
    }


def _gpu_containers(target: PodTarget, context: MutationContext) -> list[dict[str, Any]]:
    """App and init containers that use a GPU (KAI's fraction container included): they write
    checkpoints, so they get the volume and where it is."""
    found = [c for _, c in target.containers() if c.get("name") != NAME]
    app = [c for c in target.spec.get("containers") or [] if c.get("name") != NAME]
    kai_name = target.annotations.get(KAI_CONTAINER) or (app[0].get("name") if app else None)
    kai_pod = names.asks_kai_share(target.annotations)
    return [
        c
        for c in found
        if resources.uses_gpu(c, context.shared_names) or (kai_pod and c.get("name") == kai_name)
    ]


def _mount(container: dict[str, Any], config: Checkpoint) -> bool:
    mounts: list[dict[str, Any]] = container.get("volumeMounts") or []
    if any(m.get("name") == NAME or m.get("mountPath") == config.mount_path for m in mounts):
        return False
    container["volumeMounts"] = [*mounts, {"name": NAME, "mountPath": config.mount_path}]
    return True


def _env(container: dict[str, Any], config: Checkpoint) -> bool:
    env: list[dict[str, Any]] = container.get("env") or []
    present = {e.get("name") for e in env}
    missing = [e for e in _checkpoint_env(config) if e["name"] not in present]
    if missing:
        container["env"] = env + missing
    return bool(missing)


def _checkpoint_env(config: Checkpoint) -> list[dict[str, Any]]:
    return [
        {"name": DIR_ENV, "value": config.mount_path},
        {"name": INTERVAL_ENV, "value": str(config.interval_seconds)},
    ]


def _grace_period(target: PodTarget, config: Checkpoint) -> bool:
    current = target.spec.get("terminationGracePeriodSeconds")
    if current is not None and current >= config.termination_grace_period_seconds:
        return False
    target.spec["terminationGracePeriodSeconds"] = config.termination_grace_period_seconds
    return True


def _copy(value: Any) -> Any:
    """A deep copy of plain policy data, so no two pods share a mutable dict."""
    if isinstance(value, dict):
        return {k: _copy(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_copy(v) for v in value]
    return value
