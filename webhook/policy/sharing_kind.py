"""GPUSharingPolicy: from a validated document to a compiled SharingPolicy, or located problems."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Mapping
from typing import Any

import orjson

from webhook import gpu, quantity
from webhook.accounting.needs import PREFIX as OWN_PREFIX
from webhook.dra import devices
from webhook.dra.templates import MAX_WHOLE_GPUS
from webhook.errors import PolicyProblem
from webhook.match import LabelSelector, Match, SelectorError, check_glob
from webhook.policy.schemas import GPU_SHARING_POLICY
from webhook.policy.source import Document, Path
from webhook.policy.validate import schema_problems
from webhook.sharing_policy import (
    DRIVER_FEATURE_GATES,
    GATE_REQUIRES,
    GATES_EXCLUSIVE,
    SHARING_GATES,
    Checkpoint,
    Dra,
    Inject,
    Preference,
    PreferUnderutilized,
    Sharing,
    SharingPolicy,
)

_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_QUALIFIED = re.compile(
    r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$"
)
_LABEL_VALUE = re.compile(r"^([A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)?$")
MODES_WITH_MEMORY = ("mig", "hami", "kai")
MODES_WITH_MODEL = ("mig", "hami", "kai", "dra")  # dra: only with strategy MIG (checked in _dra)
SHARED_MODES = ("timeslice", "mps")
MULTI_GPU_MODES = ("mig", "hami", "kai")
SHARING_MODES_ONLY = ("timeslice", "mps", "mig", "hami", "kai")  # every mode but exclusive
DRA_KEYS = (
    "strategy",
    "deviceClassName",
    "timeSlicing",
    "mps",
    "migSharing",
    "fallback",
    "driverFeatureGates",
)
_DEVICE_INDEX = re.compile(r"^(0|[1-9][0-9]{0,2})$")
# The driver's device classes and the type of device each selects (k8s-dra-driver-gpu
# deployments/helm/dra-driver-nvidia-gpu/templates/deviceclass-*.yaml), and the opaque config
# each strategy writes with the one device type the kubelet plugin applies it to.
DRIVER_CLASS_TYPES = {"gpu.nvidia.com": "gpu", "mig.nvidia.com": "mig", "vfio.gpu.nvidia.com": "vfio"}
CONFIGURED_TYPES = {
    "TimeSlicing": ("GpuConfig", "gpu"),
    "MPS": ("GpuConfig", "gpu"),
    "MIG": ("MigDeviceConfig", "mig"),
}
HOSTNAME = "kubernetes.io/hostname"
SPEC: Path = ("spec",)


class _Checker:
    """Collects every problem of one document instead of stopping at the first."""

    def __init__(self, document: Document) -> None:
        self.document = document
        self.problems: list[PolicyProblem] = []

    def fail(self, path: Path, reason: str) -> None:
        self.problems.append(self.document.problem(path, reason))

    def check(self, path: Path, ok: bool, reason: str) -> None:
        if not ok:
            self.fail(path, reason)

    def parsed(self, path: Path, parse: Callable[[], int]) -> int | None:
        try:
            return parse()
        except quantity.QuantityError as e:
            self.fail(path, str(e))
            return None


def compile_sharing_policy(document: Document) -> tuple[SharingPolicy | None, list[PolicyProblem]]:
    problems = schema_problems(document, GPU_SHARING_POLICY)
    if problems:
        return None, problems
    checker = _Checker(document)
    spec = document.data["spec"]
    checker.check(
        ("metadata", "name"), bool(_DNS_SUBDOMAIN.fullmatch(document.name)), "must be a DNS subdomain name"
    )
    policy = SharingPolicy(
        name=document.name,
        digest=hashlib.sha256(orjson.dumps(spec, option=orjson.OPT_SORT_KEYS)).hexdigest(),
        priority=spec.get("priority", 0),
        match=_match(checker, spec.get("match", {}), (*SPEC, "match")),
        sharing=_sharing(checker, spec["sharing"], (*SPEC, "sharing")),
        inject=_inject(checker, spec.get("inject", {}), (*SPEC, "inject")),
        checkpoint=_checkpoint(checker, spec.get("checkpoint"), (*SPEC, "checkpoint")),
        file=document.file,
    )
    _placement_fits(checker, spec)
    return (None, checker.problems) if checker.problems else (policy, [])


# GPU Feature Discovery's labels for the mode a policy writes (k8s-device-plugin internal/lm/):
# a required value that excludes the policy's own mode leaves its pods nowhere to run.
def _mode_label(key: str, sharing: Mapping[str, Any]) -> str | None:
    mode = sharing["mode"]
    if key == "nvidia.com/mig.strategy" and mode == "mig":
        return str(sharing.get("migStrategy", "mixed"))
    if key == "nvidia.com/gpu.sharing-strategy":
        return {"timeslice": "time-slicing", "mps": "mps"}.get(mode)
    return None


def _placement_fits(checker: _Checker, spec: Mapping[str, Any]) -> None:
    required = spec.get("inject", {}).get("nodeAffinity", {}).get("required", [])
    for index, requirement in enumerate(required):
        wanted = _mode_label(requirement["key"], spec["sharing"])
        values = requirement.get("values", [])
        if wanted is not None and requirement["operator"] == "In" and wanted not in values:
            checker.fail(
                (*SPEC, "inject", "nodeAffinity", "required", index),
                f"requires {requirement['key']} in {values}, but the nodes for "
                f"{spec['sharing']['mode']} pods are labelled {wanted}: its pods could never schedule",
            )


def _match(checker: _Checker, raw: Mapping[str, Any], path: Path) -> Match:
    for key in ("namespaces", "excludedNamespaces"):
        for index, pattern in enumerate(raw.get(key, [])):
            _glob(checker, pattern, (*path, key, index))
    return Match(
        namespaces=tuple(raw.get("namespaces", ())),
        excluded_namespaces=tuple(raw.get("excludedNamespaces", ())),
        namespace_selector=_selector(checker, raw.get("namespaceSelector"), (*path, "namespaceSelector")),
        object_selector=_selector(checker, raw.get("podSelector"), (*path, "podSelector")),
    )


def _glob(checker: _Checker, pattern: str, path: Path) -> None:
    try:
        check_glob(pattern)
    except SelectorError as e:
        checker.fail(path, e.reason)


def _selector(checker: _Checker, raw: Mapping[str, Any] | None, path: Path) -> LabelSelector | None:
    if raw is None:
        return None
    try:
        return LabelSelector.parse(raw)
    except SelectorError as e:
        location = _relative(e.path)
        checker.fail((*path, *location), e.reason)
        return None


def _relative(dotted: str) -> Path:
    """'matchExpressions[0].key' -> ('matchExpressions', 0, 'key')."""
    parts: list[str | int] = []
    for piece in re.findall(r"[^.\[\]]+|\[\d+\]", dotted):
        parts.append(int(piece[1:-1]) if piece.startswith("[") else piece)
    return tuple(parts)


def _sharing(checker: _Checker, raw: Mapping[str, Any], path: Path) -> Sharing:
    mode = raw["mode"]
    _only_in(checker, raw, path, "resourceName", SHARED_MODES)
    _only_in(checker, raw, path, "failRequestsGreaterThanOne", SHARED_MODES)
    _only_in(checker, raw, path, "gpuModel", MODES_WITH_MODEL)
    _only_in(checker, raw, path, "defaultMemory", MODES_WITH_MODEL)
    _only_in(checker, raw, path, "cores", MODES_WITH_MEMORY)
    _only_in(checker, raw, path, "migStrategy", ("mig",))
    _only_in(checker, raw, path, "multiGpu", MULTI_GPU_MODES)
    _only_in(checker, raw, path, "sharedDevicesAllocationPolicy", SHARED_MODES)
    _only_in(checker, raw, path, "setGpuType", ("hami",))
    _only_in(checker, raw, path, "maxGpusPerPod", (*SHARING_MODES_ONLY, "dra"))
    for key in DRA_KEYS:
        _only_in(checker, raw, path, key, ("dra",))
    _only_in(checker, raw, path, "maxMemory", SHARING_MODES_ONLY)
    resource = raw.get("resourceName", gpu.SHARED_GPU if mode in SHARED_MODES else None)
    if resource is not None:
        # k8s-device-plugin api/config/v1/replicas.go disableResoureRenaming: any `rename` is
        # ignored; the only names are nvidia.com/gpu and, with renameByDefault, nvidia.com/gpu.shared.
        checker.check(
            (*path, "resourceName"),
            resource in (gpu.SHARED_GPU, gpu.GPU),
            f"the device plugin advertises shared GPUs only as {gpu.SHARED_GPU} (renameByDefault) "
            f"or {gpu.GPU}; it ignores other names",
        )
    model = raw.get("gpuModel")
    checker.check(
        (*path, "gpuModel"),
        mode != "mig" or model is not None,
        "mig mode needs gpuModel, to choose from its profile table",
    )
    dra = _dra(checker, raw, path) if mode == "dra" else None
    checker.check(
        (*path, "setGpuType"),
        not raw.get("setGpuType") or model in gpu.HAMI_CARD_TYPES,
        "setGpuType needs a gpuModel with a HAMi card type: " + ", ".join(gpu.HAMI_CARD_TYPES),
    )
    memory = _default_memory(checker, raw, path, model)
    if mode == "hami":
        checker.check(
            path,
            memory is not None or "cores" in raw,
            "hami mode needs defaultMemory or cores, for pods that state neither",
        )
    if mode == "kai":
        checker.check(path, memory is not None, "kai mode needs defaultMemory, for pods that state none")
    if mode == "kai" and "cores" in raw:
        # KAI's gpu-fraction is a share of memory (KAI-Scheduler docs/gpu-sharing/README.md), not compute.
        checker.fail((*path, "cores"), "KAI has no compute limit: gpu-fraction is a share of GPU memory")
    return Sharing(
        mode,
        resource,
        model,
        memory,
        raw.get("cores"),
        raw.get("allowOptOut", False),
        mig_strategy=raw.get("migStrategy", "mixed"),
        multi_gpu=raw.get("multiGpu", "wholeGpus" if mode == "mig" else "slices"),
        allocation_policy=raw.get("sharedDevicesAllocationPolicy", "distributed"),
        fail_requests_greater_than_one=raw.get("failRequestsGreaterThanOne", mode == "mps"),
        set_gpu_type=raw.get("setGpuType", False),
        max_gpus_per_pod=raw.get("maxGpusPerPod"),
        max_memory_mib=_max_memory(checker, raw, path, memory),
        dra=dra,
    )


def _dra(checker: _Checker, raw: Mapping[str, Any], path: Path) -> Dra:
    """mode dra: settings the driver would refuse in a template, or could not run with the gates it
    is deployed with, are refused here, where the policy is written, rather than at the pods."""
    strategy = raw.get("strategy", "Exclusive")
    _dra_sections(checker, raw, path, strategy)
    mps = raw.get("mps", {})
    per_device = _per_device_limits(checker, mps, (*path, "mps"), raw.get("maxGpusPerPod", MAX_WHOLE_GPUS))
    pinned = mps.get("defaultPinnedDeviceMemoryLimit")
    if pinned is not None:
        _pinned_limit(checker, (*path, "mps", "defaultPinnedDeviceMemoryLimit"), pinned)
    dra = Dra(
        strategy=strategy,
        device_class=_device_class(checker, raw, path, strategy),
        time_slice_interval=raw.get("timeSlicing", {}).get("interval"),
        mps_thread_percentage=mps.get("defaultActiveThreadPercentage"),
        mps_pinned_memory=None if pinned is None else str(pinned),
        mps_per_device_pinned_memory=per_device,
        mig_sharing=raw.get("migSharing"),
        fallback=tuple(raw.get("fallback", ())),
        driver_gates=_driver_gates(checker, raw.get("driverFeatureGates", {}), (*path, "driverFeatureGates")),
    )
    _sharing_gates(checker, path, dra)
    return dra


def _dra_sections(checker: _Checker, raw: Mapping[str, Any], path: Path, strategy: str) -> None:
    """Each GpuConfig section goes with its own strategy, as the driver requires (k8s-dra-driver-gpu
    api/nvidia.com/resource/v1beta1/sharing.go GetTimeSlicingConfig/GetMpsConfig)."""
    mig_sharing = raw.get("migSharing")
    checker.check(
        (*path, "timeSlicing"),
        "timeSlicing" not in raw or strategy in ("TimeSlicing", "MIG"),
        f"applies only to strategy TimeSlicing, not {strategy}",
    )
    # MigDeviceSharing has no timeSlicingConfig: the plugin sets time slices on full GPUs only.
    checker.check(
        (*path, "timeSlicing"),
        "timeSlicing" not in raw or strategy != "MIG",
        "a MIG device takes no time-slice interval (the driver's MigDeviceConfig has no timeSlicingConfig)",
    )
    mps_allowed = strategy == "MPS" or (strategy == "MIG" and mig_sharing == "MPS")
    unless = " without migSharing: MPS" if strategy == "MIG" else ""
    checker.check(
        (*path, "mps"),
        "mps" not in raw or mps_allowed,
        f"applies only to strategy MPS, not {strategy}{unless}",
    )
    for key in ("gpuModel", "defaultMemory", "migSharing", "fallback"):
        checker.check(
            (*path, key), key not in raw or strategy == "MIG", f"applies only to strategy MIG, not {strategy}"
        )
    checker.check(
        (*path, "gpuModel"),
        strategy != "MIG" or "gpuModel" in raw,
        "strategy MIG needs gpuModel, to choose a profile",
    )


def _device_class(checker: _Checker, raw: Mapping[str, Any], path: Path, strategy: str) -> str:
    """The kubelet plugin applies a GpuConfig only to full GPUs and a MigDeviceConfig only to MIG
    devices (k8s-dra-driver-gpu cmd/gpu-kubelet-plugin/device_state.go): a driver class of the other
    type would fail every pod at start. Classes of other names are the cluster's own: not judged."""
    default_class = devices.MIG_CLASS if strategy == "MIG" else devices.GPU_CLASS
    device_class = str(raw.get("deviceClassName", default_class))
    where = (*path, "deviceClassName")
    checker.check(where, bool(_DNS_SUBDOMAIN.fullmatch(device_class)), "must be a DNS subdomain name")
    wanted = CONFIGURED_TYPES.get(strategy)
    found = DRIVER_CLASS_TYPES.get(device_class)
    if wanted is not None and found is not None and found != wanted[1]:
        hint = "; MIG slices are shared with strategy MIG and migSharing" if found == "mig" else ""
        checker.fail(
            where,
            f"strategy {strategy} configures devices with the driver's {wanted[0]}, which it refuses "
            f"on {device_class}'s {found} devices{hint}",
        )
    return device_class


def _driver_gates(checker: _Checker, raw: Mapping[str, bool], path: Path) -> frozenset[str]:
    """The gates the driver runs with: its defaults, overridden by the policy. A set the driver would
    not start with (pkg/featuregates/featuregates.go ValidateFeatureGates) describes no driver."""
    for gate in raw:
        checker.check(
            (*path, gate),
            gate in DRIVER_FEATURE_GATES,
            f"{gate!r} is not a feature gate of NVIDIA's DRA driver; its gates: "
            + ", ".join(DRIVER_FEATURE_GATES),
        )
    enabled = frozenset(g for g, default in DRIVER_FEATURE_GATES.items() if raw.get(g, default))
    for gate, needed in GATE_REQUIRES:
        if gate in enabled and needed not in enabled:
            checker.fail(
                _gate_path(path, raw, gate, needed),
                f"{gate} requires {needed}: NVIDIA's DRA driver does not start with {gate} on "
                f"and {needed} off",
            )
    for first, second in GATES_EXCLUSIVE:
        if first in enabled and second in enabled:
            checker.fail(
                _gate_path(path, raw, first, second),
                f"{first} and {second} exclude each other: NVIDIA's DRA driver does not start with both on",
            )
    return enabled


def _gate_path(path: Path, raw: Mapping[str, bool], *gates: str) -> Path:
    """Where a conflict between gates is shown: the first of them the policy sets."""
    return next(((*path, gate) for gate in gates if gate in raw), path)


def _sharing_gates(checker: _Checker, path: Path, dra: Dra) -> None:
    """TimeSlicing and MPS, in a GpuConfig or a MigDeviceConfig, are refused by the driver without
    their gate (api/nvidia.com/resource/v1beta1/validate.go validateSharingStrategy), and MPS is
    refused while DynamicMIG is on (cmd/gpu-kubelet-plugin/device_state.go applySharingConfig)."""
    sharing = dra.sharing
    if sharing is None:
        return
    where = (*path, "migSharing" if dra.strategy == "MIG" else "strategy")
    gate = SHARING_GATES[sharing]
    checker.check(
        where,
        gate in dra.driver_gates,
        f"{sharing} needs the DRA driver's {gate} feature gate (alpha, off by default): enable it in "
        f"the driver and say so with driverFeatureGates: {{{gate}: true}}",
    )
    checker.check(
        where,
        sharing != "MPS" or "DynamicMIG" not in dra.driver_gates,
        "MPS is refused by the DRA driver while its DynamicMIG feature gate is on",
    )


def _pinned_limit(checker: _Checker, where: Path, value: object) -> bool:
    """The MPS daemon takes whole MiB: the driver refuses a limit under 1 MiB when the pod starts
    (k8s-dra-driver-gpu api/nvidia.com/resource/v1beta1/sharing.go limit.Megabyte)."""
    try:
        amount = quantity.parse(value)
    except quantity.QuantityError as e:
        checker.fail(where, str(e))
        return False
    bytes_ = -(-amount.numerator // amount.denominator)  # resource.Quantity.Value() rounds up
    if bytes_ < quantity.MiB:
        checker.fail(where, f"{value} is under 1Mi: the DRA driver refuses such a pinned memory limit")
    elif bytes_ >= 2**63:
        checker.fail(where, f"{value} is more than the DRA driver can hold")
    return quantity.MiB <= bytes_ < 2**63


def _per_device_limits(
    checker: _Checker, mps: Mapping[str, Any], path: Path, most: int
) -> tuple[tuple[int, str], ...]:
    """defaultPerDevicePinnedMemoryLimit keys name a device by UUID or by its index among the
    claim's devices (sharing.go uuidSet.Normalize). A template serves every node, so only indexes
    can mean anything, and an index must be one of some template's devices."""
    found = []
    for key, value in mps.get("defaultPerDevicePinnedMemoryLimit", {}).items():
        where = (*path, "defaultPerDevicePinnedMemoryLimit", key)
        index = int(key) if _DEVICE_INDEX.fullmatch(str(key)) else None
        checker.check(
            where,
            index is not None,
            "name a device by its index among the claim's devices (0, 1, ...): a template serves "
            "every node, so a UUID matches no device",
        )
        if index is not None and index >= most:
            checker.fail(where, f"no template has {index + 1} devices (the most is {most}, maxGpusPerPod)")
        elif index is not None and _pinned_limit(checker, where, value):
            found.append((index, str(value)))
    return tuple(sorted(found))


def _max_memory(checker: _Checker, raw: Mapping[str, Any], path: Path, default: int | None) -> int | None:
    if "maxMemory" not in raw:
        return None
    where = (*path, "maxMemory")
    mib = checker.parsed(where, lambda: quantity.parse_mib(raw["maxMemory"], "maxMemory"))
    if mib is not None and default is not None:
        checker.check(
            where, default <= mib, "is less than defaultMemory: pods that state no memory would be denied"
        )
    return mib


def _only_in(checker: _Checker, raw: Mapping[str, Any], path: Path, key: str, modes: tuple[str, ...]) -> None:
    if key in raw and raw["mode"] not in modes:
        checker.fail((*path, key), f"applies only to modes {', '.join(modes)}, not {raw['mode']}")


def _default_memory(checker: _Checker, raw: Mapping[str, Any], path: Path, model: str | None) -> int | None:
    if "defaultMemory" not in raw:
        return None
    where = (*path, "defaultMemory")
    mib = checker.parsed(where, lambda: quantity.parse_mib(raw["defaultMemory"], "defaultMemory"))
    if mib is not None and model is not None and mib > gpu.model_memory_mib(model):
        checker.fail(where, f"{raw['defaultMemory']} is more than a whole {model} holds")
    elif mib is not None and model is not None and (raw["mode"] == "mig" or raw.get("strategy") == "MIG"):
        largest = gpu.largest_profile(model)
        checker.check(
            where,
            mib <= largest.memory_mib,
            f"{raw['defaultMemory']} is more than {model}'s largest MIG slice holds "
            f"({largest.name}, {largest.memory_mib} MiB)",
        )
    return mib


def _inject(checker: _Checker, raw: Mapping[str, Any], path: Path) -> Inject:
    tolerations = raw.get("tolerations", [])
    for index, toleration in enumerate(tolerations):
        _toleration(checker, toleration, (*path, "tolerations", index))
    affinity = raw.get("nodeAffinity", {})
    required = affinity.get("required", [])
    preferred = affinity.get("preferred", [])
    for key, items in (("required", required), ("preferred", preferred)):
        for index, requirement in enumerate(items):
            _node_requirement(checker, requirement, (*path, "nodeAffinity", key, index))
    for key in ("priorityClassName", "schedulerName", "runtimeClassName"):
        if key in raw:
            checker.check(
                (*path, key), bool(_DNS_SUBDOMAIN.fullmatch(raw[key])), "must be a DNS subdomain name"
            )
    _metadata_map(checker, raw.get("labels", {}), (*path, "labels"), labels=True)
    _metadata_map(checker, raw.get("annotations", {}), (*path, "annotations"), labels=False)
    return Inject(
        tolerations=tuple(tolerations),
        required=tuple(required),
        preferred=tuple(
            Preference(r["weight"], {k: v for k, v in r.items() if k != "weight"}) for r in preferred
        ),
        priority_class_name=raw.get("priorityClassName"),
        scheduler_name=raw.get("schedulerName"),
        runtime_class_name=raw.get("runtimeClassName"),
        labels=dict(raw.get("labels", {})),
        annotations=dict(raw.get("annotations", {})),
        force=raw.get("force", False),
        prefer_underutilized=_prefer_underutilized(checker, raw, path),
    )


def _prefer_underutilized(
    checker: _Checker, raw: Mapping[str, Any], path: Path
) -> PreferUnderutilized | None:
    hints = raw.get("preferUnderutilized")
    if hints is None:
        return None
    pinned = [
        r
        for r in raw.get("nodeAffinity", {}).get("required", [])
        if r["key"] == HOSTNAME and r["operator"] == "In" and len(r.get("values", [])) == 1
    ]
    checker.check(
        (*path, "preferUnderutilized"),
        not pinned,
        f"has no effect: nodeAffinity.required already pins one node by {HOSTNAME}",
    )
    return PreferUnderutilized(hints["weight"], hints.get("maxNodes", 3))


def _toleration(checker: _Checker, raw: Mapping[str, Any], path: Path) -> None:
    operator = raw.get("operator", "Equal")
    checker.check(
        (*path, "value"), not (operator == "Exists" and raw.get("value")), "operator Exists takes no value"
    )
    checker.check(
        (*path, "key"), bool(raw.get("key")) or operator == "Exists", "an empty key needs operator Exists"
    )
    checker.check(
        (*path, "tolerationSeconds"),
        "tolerationSeconds" not in raw or raw.get("effect") == "NoExecute",
        "tolerationSeconds applies only to effect NoExecute",
    )


def _node_requirement(checker: _Checker, raw: Mapping[str, Any], path: Path) -> None:
    operator, values = raw["operator"], raw.get("values", [])
    checker.check(
        (*path, "key"), bool(_QUALIFIED.fullmatch(raw["key"])), f"{raw['key']!r} is not a valid label key"
    )
    if operator in ("In", "NotIn"):
        checker.check((*path, "values"), bool(values), f"operator {operator} needs at least one value")
    elif operator in ("Exists", "DoesNotExist"):
        checker.check((*path, "values"), not values, f"operator {operator} takes no values")
    else:
        single_integer = len(values) == 1 and values[0].lstrip("-").isdigit()
        checker.check(
            (*path, "values"), single_integer, f"operator {operator} needs exactly one integer value"
        )


def _metadata_map(checker: _Checker, raw: Mapping[str, str], path: Path, *, labels: bool) -> None:
    for key, value in raw.items():
        checker.check((*path, key), bool(_QUALIFIED.fullmatch(key)), f"{key!r} is not a valid key")
        if labels:
            checker.check(
                (*path, key), bool(_LABEL_VALUE.fullmatch(value)), f"{value!r} is not a valid label value"
            )
        else:
            # The webhook writes and reads these itself; a policy that also wrote one would
            # fight the stamp, or set what only the pod's owner may ask for.
            checker.check(
                (*path, key),
                not key.startswith(OWN_PREFIX),
                f"annotations under {OWN_PREFIX} are the webhook's own",
            )


def _checkpoint(checker: _Checker, raw: Mapping[str, Any] | None, path: Path) -> Checkpoint | None:
    if raw is None:
        return None
    mount = raw.get("mountPath", "/checkpoints")
    checker.check((*path, "mountPath"), mount.startswith("/"), "must be an absolute path")
    for section, amounts in raw.get("resources", {}).items():
        for name, amount in amounts.items():
            try:
                quantity.parse(amount)
            except quantity.QuantityError as e:
                checker.fail((*path, "resources", section, name), str(e))
    return Checkpoint(
        image=raw["image"],
        interval_seconds=raw.get("intervalSeconds", 600),
        mount_path=mount,
        volume=raw.get("volume", {"emptyDir": {}}),
        native_sidecar=raw.get("nativeSidecar", True),
        termination_grace_period_seconds=raw.get("terminationGracePeriodSeconds", 120),
        resources=raw.get("resources", {}),
    )
