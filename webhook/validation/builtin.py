"""Built-in GPU checks on the final object: valid GPU quantities, KAI's rules, and sharing enforced.

The last check closes a bypass: a pod that reaches /validate still asking for what the
sharing policy would have rewritten did not go through /mutate (a webhook skipped by
failurePolicy Ignore, or an object created before the policy). It judges what a pod asks, so a
pod UPDATE that asks for the same (a label, an annotation, an image: a pod's resources never
change) is not judged again: the pod gets what it was admitted with whatever the update says.
KAI's asks are annotations an update could change; kai_updated() refuses that.
"""

from __future__ import annotations

from typing import Any

from webhook import gpu, quantity
from webhook.accounting import asks, by_resources, kai, names
from webhook.accounting.count import GpuCount
from webhook.accounting.needs import read_needs
from webhook.accounting.target import PodTarget
from webhook.decision import Finding
from webhook.errors import AdmissionDenied
from webhook.mutation import resources
from webhook.mutation.context import MutationContext
from webhook.mutation.engine import clone
from webhook.mutation.sharing import REWRITES, gpu_containers
from webhook.sharing_policy import SharingPolicy
from webhook.validation.limits import sharing_limits

QUANTITIES = "gpu-builtin/quantities"
KAI_RULES = "gpu-builtin/kai"
SHARING = "gpu-builtin/sharing-enforced"
KAI_QUEUE = "kai.scheduler/queue"  # KAI-Scheduler pkg/common/constants/constants.go DefaultQueueLabel


def check(
    target: PodTarget,
    policy: SharingPolicy | None,
    shared_names: tuple[str, ...],
    claimed: tuple[str, ...] = (),
    count: GpuCount | None = None,
    *,
    rejudge: bool = True,
) -> list[Finding]:
    """`claimed`: sources of the DRA claims through which the pod gets GPUs ("ResourceClaim ns/x")
    other than the templates of the policy's own mode dra;
    `count`: the pod's GPUs with its claims, when the caller resolved them;
    `rejudge` False: an update that asks for what the pod already has, which the sharing policy's
    rules leave alone (a new label may select another policy; the pod keeps its GPUs anyway)."""
    # Later checks read GPU counts, so they run only once the counts are known to be valid.
    containers = [container for _, container in target.containers()]  # read once for every check
    findings = _quantities(target, containers, shared_names) or _kai(target, containers)
    if policy is not None and not findings and rejudge:
        findings += _sharing_enforced(target, policy, shared_names, claimed, containers)
        findings += _device_plugin_limits(target, policy, containers)
        findings += _kai_queue(target, policy)
        findings += _limits(target, policy, count)
    return findings


def _limits(target: PodTarget, policy: SharingPolicy, count: GpuCount | None = None) -> list[Finding]:
    if policy.sharing.max_gpus_per_pod is None and policy.sharing.max_memory_mib is None:
        return []
    try:
        needs = read_needs(target)
    except AdmissionDenied:
        return []  # _sharing_enforced has said so
    return sharing_limits(target, policy, needs, count)


def _device_plugin_limits(
    target: PodTarget, policy: SharingPolicy, containers: list[dict[str, Any]]
) -> list[Finding]:
    """A share count above 1 where the device plugin fails it at the kubelet (failRequestsGreaterThanOne,
    k8s-device-plugin internal/rm/rm.go); MPS sets it by default (api/config/v1/config.go)."""
    sharing = policy.sharing
    if sharing.mode not in ("timeslice", "mps") or not sharing.fail_requests_greater_than_one:
        return []
    name = sharing.resource_name or gpu.SHARED_GPU
    for container in containers:
        counts = [
            quantity.parse_count(v[name], name) for v in resources.sections(container).values() if name in v
        ]
        if counts and max(counts) > 1:
            message = (
                f"{target.describe_container(container)} asks for {max(counts)} {name}; the device "
                f"plugin's {sharing.mode} sharing fails more than 1 at the kubelet "
                "(failRequestsGreaterThanOne)"
            )
            return [Finding(SHARING, "deny", message)]
    return []


def _kai_queue(target: PodTarget, policy: SharingPolicy) -> list[Finding]:
    """KAI's pod grouper takes the queue from the top owner's labels before the pod's
    (KAI-Scheduler pkg/podgrouper/podgrouper/plugins/defaultgrouper/default_grouper.go,
    CalcPodGroupQueue): a workload's own label overrides the one the policy puts on its pods."""
    wanted = policy.inject.labels.get(KAI_QUEUE)
    own = target.owner_labels.get(KAI_QUEUE)
    if wanted is None or own is None or own == wanted:
        return []
    message = (
        f"{target.describe()}: KAI reads the queue from the workload first, so its "
        f"{KAI_QUEUE}={own} wins over policy {policy.name}'s {wanted}"
    )
    return [Finding(KAI_RULES, "warn", message)]


def _quantities(
    target: PodTarget, containers: list[dict[str, Any]], shared_names: tuple[str, ...]
) -> list[Finding]:
    findings = []
    for container in containers:
        problem = _container_quantities(container, shared_names)
        if problem:
            findings.append(Finding(QUANTITIES, "deny", f"{target.describe_container(container)}: {problem}"))
    return findings


def _container_quantities(container: dict[str, Any], shared_names: tuple[str, ...]) -> str | None:
    """What is wrong with the container's GPU counts, without naming the container (the caller
    does, only when something is wrong: this runs for every container of every review)."""
    return _remembered_quantities(container, shared_names)


def _read_quantities(container: dict[str, Any], shared_names: tuple[str, ...]) -> str | None:
    values = resources.sections(container)
    asked = {n for section in values.values() for n in section if names.is_accelerator(n, shared_names)}
    for name in sorted(asked):
        try:
            counts = {s: quantity.parse_count(v[name], name) for s, v in values.items() if name in v}
        except quantity.QuantityError as e:
            return str(e)
        if len(set(counts.values())) > 1:
            return f"{name} request ({counts['requests']}) must equal its limit ({counts['limits']})"
    return None


_remembered_quantities = by_resources.Remembered(_read_quantities, lambda problem: problem is None)


def kai_updated(target: PodTarget, old_annotations: dict[str, str], via: str = "UPDATE") -> list[Finding]:
    """KAI's asks added, changed or removed after creation. KAI reads them when it schedules the
    pod (KAI-Scheduler pkg/common/resources/gpu_sharing.go), so a pending pod given a fraction by
    UPDATE would get a GPU share that quota and the sharing policy never judged: refused, as
    kube-apiserver refuses a change of resources."""
    changed = asks.kai_changes(target.annotations, old_annotations)
    if not changed:
        return []
    keys = ", ".join(changed)
    message = (
        f"{target.describe()}: {via} changes KAI's GPU ask {keys}; what a pod asks for is set when it "
        "is created, where quota and the sharing policy judge it: create a new pod instead"
    )
    return [Finding(KAI_RULES, "deny", message)]


def _kai(target: PodTarget, containers: list[dict[str, Any]]) -> list[Finding]:
    found = kai.problem(target.annotations, containers)
    return [Finding(KAI_RULES, "deny", f"{target.describe()}: {found} (KAI's own check)")] if found else []


def _sharing_enforced(
    target: PodTarget,
    policy: SharingPolicy,
    shared_names: tuple[str, ...],
    claimed: tuple[str, ...],
    containers: list[dict[str, Any]],
) -> list[Finding]:
    rewrite = REWRITES.get(policy.sharing.mode)
    if rewrite is None:
        return []
    try:
        needs = read_needs(target)
    except AdmissionDenied as e:
        return [Finding(SHARING, "deny", str(e))]
    if needs.opt_out and policy.sharing.allow_opt_out:
        return []
    # GPUs claimed through DRA are allocated by the DRA driver, outside any device-plugin sharing
    # (the caller leaves out the claims a dra policy's own templates make).
    foreign = f"GPUs through DRA ({', '.join(claimed)})" if claimed else None
    foreign = foreign or _foreign_share(target, policy, shared_names, containers)
    if foreign is not None:
        message = (
            f"{target.describe()} asks for {foreign}, but policy {policy.name} shares GPUs here by "
            f"{policy.sharing.mode}; ask for whole GPUs and let the webhook share them"
        )
        return [Finding(SHARING, "deny", message)]
    if not gpu_containers(target):  # every rewrite edits only containers that ask for whole GPUs
        return []
    copy = PodTarget(clone(target.pod), target.kind, target.name)
    try:
        changed = rewrite(copy, MutationContext(policy, needs, policy.sharing.mode, shared_names))
    except AdmissionDenied as e:
        return [Finding(SHARING, "deny", str(e))]
    if not changed:
        return []
    message = (
        f"{target.describe()} asks for whole GPUs, but policy {policy.name} requires {policy.sharing.mode} "
        "sharing here; create it through the mutating webhook or ask for shared GPUs"
    )
    return [Finding(SHARING, "deny", message)]


def _foreign_share(
    target: PodTarget, policy: SharingPolicy, shared_names: tuple[str, ...], containers: list[dict[str, Any]]
) -> str | None:
    """A way of sharing GPUs that the namespace's policy does not produce: a MIG slice where GPUs
    are time-sliced, KAI's fraction annotations where MIG shares them, and so on. Such a pod
    would keep its own scheduler and share, outside the policy and its limits."""
    mode = policy.sharing.mode
    if mode != "kai":
        kai = sorted(key for key in target.annotations if key in gpu.KAI_ANNOTATIONS)
        if kai:
            return f"a KAI GPU fraction ({', '.join(kai)})"
    shared = (gpu.SHARED_GPU, *shared_names)
    for container in containers:
        for name in resources.asked_names(container):
            if mode != "mig" and names.is_mig(name):
                return f"the MIG slice {name}"
            if mode not in ("timeslice", "mps") and name in shared:
                return f"the shared GPU resource {name}"
            plugin = names.other_nvidia_plugin(name)
            if plugin is not None:
                return f"NVIDIA GPUs through {plugin} ({name})"
    return None
