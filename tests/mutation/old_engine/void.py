"""NVIDIA_VISIBLE_DEVICES=void for every container of a Pod that gets no NVIDIA GPU. Pure.

Every CUDA base image sets `ENV NVIDIA_VISIBLE_DEVICES=all`, and the NVIDIA container
toolkit reads an image with `CUDA_VERSION` alone as `all` too (nvidia-container-toolkit
internal/config/image/cuda_image.go, devicesFromEnvvars). Where `nvidia` is the node's
default runtime, such a container gets every GPU of the node without any device plugin
allocation. Admission cannot see an image's ENV, but an `env` entry of the pod overrides
it (and any `envFrom`; among entries of one name the last wins), and `void` asks the toolkit
for nothing (devices.go).

`none` is not nothing: the toolkit reads it as a device list of one empty name, so every
modifier that runs "when devices are requested" still runs. The feature-gated ones add
NVIDIA_GDS, NVIDIA_MOFED, NVIDIA_GDRCOPY and NVIDIA_NVSWITCH devices (internal/modifier/gated.go,
cdi.go gatedDevices), the legacy hook passes NVIDIA_IMEX_CHANNELS and the MIG variables on
(cmd/nvidia-container-runtime-hook/container_config.go getNvidiaConfig), and jit-cdi adds
gated and IMEX devices (cdi.go newJitCDIModifier), whatever envFrom or the image set them to.
Only a value read as void stops all of them, so the effective entry of a container without
GPUs that reads as `none` (HAMi's webhook appends `none` to such containers, pkg/device/nvidia/
device.go MutateAdmission) is rewritten to `void` in place: one value, no duplicate entry, and
nothing of HAMi's reads `none` back. Any other value the container sets is kept: the
validating rules judge it.

A container gets GPUs from a GPU resource, KAI's fraction, a class's implicit extended resource,
or a DRA claim; with a DRA snapshot, a claim counts only if it resolves to GPU devices (a NIC's
or an IMEX channel's claim does not), and one that cannot be resolved still counts.
Only Pods are changed: a workload's template is stored as written, and its pods come here.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from webhook.accounting import names
from webhook.accounting.target import PodTarget
from webhook.dra.index import DraIndex
from webhook.dra.requests import UNRESOLVED, GpuRequests, gpu_requests
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
# Go's unicode.IsSpace in ASCII and Latin-1, which strings.TrimSpace trims; other characters are
# kept, so a value is never read as asking for less than the toolkit reads it as.
_GO_SPACE = " \t\n\v\f\r\x85\xa0"
Reading = Literal["void", "none", "all", "devices"]
ClaimGpus = Mapping[str, GpuRequests]  # a pod's claim entries: the requests that get GPUs


def reading(value: str) -> Reading:
    """What the toolkit makes of a device list: comma-separated, each part trimmed, empty parts
    dropped; nothing left, or any `void`, is void; else the first `all` or `none` decides
    (internal/config/image/cuda_image.go devicesFromEnvvars, devices.go NewVisibleDevices)."""
    parts = [trimmed for part in value.split(",") if (trimmed := part.strip(_GO_SPACE))]
    if not parts or VOID in parts:
        return "void"
    for part in parts:
        if part == "all":
            return "all"
        if part == "none":
            return "none"
    return "devices"


@dataclass(frozen=True)
class Voiding:
    """A container to void: `entry` is the index of its effective env entry to rewrite, or None
    when it has none and one is added."""

    list_name: str
    index: int
    container: dict[str, Any]
    entry: int | None


_KEEP = -1  # the container's own value stays, for the validating rules to judge


def _entry_to_void(container: dict[str, Any]) -> int | None:
    """None: add an entry; an index: rewrite that `none` entry; _KEEP: leave the container alone."""
    env = container.get("env")
    if not isinstance(env, list):
        return None
    last = next((i for i in range(len(env) - 1, -1, -1) if _names_variable(env[i])), None)
    if last is None:
        return None
    value = env[last].get("value", "")
    if "valueFrom" in env[last] or not isinstance(value, str):
        return _KEEP
    return last if reading(value) == "none" else _KEEP


def _names_variable(entry: object) -> bool:
    return isinstance(entry, dict) and entry.get("name") == VARIABLE


def claim_gpus(pod: dict[str, Any], dra: DraIndex | None, namespace: str) -> ClaimGpus | None:
    """What the pod's claims resolve to; None (every claim may get GPUs) without a snapshot or
    claims. Pods without claims, nearly all of them, pay one lookup."""
    spec = pod.get("spec")
    if dra is None or not isinstance(spec, dict) or not spec.get("resourceClaims"):
        return None
    return gpu_requests(pod, namespace, dra)


def containers_without_gpus(
    pod: dict[str, Any],
    shared_names: tuple[str, ...] = (),
    lists: tuple[str, ...] = ALL_LISTS,
    *,
    gpu_pod: bool = True,
    claims: ClaimGpus | None = None,
) -> Iterator[Voiding]:
    """Every container that gets no GPU and whose own value does not already ask for nothing.
    With `gpu_pod` False the caller knows that no container asks for a GPU resource and that the
    pod asks KAI for no fraction; only DRA claims are left to look at. `claims`: claim_gpus()."""
    spec = pod.get("spec")
    if not isinstance(spec, dict):
        return
    kai = _kai_container(pod) if gpu_pod else _never
    for list_name in lists:
        items = spec.get(list_name)
        if not isinstance(items, list):
            continue
        for index, container in enumerate(items):
            if not isinstance(container, dict):
                continue
            entry = _entry_to_void(container)
            if entry == _KEEP:
                continue
            if list_name in GPU_LISTS and (
                _gets_gpu(container, shared_names, gpu_pod, claims) or kai(list_name, index, container)
            ):
                continue
            yield Voiding(list_name, index, container, entry)


def _gets_gpu(
    container: dict[str, Any], shared_names: tuple[str, ...], gpu_pod: bool, claims: ClaimGpus | None
) -> bool:
    """An NVIDIA GPU from a device plugin (NVIDIA's, HAMi's, Volcano's vGPU, gpushare: each sets
    the variable itself, and `void` in the pod's env would override it), or a DRA claim."""
    if gpu_pod and resources.uses_nvidia_gpu(container, shared_names):
        return True
    section = container.get("resources")
    if not isinstance(section, dict):
        return False
    # A class's implicit extended resource (the scheduler makes its claim), or a DRA claim: the
    # devices reach the container through CDI, not through this variable. A pod found to get no
    # GPU gets none through an implicit name either.
    if gpu_pod and resources.asks_device_class(container):
        return True
    return _claims_get_gpu(section.get("claims"), claims)


def _claims_get_gpu(entries: object, claims: ClaimGpus | None) -> bool:
    if not entries:
        return False
    if claims is None or not isinstance(entries, list):
        return True
    return any(_claim_gets_gpu(entry, claims) for entry in entries)


def _claim_gets_gpu(entry: object, claims: ClaimGpus) -> bool:
    """A container's claim `{name, request}` gets GPUs unless the pod's entry it names resolved,
    and to no GPU request (or not to the one request named)."""
    name = entry.get("name") if isinstance(entry, dict) else None
    requests = claims.get(name, UNRESOLVED) if isinstance(name, str) else UNRESOLVED
    if requests is UNRESOLVED:
        return True
    request = entry.get("request") if isinstance(entry, dict) else None
    if request is None or request == "":
        return bool(requests)
    return not isinstance(request, str) or request in requests


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
    claims: ClaimGpus | None = None,
) -> list[PatchOperation]:
    """The JSON patch that voids a Pod's containers, built directly: this runs for every pod the
    cluster creates, and a copy and a diff would cost several times more."""
    patch: list[PatchOperation] = []
    for found in containers_without_gpus(pod, shared_names, lists, gpu_pod=gpu_pod, claims=claims):
        path = f"/spec/{found.list_name}/{found.index}/env"
        if found.entry is not None:
            patch.append({"op": "replace", "path": f"{path}/{found.entry}/value", "value": VOID})
        elif isinstance(found.container.get("env"), list):
            patch.append({"op": "add", "path": f"{path}/-", "value": dict(ENTRY)})
        else:
            patch.append({"op": "add", "path": path, "value": [dict(ENTRY)]})
    return patch


def void_devices(target: PodTarget, context: MutationContext) -> bool:
    """The mutator: after the sharing rewrite, so that it sees which containers keep GPUs."""
    if target.kind != "Pod":
        return False
    claims = claim_gpus(target.pod, context.dra, context.namespace)
    changed = False
    for found in list(containers_without_gpus(target.pod, context.shared_names, claims=claims)):
        env = found.container.get("env")
        if found.entry is not None:
            env[found.entry]["value"] = VOID  # type: ignore[index]
        else:
            found.container["env"] = [*env, dict(ENTRY)] if isinstance(env, list) else [dict(ENTRY)]
        changed = True
    return changed
