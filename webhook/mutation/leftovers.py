"""A pod's own HAMi resources, when the policy's mode is not HAMi: translated or refused, never left.

`nvidia.com/gpumem`, `gpumem-percentage` and `gpucores` exist only for hami-scheduler's
extender; a pod that keeps them under another scheduler never schedules, and the memory it
asked for is lost. Before the mode's rewrite:

- mig and kai: the largest ask over the pod's containers becomes the pod's
  `gpuwebhook.io/gpu-memory` (and `gpu-cores`), which the rewrite reads; a percentage is of
  the policy's gpuModel card. Writing the annotation makes a second pass see the same ask.
- timeslice and mps: no memory limit exists there, so the pod is denied with the reason.
- exclusive (a whole GPU holds any share): dropped, with a warning.

A container with only HAMi resources asks for one GPU: HAMi's `defaultGPUNum`
(HAMi `pkg/device/nvidia/device.go`, mutateContainerResource).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from webhook import gpu, quantity
from webhook.errors import AdmissionDenied
from webhook.mutation import resources
from webhook.mutation.context import MutationContext
from webhook.mutation.fields import mapping
from webhook.mutation.needs import CORES, MEMORY
from webhook.mutation.target import PodTarget
from webhook.quantity import format_mib

HAMI_RESOURCES = (gpu.HAMI_MEMORY, gpu.HAMI_MEMORY_PERCENT, gpu.HAMI_CORES)
TRANSLATED_MODES = ("mig", "kai")


def hami_leftovers(target: PodTarget, context: MutationContext) -> bool:
    if context.mode == "hami" or target.spec.get("schedulerName") == gpu.HAMI_SCHEDULER:
        return False
    found = [(c, _hami_asks(target, c)) for _, c in target.containers()]
    found = [(c, asks) for c, asks in found if asks]
    if not found:
        return False
    names = ", ".join(sorted({n for _, asks in found for n in asks}))
    if context.mode in ("timeslice", "mps"):
        raise AdmissionDenied(
            f"{target.describe()} asks for {names}, which only hami-scheduler reads; "
            f"{context.mode} has no per-pod memory or compute limit: remove them, or use a mig or hami policy"
        )
    memory, cores = _largest(target, context, [asks for _, asks in found])
    for container, _ in found:
        _keep_one_gpu(container)
        for name in HAMI_RESOURCES:
            resources.drop(container, name)
    if context.mode in TRANSLATED_MODES:
        _record(target, context, memory, cores)
        context.warn(f"{names} translated into the {context.mode} request ({_said(memory, cores)})")
    else:
        context.warn(f"{names} dropped: only hami-scheduler reads them, and a whole GPU holds the ask")
    return True


def _hami_asks(target: PodTarget, container: dict[str, Any]) -> dict[str, int]:
    asks: dict[str, int] = {}
    for values in resources.sections(container).values():
        for name in HAMI_RESOURCES:
            if name in values:
                try:
                    asks[name] = quantity.parse_count(values[name], name)
                except quantity.QuantityError as e:
                    raise AdmissionDenied(f"{target.describe_container(container)}: {e}") from e
    return asks


def _largest(
    target: PodTarget, context: MutationContext, asks: list[dict[str, int]]
) -> tuple[int | None, int | None]:
    model = context.policy.sharing.gpu_model
    memories: list[int] = []
    for ask in asks:
        if gpu.HAMI_MEMORY in ask:
            memories.append(ask[gpu.HAMI_MEMORY])
        elif gpu.HAMI_MEMORY_PERCENT in ask:
            percent = ask[gpu.HAMI_MEMORY_PERCENT]
            if not 0 < percent <= 100:
                raise AdmissionDenied(f"{target.describe()}: {gpu.HAMI_MEMORY_PERCENT} must be 1-100")
            if model is None:
                raise AdmissionDenied(
                    f"{target.describe()} asks for {gpu.HAMI_MEMORY_PERCENT}, but policy "
                    f"{context.policy.name} names no gpuModel to take the percentage of"
                )
            memories.append(-(-gpu.model_memory_mib(model) * percent // 100))
    cores = [ask[gpu.HAMI_CORES] for ask in asks if ask.get(gpu.HAMI_CORES)]
    return max(memories, default=None), max(cores, default=None)


def _keep_one_gpu(container: dict[str, Any]) -> None:
    if resources.whole_gpus(container) is None:
        resources.put(container, gpu.GPU, "1", ("limits",))


def _record(target: PodTarget, context: MutationContext, memory: int | None, cores: int | None) -> None:
    needs = context.needs
    annotations = mapping(target.metadata, "annotations")
    if memory is not None and (needs.memory_mib is None or memory > needs.memory_mib):
        annotations[MEMORY] = f"{memory}Mi"
        needs = replace(needs, memory_mib=memory)
    if cores is not None and (needs.cores is None or cores > needs.cores):
        annotations[CORES] = str(min(cores, 100))
        needs = replace(needs, cores=min(cores, 100))
    context.needs = needs


def _said(memory: int | None, cores: int | None) -> str:
    parts = ([format_mib(memory)] if memory is not None else []) + ([f"{cores}% compute"] if cores else [])
    return ", ".join(parts) or "nothing to carry over"
