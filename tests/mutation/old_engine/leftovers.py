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

import math
from dataclasses import replace
from typing import Any

from tests.mutation.old_engine.sharing import KAI_CONTAINER, MODE_SCHEDULERS
from webhook import gpu, quantity
from webhook.accounting import kai as kai_rules
from webhook.accounting import names
from webhook.accounting.needs import CORES, MEMORY
from webhook.accounting.target import PodTarget
from webhook.errors import AdmissionDenied
from webhook.fields import mapping
from webhook.mutation import resources
from webhook.mutation.context import MutationContext
from webhook.quantity import format_mib

HAMI_RESOURCES = (gpu.HAMI_MEMORY, gpu.HAMI_MEMORY_PERCENT, gpu.HAMI_CORES)
TRANSLATED_MODES = ("mig", "kai")


def hami_leftovers(target: PodTarget, context: MutationContext) -> bool:
    if _owned_by(target, context, "hami", gpu.HAMI_SCHEDULER):
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


def _owned_by(target: PodTarget, context: MutationContext, mode: str, scheduler: str) -> bool:
    """Whether the requests belong where they are: the policy's own mode, or an exclusive policy
    (which rewrites nothing) on a pod that keeps that scheduler. Any other mode rewrites the
    pod's GPUs, so another scheduler's requests could no longer mean what they asked."""
    if context.mode == mode:
        return True
    return context.mode == "exclusive" and final_scheduler(target, context) == scheduler


def final_scheduler(target: PodTarget, context: MutationContext) -> str | None:
    """The scheduler the pod ends with, as inject.scheduler decides it."""
    inject = context.policy.inject
    wanted = inject.scheduler_name or MODE_SCHEDULERS.get(context.mode)
    current = target.spec.get("schedulerName")
    if wanted is not None and (current in (None, "", gpu.DEFAULT_SCHEDULER) or inject.force):
        return wanted
    return current if isinstance(current, str) else None


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


KAI_ANNOTATIONS = (gpu.KAI_FRACTION, gpu.KAI_MEMORY, gpu.KAI_NUM_DEVICES, KAI_CONTAINER)


def kai_leftovers(target: PodTarget, context: MutationContext) -> bool:
    """KAI's fraction annotations on a pod that will not be scheduled by KAI: only KAI's binder
    reads them, so the pod would get no GPU at all. The fraction container (KAI's
    `gpu-fraction-container-name`, else the first container: KAI-Scheduler
    pkg/binder/common/gpu_access.go GetFractionContainerRef) asks for the devices instead, and
    the memory becomes the mode's memory ask, as for HAMi's resources."""
    annotations = target.annotations
    if context.mode == "kai" or final_scheduler(target, context) == gpu.KAI_SCHEDULER:
        # A pod that keeps kai-scheduler asks KAI on purpose: /validate refuses its fraction
        # where the policy shares GPUs another way (gpu-builtin/sharing-enforced).
        return False
    if not names.asks_kai_share(annotations):
        return False
    if any(key in context.policy.inject.annotations for key in KAI_ANNOTATIONS):
        return False  # the policy writes them itself: they are its choice, not a leftover
    if context.mode in ("timeslice", "mps"):
        raise AdmissionDenied(
            f"{target.describe()} asks for a KAI GPU fraction, which only kai-scheduler reads; "
            f"{context.mode} has no per-pod memory limit: remove it, or use a mig or hami policy"
        )
    container = _fraction_container(target)
    devices, memory, percent = _kai_ask(target, context)
    if resources.whole_gpus(container) is None:
        resources.put(container, gpu.GPU, str(devices), ("limits",))
    if percent is not None and context.mode == "hami":
        resources.put_if_absent(container, gpu.HAMI_MEMORY_PERCENT, str(percent), ("limits",))
    elif context.mode in (*TRANSLATED_MODES, "hami"):
        _record(target, context, memory, None)
    metadata_annotations = mapping(target.metadata, "annotations")
    for key in KAI_ANNOTATIONS:
        metadata_annotations.pop(key, None)
    context.warn(f"KAI's GPU fraction became {devices} {gpu.GPU} for the {context.mode} policy")
    return True


def _fraction_container(target: PodTarget) -> dict[str, Any]:
    name = target.annotations.get(KAI_CONTAINER)
    containers = [c for _, c in target.containers()]
    found = next((c for c in containers if name is not None and c.get("name") == name), None)
    app = target.spec.get("containers") or []
    if found is None and name is None and app:
        found = app[0]
    if found is None:
        raise AdmissionDenied(f"{target.describe()}: no container named {name!r} for the KAI fraction")
    return found


def _kai_ask(target: PodTarget, context: MutationContext) -> tuple[int, int | None, int | None]:
    """(devices, MiB per device, percent of the card) from KAI's annotations, checked as KAI does."""
    annotations = target.annotations
    found = kai_rules.problem(annotations, (c for _, c in target.containers()))
    if found is not None:
        raise AdmissionDenied(f"{target.describe()}: {found} (KAI's own check)")
    devices = int(str(annotations.get(gpu.KAI_NUM_DEVICES, "1")))
    if gpu.KAI_MEMORY in annotations:
        return devices, int(str(annotations[gpu.KAI_MEMORY])), None
    fraction = kai_rules.parse_go_float(str(annotations[gpu.KAI_FRACTION])) or 0.0
    if math.isnan(fraction):  # KAI's check lets NaN through (it compares false both ways)
        raise AdmissionDenied(f"{target.describe()}: {gpu.KAI_FRACTION} is not a number")
    percent = max(1, min(100, math.ceil(fraction * 100)))
    model = context.policy.sharing.gpu_model
    memory = math.ceil(gpu.model_memory_mib(model) * fraction) if model else None
    return devices, memory, percent
