"""GPU request rewrites, one per sharing mode. Each edits the pod and says whether it changed it."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from webhook import gpu
from webhook.accounting import names
from webhook.accounting.needs import CORES as CORES_ANNOTATION
from webhook.accounting.target import PodTarget
from webhook.decision import WARNING_MAX_CHARS
from webhook.dra import templates
from webhook.errors import AdmissionDenied
from webhook.fields import mapping
from webhook.mutation import mig_nodes, resources
from webhook.mutation.context import MutationContext
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
    """timeslice and mps: nvidia.com/gpu: N becomes <resourceName>: N.

    With failRequestsGreaterThanOne (the device plugin's default for MPS, k8s-device-plugin
    api/config/v1/config.go), the kubelet fails a container asking for more than one share
    with UnexpectedAdmissionError (internal/rm/rm.go), so such a pod is denied here instead."""
    sharing = context.policy.sharing
    name = sharing.resource_name or gpu.SHARED_GPU
    changed = False
    for _, container, ask in gpu_containers(target):
        if ask.count > 1 and sharing.fail_requests_greater_than_one:
            raise AdmissionDenied(
                f"{target.describe_container(container)} asks for {ask.count} GPUs, but the device "
                f"plugin's {context.mode} sharing (failRequestsGreaterThanOne) gives a container "
                "at most 1 share; ask for 1, or use a policy with whole GPUs"
            )
        if ask.count > 1:
            context.warn(_shares_warning(ask.count, sharing.allocation_policy))
        if name == gpu.GPU:
            continue
        resources.drop(container, gpu.GPU)
        changed |= resources.put(container, name, str(ask.count), ask.sections)
    return changed


def _shares_warning(count: int, policy: str) -> str:
    """What N replicas give one container, by the device plugin's sharedDevicesAllocationPolicy
    (k8s-device-plugin internal/rm/allocate.go): spread over distinct GPUs, or packed on one."""
    if policy == "packed":
        return f"{count} shares packed on one time-sliced or MPS GPU give no more compute than one"
    return (
        f"{count} shares: the device plugin's distributed allocation spreads them over up to {count} "
        "GPUs, each still shared with other pods"
    )


def mig(target: PodTarget, context: MutationContext) -> bool:
    """nvidia.com/gpu: N becomes the smallest MIG profile whose real memory holds the ask.

    mixed strategy: the container asks for nvidia.com/mig-<profile>. single strategy (the GPU
    Operator's default): slices are advertised as nvidia.com/gpu, so the count stays and the
    pod is pinned by GPU Feature Discovery's labels (see webhook/mutation/mig_nodes.py)."""
    sharing = context.policy.sharing
    model = sharing.gpu_model or ""
    memory = context.needs.memory_mib or sharing.default_memory_mib or 1
    cores = context.needs.cores or sharing.cores
    sliced, kept = [], 0
    for _, container, ask in gpu_containers(target):
        if ask.count > 1 and not _slices_for_many(target, container, ask.count, context):
            kept += 1
        else:
            sliced.append((container, ask))
    if sharing.mig_strategy == "single" and sliced and kept:
        raise AdmissionDenied(
            f"{target.describe()} mixes MIG slices and whole GPUs, but with migStrategy single a "
            "node offers only one of them as nvidia.com/gpu; split the pod, or set multiGpu"
        )
    if kept and sharing.mig_strategy == "single":
        context.require(mig_nodes.whole_gpus())
    if not sliced:
        return False
    profile = gpu.fitting_profile(model, memory, cores)
    if profile is None:
        raise AdmissionDenied(_too_large(target, memory, cores, model))
    context.warn(_explanation(model, memory, cores, profile))
    if sharing.mig_strategy == "single":
        context.require(mig_nodes.single_strategy(profile, memory))
        return False  # slices are nvidia.com/gpu here: the count stays
    context.require(mig_nodes.mixed_strategy(profile, memory, gpu.memory_is_measured(model)))
    changed = False
    for container, ask in sliced:
        resources.drop(container, gpu.GPU)
        changed |= resources.put(container, profile.resource, str(ask.count), ask.sections)
    return changed


def _slices_for_many(
    target: PodTarget, container: dict[str, Any], count: int, context: MutationContext
) -> bool:
    """A CUDA process sees one MIG device, so N slices break tensor-parallel and NCCL jobs unless
    asked for on purpose."""
    return _multi_gpu(
        target,
        container,
        count,
        context,
        denied="; a process sees only one MIG slice, and policy {policy} denies multi-GPU containers",
        sliced=": {count} MIG slices, as the policy allows; each process sees one",
        whole=" keeps {count} whole GPUs: a process sees only one MIG slice",
    )


def _multi_gpu(
    target: PodTarget, container: dict[str, Any], count: int, context: MutationContext, **said: str
) -> bool:
    """The policy's multiGpu rule for a container asking for several GPUs, each outcome said in the
    mode's words (`denied`, `sliced`, `whole`); True: share (slice) them."""
    rule, who, policy = context.policy.sharing.multi_gpu, target.describe_container(container), context.policy
    words = {key: text.format(count=count, policy=policy.name) for key, text in said.items()}
    if rule == "deny":
        raise AdmissionDenied(f"{who} asks for {count} GPUs{words['denied']} (multiGpu: deny)")
    if rule == "slices":
        context.warn(f"{who}{words['sliced']} (multiGpu: slices)")
        return True
    context.warn(f"{who}{words['whole']} (multiGpu: wholeGpus)")
    return False


def _explanation(model: str, memory: int, cores: int | None, profile: gpu.MigProfile) -> str:
    size = "measured" if gpu.memory_is_measured(model) else "nominal"
    asked = format_mib(memory) + (f" and {cores}% compute" if cores else "")
    return (
        f"MIG {model}: asked {asked} -> {profile.name} "
        f"({profile.memory_mib} MiB real, {size}; {profile.slices}/{gpu.model_slices(model)} slices)"
    )


def _too_large(target: PodTarget, memory: int, cores: int | None, model: str) -> str:
    largest = gpu.largest_profile(model)
    asked = f"{format_mib(memory)} of GPU memory" + (f" and {cores}% of compute" if cores else "")
    return (
        f"{target.describe()} asks for {asked} per GPU, more than the largest MIG profile "
        f"on {model} ({largest.name}, {largest.memory_mib} MiB); ask for less, "
        "or use a policy with whole GPUs"
    )


def hami(target: PodTarget, context: MutationContext) -> bool:
    """Keep nvidia.com/gpu: N and add HAMi's per-GPU memory (MiB) and compute (%) limits.

    Only hami-scheduler's extender knows these resources (HAMi pkg/scheduler/webhook.go
    skips pods with another scheduler): a pod that keeps another scheduler is left alone.
    HAMi's defaultMemory is 0, which gives a pod that states no memory the whole card
    (pkg/device/nvidia/device.go, GenerateResourceRequests), so a cores-only ask also gets
    the same percentage of memory."""
    if _keeps_other_scheduler(target, context):
        context.warn(
            f"schedulerName {target.spec.get('schedulerName')!r} kept: HAMi's limits need "
            f"{gpu.HAMI_SCHEDULER}, so none were added"
        )
        return False
    memory = context.needs.memory_mib or context.policy.sharing.default_memory_mib
    cores = context.needs.cores or context.policy.sharing.cores
    changed = _use_gpu_type(target, context)
    for _, container, ask in gpu_containers(target):
        if ask.count > 1 and not _share_many(target, container, ask.count, context, _hami_cap(memory, cores)):
            continue
        present = {n for v in resources.sections(container).values() for n in v}
        has_memory = gpu.HAMI_MEMORY in present or gpu.HAMI_MEMORY_PERCENT in present
        if memory is not None and not has_memory:
            changed |= resources.put(container, gpu.HAMI_MEMORY, str(memory), ask.sections)
        elif cores is not None and not has_memory:
            changed |= resources.put(container, gpu.HAMI_MEMORY_PERCENT, str(cores), ask.sections)
        if cores is not None:
            changed |= resources.put_if_absent(container, gpu.HAMI_CORES, str(cores), ask.sections)
    return changed


def _hami_cap(memory: int | None, cores: int | None) -> str:
    parts = ([format_mib(memory)] if memory is not None else []) + (
        [f"{cores}%"] if cores is not None else []
    )
    return " and ".join(parts) or "the policy's share"


def _share_many(
    target: PodTarget, container: dict[str, Any], count: int, context: MutationContext, share: str
) -> bool:
    """Where HAMi or KAI would share each of several GPUs: a training job that asked for whole GPUs
    must not shrink without a word."""
    mode = context.policy.sharing.mode
    return _multi_gpu(
        target,
        container,
        count,
        context,
        denied=f", and policy {{policy}} denies sharing a multi-GPU container by {mode}",
        sliced=f": each of its {{count}} GPUs is shared by {mode}, capped at {share}",
        whole=f" keeps {{count}} whole GPUs, unshared by {mode}",
    )


def _keeps_other_scheduler(target: PodTarget, context: MutationContext) -> bool:
    """Mirrors inject.scheduler: a pod's own scheduler wins unless the policy forces. The policy's
    schedulerName, if any, names HAMi's scheduler in this cluster (its chart can rename it)."""
    inject = context.policy.inject
    hami_scheduler = inject.scheduler_name or gpu.HAMI_SCHEDULER
    current = target.spec.get("schedulerName")
    if current in (None, "", gpu.DEFAULT_SCHEDULER) or inject.force:
        return False
    return bool(current != hami_scheduler)


def _use_gpu_type(target: PodTarget, context: MutationContext) -> bool:
    sharing = context.policy.sharing
    if not sharing.set_gpu_type or sharing.gpu_model is None:
        return False
    annotations = mapping(target.metadata, "annotations")
    if gpu.HAMI_USE_GPU_TYPE in annotations:
        return False
    annotations[gpu.HAMI_USE_GPU_TYPE] = gpu.hami_card_types(sharing.gpu_model)
    return True


def kai(target: PodTarget, context: MutationContext) -> bool:
    """Whole GPUs become KAI's pod annotations: gpu-memory (MiB) or gpu-fraction, for one container."""
    asks = gpu_containers(target)
    if not asks:
        return False
    if len(asks) > 1:
        which = ", ".join(repr(c.get("name", "?")) for _, c, _ in asks)
        raise AdmissionDenied(
            f"{target.describe()}: KAI gives a GPU fraction to one container, but {which} ask for GPUs"
        )
    list_name, container, ask = asks[0]
    share = _kai_share(context)
    if share is None:
        context.warn("the asked memory is a whole GPU, so it is left as nvidia.com/gpu")
        return False
    if ask.count > 1 and not _share_many(target, container, ask.count, context, _kai_cap(share)):
        return False
    annotations = mapping(target.metadata, "annotations")
    if not names.asks_kai_share(annotations):
        annotations.update(share)
    if ask.count > 1:
        annotations[gpu.KAI_NUM_DEVICES] = str(ask.count)
    if not _is_first_app_container(target, list_name, container):
        annotations[KAI_CONTAINER] = str(container.get("name", ""))
    resources.drop(container, gpu.GPU)
    return True


def _kai_share(context: MutationContext) -> dict[str, str] | None:
    """KAI's share is of memory only (KAI-Scheduler docs/gpu-sharing/README.md: gpu-fraction 0.5
    "is allowed to consume up to half of a GPU device memory"); it has no compute limit."""
    sharing, needs = context.policy.sharing, context.needs
    if needs.cores is not None:
        context.warn(f"{CORES_ANNOTATION} ignored: KAI shares GPU memory only, not compute")
    memory = needs.memory_mib or sharing.default_memory_mib
    if memory is None:
        return None
    card = gpu.model_memory_mib(sharing.gpu_model) if sharing.gpu_model else None
    return None if card is not None and memory >= card else {gpu.KAI_MEMORY: str(memory)}


def _kai_cap(share: dict[str, str]) -> str:
    return " ".join(f"{key} {value}" for key, value in share.items())


def _is_first_app_container(target: PodTarget, list_name: str, container: dict[str, Any]) -> bool:
    app = target.spec.get("containers") or []
    return list_name == "containers" and bool(app) and app[0] is container


def dra(target: PodTarget, context: MutationContext) -> bool:
    """nvidia.com/gpu: N becomes a claim on the policy's ResourceClaimTemplate for that shape.

    The driver shares a device only among the containers of one claim. Where the policy shares
    (TimeSlicing, MPS, MIG with migSharing), every GPU container of the pod references one
    pod-level claim, templates.SHARED_CLAIM, made from the template for the largest count: they
    share its devices. Otherwise each container gets its own claim. Either way the claim is the
    pod's own: other pods never share it. The template is named, never created, here: it exists
    beforehand (see webhook/dra/templates.py). Idempotent: a rewritten container asks for no
    nvidia.com/gpu."""
    asks = gpu_containers(target)
    if not asks:
        return False
    profile = _dra_profile(target, context)
    if templates.shares_claim(context.policy):
        _dra_shared(target, context, asks, profile)
    else:
        for _, container, ask in asks:
            _dra_own(target, context, container, templates.Shape(ask.count, profile))
    return True


def _dra_own(
    target: PodTarget, context: MutationContext, container: dict[str, Any], shape: templates.Shape
) -> None:
    name = templates.claim_name(str(container.get("name", "")))
    template = _point_claim(target, context, name, shape)
    _claim_for(container, name)
    _warn_fallbacks(context, shape)
    context.warn(
        f"needs ResourceClaimTemplate {template}: claim {name} gives {_devices(shape)} "
        f"to container {container.get('name', '?')} alone"
    )


def _dra_shared(
    target: PodTarget,
    context: MutationContext,
    asks: list[tuple[str, dict[str, Any], resources.WholeGpus]],
    profile: gpu.MigProfile | None,
) -> None:
    """One claim for the pod, as large as its largest container's ask. A claim already there from
    this policy (a pod rewritten before, with a container added since) keeps its count if larger."""
    name = templates.SHARED_CLAIM
    kept = templates.shape_named(context.policy, _pod_claim(target, name).get("resourceClaimTemplateName"))
    count = max([ask.count for _, _, ask in asks] + ([kept.count] if kept is not None else []))
    shape = templates.Shape(count, profile)
    template = _point_claim(target, context, name, shape)
    for _, container, _ in asks:
        _claim_for(container, name)
    _warn_fallbacks(context, shape)
    sharing = templates.sharing_of(context.policy)
    context.warn(_shared_warning(_sharers(target, name), _devices(shape), name, sharing))
    context.warn(f"needs ResourceClaimTemplate {template}: claim {name} gives {_devices(shape)}")


def _warn_fallbacks(context: MutationContext, shape: templates.Shape) -> None:
    taken = templates.fallbacks(context.policy, shape)
    if taken and shape.profile is not None:
        context.warn(
            f"if no {shape.profile.name} slice is free, the claim takes {', then '.join(taken)} "
            "(firstAvailable)"
        )


def _shared_warning(containers: list[str], devices: str, claim: str, sharing: str) -> str:
    """Says what is shared, and that it stays in the pod, within the 120 characters of a warning."""
    several = len(containers) > 1
    verb = "share" if several else "holds"
    tail = f" {verb} {devices} through claim {claim} ({sharing}); other pods do not share it"
    who = f"container{'s' if several else ''} {', '.join(containers)}"
    if len(who) + len(tail) >= WARNING_MAX_CHARS:
        who = f"{len(containers)} container{'s' if several else ''}"
    return who + tail


def _sharers(target: PodTarget, claim: str) -> list[str]:
    return [
        str(container.get("name", "?"))
        for _, container in target.containers()
        if any(c.get("name") == claim for c in _claims_of(container))
    ]


def _claims_of(container: dict[str, Any]) -> list[dict[str, Any]]:
    claims = (container.get("resources") or {}).get("claims")
    return [c for c in claims if isinstance(c, dict)] if isinstance(claims, list) else []


def _devices(shape: templates.Shape) -> str:
    plural = "" if shape.count == 1 else "s"
    if shape.profile is None:
        return f"{shape.count} GPU{plural}"
    return f"{shape.count} MIG {shape.profile.name} slice{plural}"


def _pod_claim(target: PodTarget, name: str) -> dict[str, Any]:
    claims = target.spec.get("resourceClaims")
    found = (
        [c for c in claims if isinstance(c, dict) and c.get("name") == name]
        if isinstance(claims, list)
        else []
    )
    return found[0] if found else {}


def _point_claim(target: PodTarget, context: MutationContext, name: str, shape: templates.Shape) -> str:
    """The pod's claim `name` made from the policy's template for `shape`. An entry of that name
    that is not from one of the policy's templates is the pod's own: it is not replaced."""
    template = templates.template_name(context.policy, shape)
    existing = _pod_claim(target, name)
    if existing and templates.shape_named(context.policy, existing.get("resourceClaimTemplateName")) is None:
        raise AdmissionDenied(
            f"{target.describe()} has its own pod claim {name!r}, the name policy {context.policy.name} "
            "gives the claim for its GPUs; rename that claim"
        )
    if existing:
        existing["resourceClaimTemplateName"] = template  # ours from before: kept in its place
    else:
        target.spec.setdefault("resourceClaims", []).append(
            {"name": name, "resourceClaimTemplateName": template}
        )
    return template


def _claim_for(container: dict[str, Any], name: str) -> None:
    """The container asks for the claim instead of nvidia.com/gpu."""
    resources.drop(container, gpu.GPU)
    _use_claim(mapping(container, "resources"), name)
    _drop_empty_sections(container)


def _dra_profile(target: PodTarget, context: MutationContext) -> gpu.MigProfile | None:
    sharing = context.policy.sharing
    if sharing.dra is None or sharing.dra.strategy != "MIG":
        return None
    model = sharing.gpu_model or ""
    memory = context.needs.memory_mib or sharing.default_memory_mib or 1
    cores = context.needs.cores or sharing.cores
    profile = gpu.fitting_profile(model, memory, cores)
    if profile is None:
        raise AdmissionDenied(_too_large(target, memory, cores, model))
    context.warn(_explanation(model, memory, cores, profile))
    return profile


def _drop_empty_sections(container: dict[str, Any]) -> None:
    container_resources = container["resources"]
    for section in resources.SECTIONS:
        if container_resources.get(section) == {}:
            del container_resources[section]


def _use_claim(container_resources: dict[str, Any], name: str) -> None:
    claims = container_resources.setdefault("claims", [])
    if not any(c.get("name") == name for c in claims):
        claims.append({"name": name})


REWRITES: dict[str, Rewrite] = {
    "timeslice": rename,
    "mps": rename,
    "mig": mig,
    "hami": hami,
    "kai": kai,
    "dra": dra,
}
