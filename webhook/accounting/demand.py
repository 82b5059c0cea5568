"""What one pod asks of a GPU quota, from every vendor. Pure.

Two steps, so the cluster cache can keep the small first result and apply the
(cached) second one with any settings:

- `pod_shape(pod)` reads the GPU-relevant part of a pod: the extended resources of
  each container and KAI's annotations. Invalid values raise QuotaInputError.
  Each resource name is read through the vendor catalog (webhook/vendors.py): a
  device count, a memory or compute share of each device, a MIG slice.
- `shape_demand(shape, settings)` turns a shape into a Usage. It follows the way
  Kubernetes computes a pod's effective request, per resource:
  `max(sum over app containers, max over init containers)`, where a native sidecar
  (an init container with `restartPolicy: Always`) adds to the app sum and to every
  init container that starts after it. GPU-equivalents and GPU memory are derived
  per container and per resource name before that rule, so HAMi's per-GPU memory is
  multiplied by its own container's GPU count, never by another container's.
"""

from __future__ import annotations

import functools
import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from fractions import Fraction
from typing import Any

from webhook import gpu, quantity, vendors
from webhook.accounting import by_resources, kai, names
from webhook.accounting.usage import NOTHING, ZERO, Usage
from webhook.dra.devices import ClaimError, DeviceAsk
from webhook.dra.index import IMPLICIT_PREFIX, DraIndex
from webhook.dra.resolve import ClaimShape, pod_claims
from webhook.types import KubeObject

FINISHED_PHASES = frozenset({"Succeeded", "Failed"})
DEFAULT_SHARED_REPLICAS = 4
_WHOLE_NUMBER = re.compile(r"^[0-9]{1,9}$")

Amounts = tuple[tuple[str, int], ...]
"""A container's extended resources, sorted by name: (resource name, effective request)."""


class QuotaInputError(ValueError):
    """A pod value that quota cannot count; the message names the container and the value."""


@dataclass(frozen=True)
class QuotaSettings:
    """How GPU-equivalents and GPU memory are counted. Every field is a documented default.

    whole_gpu_weight: GPU-equivalents of one `nvidia.com/gpu`.
    mig_slices_per_gpu: a MIG profile `<g>g.*` counts g / this.
    shared_replicas: (resource name, replicas) of time-slicing and MPS; one unit of such a
        resource is 1/replicas of a GPU. Add `nvidia.com/gpu` when the device plugin
        time-slices without renaming.
    card_memory_mib: memory of one whole card, for HAMi and KAI shares and for whole GPUs.
        Unknown (None): shares given only as memory count as a whole GPU, and whole GPUs
        add no memory.
    gpu_model: the card model, when the quota names one: a MIG slice then counts the memory it
        really has on that card (A100-80GB's 1g.10gb is 9,856 MiB), not its name's size.
    hami_default_gpus: the device count HAMi (and every family that shares devices by memory
        or compute) assumes when a container sets a share without a count.
    """

    whole_gpu_weight: Fraction = Fraction(1)
    mig_slices_per_gpu: int = gpu.MIG_SLICES
    shared_replicas: tuple[tuple[str, int], ...] = ((gpu.SHARED_GPU, DEFAULT_SHARED_REPLICAS),)
    card_memory_mib: int | None = None
    hami_default_gpus: int = 1
    gpu_model: str | None = None  # the card (accounting.gpuModel): MIG slices count their real MiB

    def replicas(self, resource: str) -> int | None:
        return dict(self.shared_replicas).get(resource)


DEFAULT_SETTINGS = QuotaSettings()


@dataclass(frozen=True)
class KaiRequest:
    """KAI scheduler's pod annotations: a fraction or a memory size, on one or more devices."""

    fraction: Fraction | None
    memory_mib: int | None
    devices: int


@dataclass(frozen=True)
class PodShape:
    """The GPU-relevant part of a pod; hashable, so identical pods share one object and one result."""

    app: tuple[Amounts, ...] = ()
    init: tuple[tuple[Amounts, bool], ...] = ()
    kai: KaiRequest | None = None
    # MIG single strategy: the pod runs only where nvidia.com/gpu is a slice of this many
    # compute slices and at least this much memory (see `_single_mig_slice`).
    single_mig: tuple[int, int] | None = None
    # DRA: the pod's GPU claims (pod-level, so outside the per-container rule), and the extended
    # resources it asks that GPU device classes serve: (name, MIG slices or 0, MiB per device or 0).
    claims: tuple[ClaimShape, ...] = ()
    backed: tuple[tuple[str, int, int, str], ...] = ()

    def without_claims(self, keys: frozenset[str]) -> PodShape:
        """This shape minus the shared claims in `keys` (already counted in the namespace)."""
        if not self.claims:
            return self
        kept = tuple(c for c in self.claims if not c.key or c.key not in keys)
        return self if len(kept) == len(self.claims) else replace(self, claims=kept)

    def own(self) -> PodShape:
        """This shape minus every shared claim: what this pod alone adds to its namespace."""
        if not self.claims:
            return self
        kept = tuple(c for c in self.claims if not c.key)
        return self if len(kept) == len(self.claims) else replace(self, claims=kept)

    def accelerators(self) -> tuple[str, ...]:
        """The accelerator resources any container asks for, sorted: every vendor's names
        (webhook/vendors.py) and the extended resources a GPU DeviceClass serves."""
        asked = {name for amounts in (*self.app, *(a for a, _ in self.init)) for name, _ in amounts}
        known = {name for name in asked if names.is_accelerator(name)}
        return tuple(sorted(known | {row[0] for row in self.backed}))

    def shared_claims(self) -> tuple[ClaimShape, ...]:
        if not self.claims:
            return ()
        return tuple(c for c in self.claims if c.key)


def is_finished(pod: KubeObject) -> bool:
    """Pods that succeeded or failed hold no devices."""
    status = pod.get("status")
    return isinstance(status, dict) and status.get("phase") in FINISHED_PHASES


def pod_shape(pod: KubeObject, dra: DraIndex | None = None, namespace: str = "") -> PodShape | None:
    """The pod's GPU-relevant requests, or None when it asks for no extended resource at all.
    With `dra`, its resource claims count too (resolved in `namespace`, else the pod's own)."""
    spec = _mapping(pod.get("spec"), "spec")
    app = tuple(sorted(_amounts(c, "containers") for c in _containers(spec, "containers")))
    init = tuple(
        (_amounts(c, "initContainers"), c.get("restartPolicy") == "Always")
        for c in _containers(spec, "initContainers")
    )
    kai = _kai_request(_mapping(_mapping(pod.get("metadata"), "metadata").get("annotations"), "annotations"))
    claims: tuple[ClaimShape, ...] = ()
    backed: tuple[tuple[str, int, int, str], ...] = ()
    if dra is not None:
        # Pods without claims pay one dict lookup here, and nothing while no DeviceClass serves
        # an extended resource.
        if spec.get("resourceClaims"):
            claims = _claims(pod, dra, namespace)
        if dra.backed_resources() or _asks_implicit(app, init):
            backed = _backed(app, init, dra)
    if kai is None and not claims and not any(app) and not any(amounts for amounts, _ in init):
        return None
    return PodShape(app, init, kai, _single_mig_slice(spec), claims, backed)


def _claims(pod: KubeObject, dra: DraIndex, namespace: str) -> tuple[ClaimShape, ...]:
    own = _mapping(pod.get("metadata"), "metadata").get("namespace")
    try:
        return pod_claims(pod, namespace or (own if isinstance(own, str) and own else "default"), dra)
    except ClaimError as e:
        raise QuotaInputError(str(e)) from e


def _backed(
    app: tuple[Amounts, ...], init: tuple[tuple[Amounts, bool], ...], dra: DraIndex
) -> tuple[tuple[str, int, int, str], ...]:
    """Extended resources of the pod that a GPU DeviceClass serves and that no other rule counts:
    (name, MIG slices or 0, MiB per device or 0, the class)."""
    asked = {name for amounts in (*app, *(a for a, _ in init)) for name, _ in amounts}
    found = []
    for name in sorted(asked):
        if names.is_accelerator(name):
            continue  # counted by name, as its vendor's device plugin serves it
        device_class = dra.served_class(name)
        reading = dra.judge.judge(device_class) if device_class is not None else None
        if device_class is None or reading is None:
            continue
        profile = reading.profile
        found.append((name, profile.slices if profile else 0, reading.memory_mib, device_class))
    return tuple(found)


def _asks_implicit(app: tuple[Amounts, ...], init: tuple[tuple[Amounts, bool], ...]) -> bool:
    return any(
        name.startswith(IMPLICIT_PREFIX) for amounts in (*app, *(a for a, _ in init)) for name, _ in amounts
    )


def pod_demand(pod: KubeObject, settings: QuotaSettings = DEFAULT_SETTINGS) -> Usage:
    """Everything the pod takes from a quota while it runs; nothing once it has finished."""
    shape = pod_shape(pod)
    if shape is None or is_finished(pod):
        return NOTHING
    return shape_demand(shape, settings)


@functools.lru_cache(maxsize=4096)
def shape_demand(shape: PodShape, settings: QuotaSettings) -> Usage:
    app = _sum(_container_vector(a, settings, shape.single_mig, shape.backed) for a in shape.app)
    sidecars: _Vector = {}
    init_peak: _Vector = {}
    for amounts, sidecar in shape.init:
        vector = _container_vector(amounts, settings, shape.single_mig, shape.backed)
        if sidecar:
            app = _sum((app, vector))
            sidecars = _sum((sidecars, vector))
            phase = sidecars
        else:
            phase = _sum((vector, sidecars))
        init_peak = _max(init_peak, phase)
    effective = _max(app, init_peak)
    if shape.kai is not None:
        effective = _sum((effective, _kai_vector(shape.kai, settings)))
    for claim in shape.claims:
        effective = _sum((effective, _claim_vector(claim, settings)))
    return _collapse(effective)


def claim_demand(claim: ClaimShape, settings: QuotaSettings) -> Usage:
    """What one claim takes, on its own: a shared claim is added once per namespace."""
    return _collapse(_claim_vector(claim, settings))


def device_class_resource(device_class: str) -> str:
    """The per-class count, named as Kubernetes' own ResourceQuota names DRA devices."""
    return f"{device_class}.deviceclass.resource.k8s.io/devices"


def _claim_vector(claim: ClaimShape, settings: QuotaSettings) -> _Vector:
    vector: _Vector = {}
    for ask in claim.asks:
        vector = _sum((vector, _ask_vector(ask, settings)))
    return vector


def _ask_vector(ask: DeviceAsk, settings: QuotaSettings) -> _Vector:
    key = device_class_resource(ask.device_class)
    part: _Vector = {(_COUNT, key): Fraction(ask.charged)}
    # adminAccess reaches devices others hold and allocates none: no GPU, though Kubernetes'
    # ResourceQuota still charges the class (pkg/quota/v1/evaluator/core/resource_claims.go).
    if ask.charge_only or ask.admin_access:
        return part
    if ask.profile is not None:
        gpus = Fraction(ask.count * ask.profile.slices, settings.mig_slices_per_gpu)
    else:
        gpus = ask.count * settings.whole_gpu_weight * ask.share
    # A whole GPU holds at least what it was asked for, and the card's memory where the quota says.
    card = settings.card_memory_mib * ask.share if ask.profile is None and settings.card_memory_mib else 0
    memory = max(ask.memory_mib, card)
    part[(_GPUS, key)] = gpus
    part[(_DEVICES, key)] = Fraction(ask.count)
    if memory:
        part[(_MEMORY, key)] = Fraction(ask.count * memory)
    return part


# A container's demand broken down by (dimension, resource name), so that the
# Kubernetes max/sum rule applies per resource, as the scheduler reserves them.
_Vector = dict[tuple[str, str], Fraction]
_GPUS, _MEMORY, _COUNT, _DEVICES = "gpus", "memory", "count", "devices"
_REQUIRED = "requiredDuringSchedulingIgnoredDuringExecution"
_STRATEGY, _SLICES, _MEMORY_LABEL = (
    "nvidia.com/mig.strategy",
    "nvidia.com/gpu.slices.gi",
    "nvidia.com/gpu.memory",
)
_SINGLE_KEYS = frozenset({_STRATEGY, _SLICES, _MEMORY_LABEL})


def _container_vector(
    amounts: Amounts,
    settings: QuotaSettings,
    single_mig: tuple[int, int] | None = None,
    backed: tuple[tuple[str, int, int, str], ...] = (),
) -> _Vector:
    vector: _Vector = {(_COUNT, name): Fraction(count) for name, count in amounts}
    families: dict[vendors.Family, dict[vendors.Part, int]] = {}
    for name, count in amounts:
        profile = gpu.parse_mig_resource(name)
        found = vendors.family_of(name) if profile is None else None
        if profile is not None:
            _add_mig(vector, name, count, profile, settings)
        elif found is not None:
            families.setdefault(found[0], {})[found[1]] = count
        elif settings.replicas(name):
            _add_share_or_whole(vector, name, count, settings)
    for family, parts in families.items():
        _add_family(vector, family, parts, settings, single_mig)
    by_name = dict(amounts)
    for name, slices, memory, device_class in backed:
        if by_name.get(name):
            _add_backed(vector, name, by_name[name], slices, memory, settings)
            # Kubernetes' ResourceQuota charges the class for an extended resource it serves.
            if device_class:
                key = (_COUNT, device_class_resource(device_class))
                vector[key] = vector.get(key, ZERO) + by_name[name]
    return vector


def _add_family(
    vector: _Vector,
    family: vendors.Family,
    parts: Mapping[vendors.Part, int],
    settings: QuotaSettings,
    single_mig: tuple[int, int] | None,
) -> None:
    """One vendor family's asks in one container: MIG single-strategy slices, a share of memory
    or compute on each device (HAMi's shape), or whole devices (or replicas, where configured)."""
    count = parts.get("count", 0)
    if family is vendors.NVIDIA and single_mig is not None and count:
        _add_slices(vector, family.count, count, single_mig, settings)
    elif parts.keys() - {"count"}:
        _add_share(vector, family, parts, settings)
    elif count:
        _add_share_or_whole(vector, family.count, count, settings, family.weight)


def _add_mig(
    vector: _Vector, name: str, count: int, profile: gpu.MigProfile, settings: QuotaSettings
) -> None:
    """A MIG slice; a `.shared` slice is one of the replicas the device plugin time-slices it into,
    counted as 1/replicas of the slice where sharedReplicas names it, else as the whole slice."""
    memory = gpu.real_memory_mib(settings.gpu_model, profile) if settings.gpu_model else profile.memory_mib
    _add_slices(vector, name, count, (profile.slices, memory), settings)
    replicas = settings.replicas(name) if profile.shared else None
    if replicas:
        for dimension in (_GPUS, _MEMORY):
            vector[(dimension, name)] /= replicas


def _add_slices(
    vector: _Vector, name: str, count: int, size: tuple[int, int], settings: QuotaSettings
) -> None:
    slices, memory_mib = size
    vector[(_GPUS, name)] = Fraction(count * slices, settings.mig_slices_per_gpu)
    vector[(_MEMORY, name)] = Fraction(count * memory_mib)
    vector[(_DEVICES, name)] = Fraction(count)


def _single_mig_slice(spec: Mapping[str, Any]) -> tuple[int, int] | None:
    """(compute slices, MiB) when every required node term keeps the pod on MIG single-strategy
    nodes with one slice size: there `nvidia.com/gpu` is a slice (GPU Feature Discovery labels,
    k8s-device-plugin internal/lm/mig-strategy_test.go). Trusting the pod's own affinity is
    safe: a pod that writes it can only run where it is true."""
    affinity = spec.get("affinity")
    node = affinity.get("nodeAffinity") if isinstance(affinity, dict) else None
    required = node.get(_REQUIRED) if isinstance(node, dict) else None
    terms = required.get("nodeSelectorTerms") if isinstance(required, dict) else None
    if not isinstance(terms, list) or not terms:
        return None
    sizes = {_term_slice(term) for term in terms}
    return sizes.pop() if len(sizes) == 1 else None


def _term_slice(term: object) -> tuple[int, int] | None:
    expressions = term.get("matchExpressions") if isinstance(term, dict) else None
    if not isinstance(expressions, list):
        return None
    found: dict[tuple[str, str], Any] = {}
    for e in expressions:
        if isinstance(e, dict) and e.get("key") in _SINGLE_KEYS:
            found[(str(e["key"]), str(e.get("operator")))] = e.get("values")
    single = found.get((_STRATEGY, "In")) == ["single"]
    slices = found.get((_SLICES, "In"))
    memory = found.get((_MEMORY_LABEL, "Gt"))
    if not single or not _one_number(slices):
        return None
    assert isinstance(slices, list)
    mib = int(memory[0]) + 1 if _one_number(memory) and isinstance(memory, list) else 0
    return int(slices[0]), mib


def _one_number(values: object) -> bool:
    return (
        isinstance(values, list) and len(values) == 1 and isinstance(values[0], str) and values[0].isdigit()
    )


def _add_backed(
    vector: _Vector, name: str, count: int, slices: int, memory: int, settings: QuotaSettings
) -> None:
    """An extended resource a GPU DeviceClass serves: whole devices, or MIG slices of its profile."""
    if slices:
        vector[(_GPUS, name)] = Fraction(count * slices, settings.mig_slices_per_gpu)
    else:
        vector[(_GPUS, name)] = count * settings.whole_gpu_weight
    vector[(_DEVICES, name)] = Fraction(count)
    per_device = memory or (settings.card_memory_mib if not slices else 0) or 0
    if per_device:
        vector[(_MEMORY, name)] = Fraction(count * per_device)


def _add_share_or_whole(
    vector: _Vector, name: str, count: int, settings: QuotaSettings, weight: Fraction = Fraction(1)
) -> None:
    """Whole devices, or replicas where the quota's sharedReplicas names the resource. A weight of 0
    (access for monitoring) holds no device a workload could run on."""
    replicas = settings.replicas(name)
    share = Fraction(1, replicas) if replicas else settings.whole_gpu_weight * weight
    vector[(_GPUS, name)] = count * share
    vector[(_DEVICES, name)] = Fraction(count) if weight else ZERO
    if settings.card_memory_mib and share:
        vector[(_MEMORY, name)] = count * share * settings.card_memory_mib


def _add_share(
    vector: _Vector, family: vendors.Family, parts: Mapping[vendors.Part, int], settings: QuotaSettings
) -> None:
    """A share on each of `count` devices: memory (in the family's unit, or a percentage of the
    card) and compute percent, as HAMi, Volcano's vGPU and gpushare ask (HAMi
    pkg/device/nvidia/device.go, volcano-vgpu-device-plugin pkg/plugin/vgpu/util). Without a
    count, the device plugin gives one device (HAMi's defaultGPUNum)."""
    count = parts.get("count") or settings.hami_default_gpus
    card = settings.card_memory_mib
    memory: Fraction | None = None
    if "memory" in parts:
        memory = parts["memory"] * family.memory_mib
    elif "percent" in parts and card:
        memory = Fraction(parts["percent"] * card, 100)
    elif card:
        memory = Fraction(card)
    if memory is not None and card:
        share = min(memory / card, Fraction(1))
    elif "cores" in parts:
        share = min(Fraction(parts["cores"], family.cores_whole), Fraction(1))
    else:
        share = Fraction(1)
    key = family.count or family.memory
    vector[(_GPUS, key)] = count * share * family.weight
    vector[(_DEVICES, key)] = Fraction(count)
    if memory is not None:
        vector[(_MEMORY, key)] = count * memory


def _kai_vector(kai: KaiRequest, settings: QuotaSettings) -> _Vector:
    card = settings.card_memory_mib
    if kai.fraction is not None:
        share, memory = kai.fraction, (kai.fraction * card if card else None)
    else:
        assert kai.memory_mib is not None
        memory = Fraction(kai.memory_mib)
        share = min(memory / card, Fraction(1)) if card else Fraction(1)
    vector = {
        (_GPUS, gpu.KAI_FRACTION): share * kai.devices,
        (_DEVICES, gpu.KAI_FRACTION): Fraction(kai.devices),
    }
    if memory is not None:
        vector[(_MEMORY, gpu.KAI_FRACTION)] = memory * kai.devices
    return vector


def _sum(vectors: Iterable[_Vector]) -> _Vector:
    result: _Vector = {}
    for vector in vectors:
        for key, amount in vector.items():
            result[key] = result.get(key, ZERO) + amount
    return result


def _max(a: _Vector, b: _Vector) -> _Vector:
    return {key: max(a.get(key, ZERO), b.get(key, ZERO)) for key in a.keys() | b.keys()}


def _collapse(vector: _Vector) -> Usage:
    gpus = sum((v for (dim, _), v in vector.items() if dim == _GPUS), ZERO)
    memory = sum((v for (dim, _), v in vector.items() if dim == _MEMORY), ZERO)
    counts = {name: v for (dim, name), v in vector.items() if dim == _COUNT and v}
    devices = sum((v for (dim, _), v in vector.items() if dim == _DEVICES), ZERO)
    return Usage(gpus, memory, counts, devices)


def _containers(spec: Mapping[str, Any], field: str) -> list[Mapping[str, Any]]:
    containers = spec.get(field) or []
    if not isinstance(containers, list) or not all(isinstance(c, dict) for c in containers):
        raise QuotaInputError(f"spec.{field} must be a list of containers")
    return containers


def _amounts(container: Mapping[str, Any], field: str) -> Amounts:
    """Extended resources (names with a '/'); a request defaults to the limit, as the apiserver does."""
    if type(container) is dict:
        return _remembered_amounts(container, field)
    return _read_amounts(container, field)


def _read_amounts(container: Mapping[str, Any], field: str) -> Amounts:
    name = container.get("name", "?")
    resources = _mapping(container.get("resources"), f"{field} {name!r} resources")
    requests = _mapping(resources.get("requests"), f"{field} {name!r} requests")
    limits = _mapping(resources.get("limits"), f"{field} {name!r} limits")
    amounts: dict[str, int] = {}
    for resource in requests.keys() | limits.keys():
        if not isinstance(resource, str) or "/" not in resource:
            continue
        if gpu.is_mig_resource(resource) and gpu.parse_mig_resource(resource) is None:
            # A name the device plugin never advertises would escape the quota's MIG count.
            raise QuotaInputError(f"container {name!r}: {resource} is not a MIG profile name")
        value = requests[resource] if resource in requests else limits[resource]
        try:
            amounts[resource] = quantity.parse_count(value, f"container {name!r}: {resource}")
        except quantity.QuantityError as e:
            raise QuotaInputError(_named(str(e), name, resource)) from e
    return tuple(sorted((k, v) for k, v in amounts.items() if v))


_remembered_amounts = by_resources.Remembered(_read_amounts, by_resources.always)


def _named(message: str, container: str, resource: str) -> str:
    prefix = f"container {container!r}"
    return message if message.startswith(prefix) else f"{prefix}: {resource}: {message}"


def _kai_request(annotations: Mapping[str, Any]) -> KaiRequest | None:
    fraction_text = annotations.get(gpu.KAI_FRACTION)
    memory_text = annotations.get(gpu.KAI_MEMORY)
    if fraction_text is None and memory_text is None:
        if gpu.KAI_NUM_DEVICES in annotations:  # KAI's binder refuses it; never a pod without GPUs
            raise QuotaInputError(kai.problem(annotations, ()) or f"annotation {gpu.KAI_NUM_DEVICES} alone")
        return None
    devices = _whole(annotations.get(gpu.KAI_NUM_DEVICES, "1"), gpu.KAI_NUM_DEVICES)
    if devices < 1:
        raise QuotaInputError(f"annotation {gpu.KAI_NUM_DEVICES} must be at least 1, got {devices}")
    if fraction_text is not None:
        return KaiRequest(_fraction(fraction_text), None, devices)
    memory = _whole(memory_text, gpu.KAI_MEMORY)
    if memory < 1:
        raise QuotaInputError(f"annotation {gpu.KAI_MEMORY} must be a positive number of MiB")
    return KaiRequest(None, memory, devices)


def _fraction(text: object) -> Fraction:
    """KAI reads the fraction with Go's strconv.ParseFloat and takes 0 < f < 1
    (gpu_request_validator.go), so "5e-1" and ".5" are the same half a GPU as "0.5"."""
    value = kai.parse_go_float(text.strip()) if isinstance(text, str) else None
    if value is None or math.isnan(value):
        raise QuotaInputError(f"annotation {gpu.KAI_FRACTION} must be a number in (0, 1), got {_show(text)}")
    if not 0 < value < 1:
        raise QuotaInputError(f"annotation {gpu.KAI_FRACTION} must be in (0, 1), got {_show(text)}")
    assert isinstance(text, str)
    return Fraction(text.strip()) if kai.is_decimal(text.strip()) else Fraction(value)


def _whole(text: object, what: str) -> int:
    if not isinstance(text, str) or not _WHOLE_NUMBER.match(text.strip()):
        raise QuotaInputError(f"annotation {what} must be a whole number, got {_show(text)}")
    return int(text)


def _mapping(value: object, what: str) -> Mapping[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise QuotaInputError(f"{what} must be a mapping")
    return value


def _show(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."
