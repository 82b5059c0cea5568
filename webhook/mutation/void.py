"""NVIDIA_VISIBLE_DEVICES=void for every container of a Pod that gets no NVIDIA GPU. Pure.

Every CUDA base image sets `ENV NVIDIA_VISIBLE_DEVICES=all`, and the NVIDIA container
toolkit reads an image with `CUDA_VERSION` alone as `all` too (nvidia-container-toolkit
internal/config/image/cuda_image.go, devicesFromEnvvars). Where `nvidia` is the node's
default runtime, such a container gets every GPU of the node without any device plugin
allocation. Admission cannot see an image's ENV, but an `env` entry of the pod overrides
it (and any `envFrom`), and `void` asks the toolkit for nothing (devices.go).

A container keeps whatever it sets itself: the validating rules judge that value.
Only Pods are changed: a workload's template is stored as written, and its pods come here.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from webhook.accounting import names
from webhook.accounting.target import PodTarget
from webhook.mutation import resources
from webhook.mutation.context import MutationContext
from webhook.types import PatchOperation

VARIABLE = "NVIDIA_VISIBLE_DEVICES"
VOID = "void"
ENTRY = {"name": VARIABLE, "value": VOID}
KAI_CONTAINER = "gpu-fraction-container-name"
# Where each kind of container may get GPUs from; ephemeral containers have no resources.
GPU_LISTS = ("initContainers", "containers")
ALL_LISTS = ("initContainers", "containers", "ephemeralContainers")


def sets_variable(container: dict[str, Any]) -> bool:
    env = container.get("env")
    return isinstance(env, list) and any(isinstance(e, dict) and e.get("name") == VARIABLE for e in env)


def containers_without_gpus(
    pod: dict[str, Any],
    shared_names: tuple[str, ...] = (),
    lists: tuple[str, ...] = ALL_LISTS,
    *,
    gpu_pod: bool = True,
) -> Iterator[tuple[str, int, dict[str, Any]]]:
    """(list name, index, container) for every container that gets no GPU and sets no value.
    With `gpu_pod` False the caller knows that no container asks for a GPU resource and that the
    pod asks KAI for no fraction; only DRA claims are left to look at."""
    spec = pod.get("spec")
    if not isinstance(spec, dict):
        return
    kai = _kai_container(pod) if gpu_pod else _never
    for list_name in lists:
        items = spec.get(list_name)
        if not isinstance(items, list):
            continue
        for index, container in enumerate(items):
            if not isinstance(container, dict) or sets_variable(container):
                continue
            if list_name in GPU_LISTS and (
                _gets_gpu(container, shared_names, gpu_pod) or kai(list_name, index, container)
            ):
                continue
            yield list_name, index, container


def _gets_gpu(container: dict[str, Any], shared_names: tuple[str, ...], gpu_pod: bool) -> bool:
    """An NVIDIA GPU from a device plugin (NVIDIA's, HAMi's, Volcano's vGPU, gpushare: each sets
    the variable itself, and `void` in the pod's env would override it), or a DRA claim."""
    if gpu_pod and resources.uses_nvidia_gpu(container, shared_names):
        return True
    section = container.get("resources")
    # A DRA claim, or a class's implicit extended resource (the scheduler makes its claim): the
    # devices reach the container through CDI, not through this variable. A pod found to get no
    # GPU gets none through an implicit name either.
    return isinstance(section, dict) and (
        bool(section.get("claims")) or (gpu_pod and resources.asks_device_class(container))
    )


def _kai_container(pod: dict[str, Any]) -> Callable[[str, int, dict[str, Any]], bool]:
    """Whether a container is the one KAI gives its GPU fraction to: the one named by
    `gpu-fraction-container-name`, else the first app container (KAI-Scheduler
    pkg/binder/common/gpu_access.go, GetFractionContainerRef)."""
    metadata = pod.get("metadata")
    annotations = metadata.get("annotations") if isinstance(metadata, dict) else None
    if not isinstance(annotations, dict):
        return _never
    if not names.asks_kai_share(annotations):
        return _never
    named = annotations.get(KAI_CONTAINER)
    if isinstance(named, str):
        return lambda _list, _index, container: container.get("name") == named
    return lambda list_name, index, _container: list_name == "containers" and index == 0


def _never(_list: str, _index: int, _container: dict[str, Any]) -> bool:
    return False


def void_patch(
    pod: dict[str, Any],
    shared_names: tuple[str, ...] = (),
    lists: tuple[str, ...] = ALL_LISTS,
    *,
    gpu_pod: bool = True,
) -> list[PatchOperation]:
    """The JSON patch that adds the variable to a Pod's containers, built directly: this runs for
    every pod the cluster creates, and a copy and a diff would cost several times more."""
    patch: list[PatchOperation] = []
    for list_name, index, container in containers_without_gpus(pod, shared_names, lists, gpu_pod=gpu_pod):
        path = f"/spec/{list_name}/{index}/env"
        if isinstance(container.get("env"), list):
            patch.append({"op": "add", "path": f"{path}/-", "value": dict(ENTRY)})
        else:
            patch.append({"op": "add", "path": path, "value": [dict(ENTRY)]})
    return patch


def void_devices(target: PodTarget, context: MutationContext) -> bool:
    """The mutator: after the sharing rewrite, so that it sees which containers keep GPUs."""
    if target.kind != "Pod":
        return False
    changed = False
    for _, _, container in list(containers_without_gpus(target.pod, context.shared_names)):
        env = container.get("env")
        container["env"] = [*env, dict(ENTRY)] if isinstance(env, list) else [dict(ENTRY)]
        changed = True
    return changed
