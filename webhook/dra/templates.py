"""The ResourceClaimTemplates that `mode: dra` points pods at. Pure: builds objects, creates nothing.

A template is named after the policy and the shape it serves (device count, MIG profile), so
the rewrite at admission and the `dra templates` command agree on the name without talking.
Its spec follows NVIDIA's k8s-dra-driver-gpu demo/specs/quickstart/v1/ (gpu-test-mps.yaml for
the opaque GpuConfig, gpu-test4.yaml for the MIG profile selector).
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
# k8s-dra-driver-gpu api/nvidia.com/resource/v1beta1/gpuconfig.go and register.go.
GPU_CONFIG_API_VERSION = "resource.nvidia.com/v1beta1"
GPU_CONFIG_KIND = "GpuConfig"
MAX_NAME = 63  # a DNS label: the name is also safe where only labels are allowed
MAX_WHOLE_GPUS = 8  # the most GPUs a node carries, when the policy sets no maxGpusPerPod
HASH_LENGTH = 8


@dataclass(frozen=True)
class Shape:
    """What one container asks for: `count` devices, each a whole GPU or the MIG `profile`."""

    count: int
    profile: MigProfile | None = None

    @property
    def label(self) -> str:
        what = "gpu" if self.profile is None else "x" + _dns(self.profile.name)
        return f"{self.count}{what}"


def _dns(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")


def _short_hash(*parts: str) -> str:
    return hashlib.sha256("\x00".join(parts).encode()).hexdigest()[:HASH_LENGTH]


def _dra(policy: SharingPolicy) -> Dra:
    if policy.sharing.dra is None:
        raise ValueError(f"policy {policy.name} is not a dra policy")
    return policy.sharing.dra


def template_name(policy: SharingPolicy, shape: Shape) -> str:
    """<policy>-<shape>-<hash>, a DNS label of at most 63 characters. The hash covers the
    device spec too: a template's spec is immutable, so a changed policy gets new names."""
    spec = orjson.dumps(_claim_spec(_dra(policy), shape), option=orjson.OPT_SORT_KEYS).decode()
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
        "spec": {"spec": _claim_spec(_dra(policy), shape)},
    }


def _claim_spec(dra: Dra, shape: Shape) -> dict[str, Any]:
    exactly: dict[str, Any] = {
        "deviceClassName": dra.device_class,
        "allocationMode": devices.EXACT_COUNT,
        "count": shape.count,
    }
    if shape.profile is not None:
        expression = f"device.attributes['{devices.DRIVER}'].profile == '{shape.profile.name}'"
        exactly["selectors"] = [{"cel": {"expression": expression}}]
    spec: dict[str, Any] = {"requests": [{"name": REQUEST, "exactly": exactly}]}
    sharing = _gpu_sharing(dra)
    if sharing is not None:
        parameters = {"apiVersion": GPU_CONFIG_API_VERSION, "kind": GPU_CONFIG_KIND, "sharing": sharing}
        spec["config"] = [
            {"requests": [REQUEST], "opaque": {"driver": devices.DRIVER, "parameters": parameters}}
        ]
    return {"devices": spec}


def _gpu_sharing(dra: Dra) -> dict[str, Any] | None:
    """GpuConfig.sharing (k8s-dra-driver-gpu api/nvidia.com/resource/v1beta1/sharing.go GpuSharing)."""
    if dra.strategy == "TimeSlicing":
        config = {} if dra.time_slice_interval is None else {"interval": dra.time_slice_interval}
        return (
            {"strategy": "TimeSlicing", "timeSlicingConfig": config}
            if config
            else {"strategy": "TimeSlicing"}
        )
    if dra.strategy == "MPS":
        mps: dict[str, Any] = {}
        if dra.mps_thread_percentage is not None:
            mps["defaultActiveThreadPercentage"] = dra.mps_thread_percentage
        if dra.mps_pinned_memory is not None:
            mps["defaultPinnedDeviceMemoryLimit"] = dra.mps_pinned_memory
        return {"strategy": "MPS", "mpsConfig": mps} if mps else {"strategy": "MPS"}
    return None


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
_BY_POLICY: dict[int, tuple[SharingPolicy, Mapping[str, Any]]] = {}
_REMEMBERED = 64


def _devices_by_name(policy: SharingPolicy) -> Mapping[str, Any]:
    """Template name -> its `devices`, for every shape: names do not depend on the namespace."""
    found = _BY_POLICY.get(id(policy))
    if found is not None and found[0] is policy:
        return found[1]
    devices = {template_name(policy, s): _claim_spec(_dra(policy), s)["devices"] for s in shapes(policy)}
    if len(_BY_POLICY) >= _REMEMBERED:
        _BY_POLICY.clear()
    _BY_POLICY[id(policy)] = (policy, devices)
    return devices


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
