"""GPU request rewrites, one per sharing mode. Each edits the pod and says whether it changed it."""

from __future__ import annotations

from collections.abc import Callable
from fractions import Fraction
from typing import Any

from webhook import gpu
from webhook.errors import AdmissionDenied
from webhook.mutation import resources
from webhook.mutation.context import MutationContext
from webhook.mutation.fields import mapping
from webhook.mutation.target import PodTarget
from webhook.quantity import format_mib

Rewrite = Callable[[PodTarget, MutationContext], bool]
MODE_SCHEDULERS = {"hami": gpu.HAMI_SCHEDULER, "kai": gpu.KAI_SCHEDULER}
KAI_CONTAINER = "gpu-fraction-container-name"


def gpu_containers(target: PodTarget) -> list[tuple[str, dict[str, Any], resources.WholeGpus]]:
    """Every container (init containers included) that asks for whole GPUs."""
    found = []
    for list_name, container in target.containers():
        try:
            ask = resources.whole_gpus(container)
        except AdmissionDenied as e:
            raise AdmissionDenied(f"{target.describe_container(container)}: {e}") from e
        if ask is not None:
            found.append((list_name, container, ask))
    return found


def rename(target: PodTarget, context: MutationContext) -> bool:
    """timeslice and mps: nvidia.com/gpu: N becomes <resourceName>: N."""
    name = context.policy.sharing.resource_name or gpu.SHARED_GPU
    if name == gpu.GPU:
        return False
    changed = False
    for _, container, ask in gpu_containers(target):
        if ask.count > 1:
            context.warn(f"{ask.count} shares of one time-sliced or MPS GPU give no more compute than one")
        resources.drop(container, gpu.GPU)
        changed |= resources.put(container, name, str(ask.count), ask.sections)
    return changed


def mig(target: PodTarget, context: MutationContext) -> bool:
    """nvidia.com/gpu: N becomes N of the smallest MIG profile that holds the asked memory."""
    sharing = context.policy.sharing
    model = sharing.gpu_model or ""
    memory = context.needs.memory_mib or sharing.default_memory_mib or 1
    cores = context.needs.cores or sharing.cores
    changed = False
    for _, container, ask in gpu_containers(target):
        profile = gpu.fitting_profile(model, memory, cores)
        if profile is None:
            raise AdmissionDenied(_too_large(target, memory, cores, model))
        resources.drop(container, gpu.GPU)
        changed |= resources.put(container, profile.resource, str(ask.count), ask.sections)
    return changed


def _too_large(target: PodTarget, memory: int, cores: int | None, model: str) -> str:
    largest = gpu.largest_profile(model)
    asked = f"{format_mib(memory)} of GPU memory" + (f" and {cores}% of compute" if cores else "")
    return (
        f"{target.describe()} asks for {asked} per GPU, more than the largest MIG profile "
        f"on {model} ({largest.name}); ask for less, or use a policy with whole GPUs"
    )


def hami(target: PodTarget, context: MutationContext) -> bool:
    """Keep nvidia.com/gpu: N and add HAMi's per-GPU memory (MiB) and compute (%) limits."""
    memory = context.needs.memory_mib or context.policy.sharing.default_memory_mib
    cores = context.needs.cores or context.policy.sharing.cores
    changed = False
    for _, container, ask in gpu_containers(target):
        has_percentage = any(gpu.HAMI_MEMORY_PERCENT in v for v in resources.sections(container).values())
        if memory is not None and not has_percentage:
            changed |= resources.put_if_absent(container, gpu.HAMI_MEMORY, str(memory), ask.sections)
        if cores is not None:
            changed |= resources.put_if_absent(container, gpu.HAMI_CORES, str(cores), ask.sections)
    return changed


def kai(target: PodTarget, context: MutationContext) -> bool:
    """Whole GPUs become KAI's pod annotations: gpu-memory (MiB) or gpu-fraction, for one container."""
    asks = gpu_containers(target)
    if not asks:
        return False
    if len(asks) > 1:
        names = ", ".join(repr(c.get("name", "?")) for _, c, _ in asks)
        raise AdmissionDenied(
            f"{target.describe()}: KAI gives a GPU fraction to one container, but {names} ask for GPUs"
        )
    list_name, container, ask = asks[0]
    share = _kai_share(context)
    if share is None:
        context.warn("the asked share is a whole GPU, so it is left as nvidia.com/gpu")
        return False
    annotations = mapping(target.metadata, "annotations")
    if gpu.KAI_FRACTION not in annotations and gpu.KAI_MEMORY not in annotations:
        annotations.update(share)
    if ask.count > 1:
        annotations[gpu.KAI_NUM_DEVICES] = str(ask.count)
    if not _is_first_app_container(target, list_name, container):
        annotations[KAI_CONTAINER] = str(container.get("name", ""))
    resources.drop(container, gpu.GPU)
    return True


def _kai_share(context: MutationContext) -> dict[str, str] | None:
    sharing, needs = context.policy.sharing, context.needs
    memory = needs.memory_mib or (None if needs.cores else sharing.default_memory_mib)
    if memory is not None:
        card = gpu.model_memory_mib(sharing.gpu_model) if sharing.gpu_model else None
        return None if card is not None and memory >= card else {gpu.KAI_MEMORY: str(memory)}
    cores = needs.cores or sharing.cores or 100
    fraction = Fraction(cores, 100)
    return None if fraction >= 1 else {gpu.KAI_FRACTION: _decimal(fraction)}


def _decimal(fraction: Fraction) -> str:
    return f"{float(fraction):g}"


def _is_first_app_container(target: PodTarget, list_name: str, container: dict[str, Any]) -> bool:
    app = target.spec.get("containers") or []
    return list_name == "containers" and bool(app) and app[0] is container


REWRITES: dict[str, Rewrite] = {"timeslice": rename, "mps": rename, "mig": mig, "hami": hami, "kai": kai}
