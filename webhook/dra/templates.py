"""The ResourceClaimTemplates that `mode: dra` points pods at. Pure: builds objects, creates nothing.

A template is named after the policy and the shape it serves (device count, MIG profile), so
the rewrite at admission and the `dra templates` command agree on the name without talking.
Its spec follows NVIDIA's k8s-dra-driver-gpu demo/specs/quickstart/v1/ (gpu-test-mps.yaml for
the opaque GpuConfig, gpu-test4.yaml for the MIG profile selector) and tests/bats/specs/
gpu-simple-mig-ts.yaml (the MigDeviceConfig).

Who shares what: the driver shares a device only among the containers that reference one claim
(a claim's devices go to every container naming it). Where the policy shares (TimeSlicing, MPS,
MIG with migSharing), a pod's GPU containers all reference one pod-level claim, SHARED_CLAIM,
made from the template for the largest container's count. Exclusive and unshared MIG give each
container its own claim (claim_name). A claim made from a template belongs to one pod: pods
never share these devices with each other.
"""

from __future__ import annotations

import dataclasses
import hashlib
import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import orjson

from webhook import gpu
from webhook.dra import devices
from webhook.dra.index import DraIndex
from webhook.gpu import MigProfile
from webhook.sharing_policy import Dra, SharingPolicy

API_VERSION = "resource.k8s.io/v1"
KIND = "ResourceClaimTemplate"
MANAGED_BY = "app.kubernetes.io/managed-by"
OURS = "gpu-webhook"
POLICY_ANNOTATION = "gpuwebhook.io/policy"
REQUEST = "gpu"
SHARED_CLAIM = "gpu"  # the pod-level claim that a pod's GPU containers share
WHOLE_GPU = "whole-gpu"  # the firstAvailable subrequest for a whole GPU
# k8s-dra-driver-gpu api/nvidia.com/resource/v1beta1/api.go (GroupName, Version, the kinds).
GPU_CONFIG_API_VERSION = "resource.nvidia.com/v1beta1"
GPU_CONFIG_KIND = "GpuConfig"
MIG_CONFIG_KIND = "MigDeviceConfig"
MAX_NAME = 63  # a DNS label: the name is also safe where only labels are allowed
MAX_WHOLE_GPUS = 8  # the most GPUs a node carries, when the policy sets no maxGpusPerPod
MAX_SUBREQUESTS = 8  # k8s.io/api resource/v1 types.go FirstAvailableDeviceRequestMaxSize
HASH_LENGTH = 8


@dataclass(frozen=True)
class Shape:
    """What a claim asks for: `count` devices, each a whole GPU or the MIG `profile`."""

    count: int
    profile: MigProfile | None = None

    @property
    def label(self) -> str:
        what = "gpu" if self.profile is None else "x" + _dns(self.profile.name)
        return f"{self.count}{what}"


@dataclass(frozen=True)
class _Alternative:
    """One way to satisfy the request: a device request, and the opaque config its devices get."""

    name: str
    exactly: dict[str, Any]
    parameters: dict[str, Any] | None
    what: str  # for people: a MIG profile's name, or "a whole GPU"


def _dns(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")


def _short_hash(*parts: str) -> str:
    return hashlib.sha256("\x00".join(parts).encode()).hexdigest()[:HASH_LENGTH]


def _dra(policy: SharingPolicy) -> Dra:
    if policy.sharing.dra is None:
        raise ValueError(f"policy {policy.name} is not a dra policy")
    return policy.sharing.dra


def shares_claim(policy: SharingPolicy) -> bool:
    """Whether the pod's GPU containers share one claim (SHARED_CLAIM) under this policy."""
    return _dra(policy).shares_claim


def sharing_of(policy: SharingPolicy) -> str:
    """How the driver shares the policy's devices: TimeSlicing, MPS, or Exclusive."""
    return _dra(policy).sharing or "Exclusive"


def template_name(policy: SharingPolicy, shape: Shape) -> str:
    """<policy>-<shape>-<hash>, a DNS label of at most 63 characters. The hash covers the
    device spec too: a template's spec is immutable, so a changed policy gets new names."""
    spec = orjson.dumps(_claim_spec(policy, shape), option=orjson.OPT_SORT_KEYS).decode()
    suffix = f"{shape.label}-{_short_hash(policy.name, shape.label, spec)}"
    prefix = _dns(policy.name)[: MAX_NAME - len(suffix) - 1].strip("-")
    return f"{prefix}-{suffix}" if prefix else suffix


def claim_name(container_name: str) -> str:
    """The pod-level resourceClaims entry for one container: a DNS label, unique per container."""
    name = f"gpu-{container_name}"
    if len(name) <= MAX_NAME:
        return name
    return f"{name[: MAX_NAME - HASH_LENGTH - 1].rstrip('-')}-{_short_hash(container_name)}"


def template(policy: SharingPolicy, namespace: str, shape: Shape) -> dict[str, Any]:
    return {
        "apiVersion": API_VERSION,
        "kind": KIND,
        "metadata": {
            "name": template_name(policy, shape),
            "namespace": namespace,
            "labels": {MANAGED_BY: OURS},
            "annotations": {POLICY_ANNOTATION: policy.name},
        },
        "spec": {"spec": _claim_spec(policy, shape)},
    }


def _claim_spec(policy: SharingPolicy, shape: Shape) -> dict[str, Any]:
    """One request, REQUEST: `exactly` one kind of device, or `firstAvailable` alternatives in
    order; config entries name the subrequests as <request>/<subrequest> (resource/v1 types.go
    DeviceClaimConfiguration; the driver matches a config to the allocation result's request name
    exactly, cmd/gpu-kubelet-plugin/device_state.go)."""
    alternatives = _alternatives(policy, shape)
    if len(alternatives) == 1:
        (only,) = alternatives
        request: dict[str, Any] = {"name": REQUEST, "exactly": only.exactly}
        configured = [([REQUEST], only.parameters)] if only.parameters else []
    else:
        request = {"name": REQUEST, "firstAvailable": [{"name": a.name, **a.exactly} for a in alternatives]}
        configured = _grouped([(f"{REQUEST}/{a.name}", a.parameters) for a in alternatives])
    spec: dict[str, Any] = {"requests": [request]}
    if configured:
        spec["config"] = [
            {"requests": names, "opaque": {"driver": devices.DRIVER, "parameters": parameters}}
            for names, parameters in configured
        ]
    return {"devices": spec}


def _grouped(
    named: list[tuple[str, dict[str, Any] | None]],
) -> list[tuple[list[str], dict[str, Any]]]:
    """One config entry per distinct config, naming every subrequest that gets it, in order."""
    groups: list[tuple[list[str], dict[str, Any]]] = []
    for name, parameters in named:
        if parameters is None:
            continue
        same = next((names for names, p in groups if p == parameters), None)
        if same is None:
            groups.append(([name], parameters))
        else:
            same.append(name)
    return groups


def _alternatives(policy: SharingPolicy, shape: Shape) -> list[_Alternative]:
    """The ways to satisfy the request, in order: the shape's own devices, then the fallbacks."""
    dra = _dra(policy)
    if shape.profile is None:
        exactly = _exactly(dra.device_class, shape.count)
        return [_Alternative(REQUEST, exactly, _gpu_config(dra, shape.count), "GPUs")]
    found = [_mig_alternative(dra, shape.profile, shape.count)]
    for fallback in dra.fallback:
        if fallback == "largerProfile":
            larger = larger_profile(policy.sharing.gpu_model or "", shape.profile)
            found += [_mig_alternative(dra, larger, shape.count)] if larger is not None else []
        else:
            found.append(_whole_gpu_alternative(dra, shape.count))
    return found[:MAX_SUBREQUESTS]


def _whole_gpu_alternative(dra: Dra, count: int) -> _Alternative:
    exactly = _exactly(devices.GPU_CLASS, count)
    return _Alternative(WHOLE_GPU, exactly, _gpu_config(dra, count), "a whole GPU")


def fallbacks(policy: SharingPolicy, shape: Shape) -> list[str]:
    """What the template takes, in order, when the shape's own devices are not free: MIG profile
    names, or "a whole GPU". Empty without firstAvailable."""
    return [a.what for a in _alternatives(policy, shape)[1:]]


def _mig_alternative(dra: Dra, profile: MigProfile, count: int) -> _Alternative:
    expression = f"device.attributes['{devices.DRIVER}'].profile == '{profile.name}'"
    exactly = {**_exactly(dra.device_class, count), "selectors": [{"cel": {"expression": expression}}]}
    return _Alternative(f"mig-{_dns(profile.name)}", exactly, _mig_config(dra, count), profile.name)


def _exactly(device_class: str, count: int) -> dict[str, Any]:
    return {"deviceClassName": device_class, "allocationMode": devices.EXACT_COUNT, "count": count}


def larger_profile(model: str, profile: MigProfile) -> MigProfile | None:
    """The next plain profile of `model` after `profile`, in the order the rewrite chooses by
    (real memory, then compute slices): the smallest one that holds more."""
    order = (profile.memory_mib, profile.slices)
    larger = [p for p in gpu.MIG_PROFILES.get(model, ()) if p.plain and (p.memory_mib, p.slices) > order]
    return min(larger, key=lambda p: (p.memory_mib, p.slices), default=None)


def _gpu_config(dra: Dra, count: int) -> dict[str, Any] | None:
    """GpuConfig (api/nvidia.com/resource/v1beta1/gpuconfig.go) for full GPUs that are shared."""
    sharing = _sharing(dra, count, mig=False)
    if sharing is None:
        return None
    return {"apiVersion": GPU_CONFIG_API_VERSION, "kind": GPU_CONFIG_KIND, "sharing": sharing}


def _mig_config(dra: Dra, count: int) -> dict[str, Any]:
    """MigDeviceConfig (migconfig.go), with `sharing` only when the policy shares the slices."""
    config: dict[str, Any] = {"apiVersion": GPU_CONFIG_API_VERSION, "kind": MIG_CONFIG_KIND}
    sharing = _sharing(dra, count, mig=True)
    if sharing is not None:
        config["sharing"] = sharing
    return config


def _sharing(dra: Dra, count: int, *, mig: bool) -> dict[str, Any] | None:
    """GpuSharing or MigDeviceSharing (sharing.go): MIG devices take no timeSlicingConfig."""
    if dra.sharing == "TimeSlicing":
        interval = None if mig else dra.time_slice_interval
        config = {"strategy": "TimeSlicing"}
        return config if interval is None else {**config, "timeSlicingConfig": {"interval": interval}}
    if dra.sharing == "MPS":
        mps = _mps_config(dra, count)
        return {"strategy": "MPS", "mpsConfig": mps} if mps else {"strategy": "MPS"}
    return None


def _mps_config(dra: Dra, count: int) -> dict[str, Any]:
    """MpsConfig. Per-device limits name devices by index among the claim's; an index the
    template's count does not reach is left out, since the driver refuses it."""
    mps: dict[str, Any] = {}
    if dra.mps_thread_percentage is not None:
        mps["defaultActiveThreadPercentage"] = dra.mps_thread_percentage
    if dra.mps_pinned_memory is not None:
        mps["defaultPinnedDeviceMemoryLimit"] = dra.mps_pinned_memory
    per_device = {str(index): limit for index, limit in dra.mps_per_device_pinned_memory if index < count}
    if per_device:
        mps["defaultPerDevicePinnedMemoryLimit"] = per_device
    return mps


def shapes(policy: SharingPolicy) -> Iterator[Shape]:
    """Every shape the rewrite can produce under the policy: 1..maxGpusPerPod devices (1..8
    without it), of whole GPUs, or of each plain MIG profile of the policy's model."""
    dra = _dra(policy)
    counts = range(1, (policy.sharing.max_gpus_per_pod or MAX_WHOLE_GPUS) + 1)
    if dra.strategy != "MIG":
        yield from (Shape(count) for count in counts)
        return
    profiles = [p for p in gpu.MIG_PROFILES[policy.sharing.gpu_model or ""] if p.plain]
    for profile in profiles:
        yield from (Shape(count, profile) for count in counts)


def templates_for(policy: SharingPolicy, namespace: str) -> list[dict[str, Any]]:
    """Every template a pod in `namespace` under this policy may be pointed at."""
    return [template(policy, namespace, shape) for shape in shapes(policy)]


# Policies hold dicts (not hashable): remembered by identity, each entry keeping its policy alive
# so that an id is not reused while remembered.
@dataclass(frozen=True)
class _Known:
    devices: Mapping[str, Any]  # template name -> its `devices`
    shapes: Mapping[str, Shape]  # template name -> the shape it serves


_BY_POLICY: dict[int, tuple[SharingPolicy, _Known]] = {}
_REMEMBERED = 64


def _known(policy: SharingPolicy) -> _Known:
    """Every template of the policy by name: names do not depend on the namespace."""
    found = _BY_POLICY.get(id(policy))
    if found is not None and found[0] is policy:
        return found[1]
    by_name = {template_name(policy, s): s for s in shapes(policy)}
    known = _Known({n: _claim_spec(policy, s)["devices"] for n, s in by_name.items()}, by_name)
    if len(_BY_POLICY) >= _REMEMBERED:
        _BY_POLICY.clear()
    _BY_POLICY[id(policy)] = (policy, known)
    return known


def _devices_by_name(policy: SharingPolicy) -> Mapping[str, Any]:
    """Template name -> its `devices`, for every shape: names do not depend on the namespace."""
    return _known(policy).devices


def shape_named(policy: SharingPolicy, name: object) -> Shape | None:
    """The shape of the policy's template called `name`; None if no template of it is."""
    return _known(policy).shapes.get(name) if isinstance(name, str) else None


def expected_devices(policy: SharingPolicy) -> Mapping[str, Any]:
    """`DraIndex.expected_templates` for the pods of a mode dra policy: each template the rewrite
    may point them at, by name, with its `devices`. Remembered per policy, so a request pays a lookup."""
    return _devices_by_name(policy)


def own_sources(policy: SharingPolicy, namespace: str, index: DraIndex) -> frozenset[str]:
    """The claim sources ("ResourceClaimTemplate ns/name", as claim resolution names them) that are
    this policy's templates and hold exactly what the policy writes: a template someone else made
    under one of those names, with other devices, is not among them."""
    return frozenset(
        f"ResourceClaimTemplate {namespace}/{name}"
        for name, devices in _devices_by_name(policy).items()
        if index.template_devices(namespace, name) == (True, devices)
    )


def reserved_by(
    policies: Iterable[SharingPolicy], namespace: str, labels: Mapping[str, str], name: str
) -> tuple[str, dict[str, Any]] | None:
    """The dra policy whose template for `namespace` goes by `name`, and that template's spec."""
    for policy in reachable(policies, namespace, labels):
        devices = _devices_by_name(policy).get(name)
        if devices is not None:
            return policy.name, {"spec": {"devices": devices}}
    return None


def could_apply(policy: SharingPolicy, namespace: str, namespace_labels: Mapping[str, str]) -> bool:
    """Whether a dra policy can match some pod in the namespace (pod selectors aside: some pod
    there may carry the labels)."""
    match = dataclasses.replace(policy.match, object_selector=None)
    return policy.sharing.mode == "dra" and match.matches(namespace, namespace_labels, {})


def reachable(
    policies: Iterable[SharingPolicy], namespace: str, namespace_labels: Mapping[str, str]
) -> list[SharingPolicy]:
    """The dra policies some pod of the namespace can get. `policies` come in precedence order (the
    first match wins), so a policy that takes every pod of the namespace (no pod selector) hides
    all after it."""
    found = []
    for policy in policies:
        if could_apply(policy, namespace, namespace_labels):
            found.append(policy)
        if policy.match.object_selector is None and policy.match.matches(namespace, namespace_labels, {}):
            break
    return found


def needed(
    policies: Iterable[SharingPolicy], namespace: str, namespace_labels: Mapping[str, str]
) -> list[dict[str, Any]]:
    """Every template that the dra policies some pod of `namespace` can get may point pods at.
    `policies`: every sharing policy, in precedence order."""
    return [
        t
        for policy in reachable(policies, namespace, namespace_labels)
        for t in templates_for(policy, namespace)
    ]


def missing(
    policies: Iterable[SharingPolicy], namespaces: Mapping[str, Mapping[str, str]], index: DraIndex
) -> list[str]:
    """`namespace/name` of every needed template the synced index does not hold (none while it
    has not listed templates yet: then nothing is known to be missing)."""
    if not index.synced:
        return []
    ordered = list(policies)
    return [
        f"{namespace}/{t['metadata']['name']}"
        for namespace, labels in sorted(namespaces.items())
        for t in needed(ordered, namespace, labels)
        if not index.template_devices(namespace, t["metadata"]["name"])[0]
    ]


def missing_summary(names: list[str], shown: int = 5) -> str:
    more = f" and {len(names) - shown} more" if len(names) > shown else ""
    return (
        f"{len(names)} ResourceClaimTemplate(s) for mode dra missing: {', '.join(names[:shown])}{more} "
        "(print them with `gpu-webhook dra templates`)"
    )
