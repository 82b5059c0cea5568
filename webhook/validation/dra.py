"""Built-in DRA checks. Pure.

On pods: every resource claim must resolve, so that no rule counts a pod's GPUs as zero by
mistake. A claim that cannot be counted is denied and named. One that does not exist yet while
the cluster state is complete (`judge_unseen`) is a warning when what it brings is judged when it
is made: a claim's or template's own CREATE is judged as a pod holding it would be, which covers
the pod when that claim is all it gets and no GPU quota counts it. Otherwise it is denied, naming
it and what to do. A workload's pods are judged when they are created, so a workload only warns.

For extended resources a DeviceClass serves (`served_classes`), kube-scheduler makes a
ResourceClaim on that class while binding the pod (`scheduler_claim` builds the same claim),
so the pod's admission judges that claim's class as its own.

On ResourceClaims and ResourceClaimTemplates themselves, outside exempt namespaces:
- a template under a name that a mode dra policy points pods at must have that policy's spec;
- `allocationMode: All` on a GPU device class takes every GPU of a node: denied;
- `adminAccess: true` reaches devices in use by others: denied unless an administrator labelled
  the namespace for it, with Kubernetes' own `resource.kubernetes.io/admin-access=true` (which
  kube-apiserver itself requires for adminAccess) or `gpuwebhook.io/dra-admin-access=true`. Such a
  request may take `allocationMode: All`: it monitors every device of a node and takes none.
How many devices a claim may ask for is the `gpu-max-per-pod` constraint's job (it reads
`input.gpu`, which counts a claim as it counts a pod holding it), and which device classes a
namespace may use is the `gpu-dra-device-classes` constraint's.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from webhook import quantity
from webhook.accounting.count import claim_devices
from webhook.accounting.target import PodTarget
from webhook.decision import Finding
from webhook.dra import templates
from webhook.dra.devices import ClaimError, DeviceAsk
from webhook.dra.index import DraIndex
from webhook.dra.resolve import REMEDY, UnseenClaim, pod_claims
from webhook.sharing_policy import SharingPolicy

CLAIMS_RESOLVE = "gpu-builtin/dra-claims"
CLAIM_RULES = "gpu-builtin/dra-claim"
ADMIN_ACCESS_LABEL = "gpuwebhook.io/dra-admin-access"
# k8s.io/api resource/v1 types.go DRAAdminNamespaceLabelKey.
KUBERNETES_ADMIN_ACCESS_LABEL = "resource.kubernetes.io/admin-access"
ADMIN_ACCESS_LABELS = (KUBERNETES_ADMIN_ACCESS_LABEL, ADMIN_ACCESS_LABEL)
# k8s.io/api resource/v1 types.go: ResourceDeviceClassPrefix, the extended resource name every
# DeviceClass serves (DRAExtendedResource), and ExtendedResourceClaimAnnotation, which marks the
# claim kube-scheduler makes for such resources.
IMPLICIT_PREFIX = "deviceclass.resource.kubernetes.io/"
EXTENDED_CLAIM_ANNOTATION = "resource.kubernetes.io/extended-resource-claim"


@dataclass(frozen=True)
class Unseen:
    """The claims and templates a pod names that do not exist yet, and whether it may wait for them."""

    claims: tuple[UnseenClaim, ...] = ()
    blocker: str | None = None  # why they must exist at admission; None: the pod may wait

    @property
    def waits(self) -> bool:
        return bool(self.claims) and self.blocker is None

    def sources(self) -> tuple[str, ...]:
        """As the rules name the claims a pod gets GPUs from."""
        return tuple(f"{c.source}, not created yet" for c in self.claims)


NOTHING_UNSEEN = Unseen()


def judge_unseen(
    target: PodTarget,
    claims: tuple[UnseenClaim, ...],
    *,
    creating: bool,
    other_devices: int,
    quota: str | None,
) -> Unseen:
    """Whether a pod may wait for claims that do not exist yet (`resolve.unseen_claims`).
    `other_devices`: the GPU devices it gets besides; `quota`: a GPU quota that counts it."""
    if not claims:
        return NOTHING_UNSEEN
    return Unseen(claims, _blocker(target, claims, creating, other_devices, quota))


def _blocker(
    target: PodTarget, claims: tuple[UnseenClaim, ...], creating: bool, other_devices: int, quota: str | None
) -> str | None:
    # A claim's spec is immutable and a pod's claims too: an update changes nothing they bring.
    if target.kind != "Pod" or not creating:
        return None
    if quota is not None:
        return f"GPU quota {quota!r} counts the pod's devices when it is admitted"
    if len(claims) > 1:
        return (
            f"it is one of {len(claims)} the pod names that do not exist, whose total is judged at admission"
        )
    if other_devices:
        return (
            f"the pod gets {other_devices} other GPU device(s), and its total is judged when it is admitted"
        )
    return None


def pod_findings(
    target: PodTarget, namespace: str, dra: DraIndex | None, unseen: Unseen = NOTHING_UNSEEN
) -> list[Finding]:
    """A denial naming the first claim of the pod that cannot be resolved or counted; a warning for
    each claim it may wait for (`unseen`, from judge_unseen)."""
    spec = target.pod.get("spec")
    if dra is None or not isinstance(spec, dict) or not spec.get("resourceClaims"):
        return []
    if unseen.claims and unseen.blocker is not None:
        first = unseen.claims[0]
        message = (
            f"{target.describe()}: {first.describe()} does not exist yet, and {unseen.blocker}: {REMEDY}"
        )
        return [Finding(CLAIMS_RESOLVE, "deny", message)]
    try:
        # The claims it waits for are not counted now, so resolve as if they had not arrived.
        pod_claims(target.pod, namespace, dataclasses.replace(dra, synced=False) if unseen.waits else dra)
    except ClaimError as e:
        return [Finding(CLAIMS_RESOLVE, "deny", f"{target.describe()}: {e}")]
    # Short: kube-apiserver cuts a warning at 120 characters, and the name must survive.
    return [
        Finding(CLAIMS_RESOLVE, "warn", f"{c.source} does not exist yet; judged when created")
        for c in unseen.claims
    ]


def served_classes(target: PodTarget, dra: DraIndex | None) -> dict[str, tuple[str, ...]]:
    """Device class -> the extended resources of the pod it serves: by a class's
    `extendedResourceName`, or by the name Kubernetes gives every class. A name that several
    classes claim maps to all of them, since the scheduler may pick any."""
    by_name = _extended_names(dra) if dra is not None else {}
    found: dict[str, set[str]] = {}
    for name in _resource_names(target):
        classes = by_name.get(name, ())
        if name.startswith(IMPLICIT_PREFIX):
            classes = (*classes, name.removeprefix(IMPLICIT_PREFIX))
        for device_class in classes:
            found.setdefault(device_class, set()).add(name)
    return {device_class: tuple(sorted(names)) for device_class, names in sorted(found.items())}


def _resource_names(target: PodTarget) -> set[str]:
    names: set[str] = set()
    for _, container in target.containers():
        for section in _sections(container):
            names.update(name for name in section if isinstance(name, str) and "/" in name)
    return names


def _sections(container: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    resources = container.get("resources")
    if not isinstance(resources, dict):
        return []
    return [part for key in ("limits", "requests") if isinstance(part := resources.get(key), dict)]


# Snapshots are immutable: the name table is built once per snapshot, each entry keeping its
# snapshot alive so that an id is not reused while remembered.
_NAMES: dict[int, tuple[DraIndex, Mapping[str, tuple[str, ...]]]] = {}
_NAMES_REMEMBERED = 8


def _extended_names(dra: DraIndex) -> Mapping[str, tuple[str, ...]]:
    found = _NAMES.get(id(dra))
    if found is not None and found[0] is dra:
        return found[1]
    table: dict[str, list[str]] = {}
    for info in dra.classes.values():
        if info.extended_resource:
            table.setdefault(info.extended_resource, []).append(info.name)
    names = {name: tuple(sorted(classes)) for name, classes in table.items()}
    if len(_NAMES) >= _NAMES_REMEMBERED:
        _NAMES.clear()
    _NAMES[id(dra)] = (dra, names)
    return names


def scheduler_claim(
    target: PodTarget, namespace: str, device_class: str, resources: Iterable[str]
) -> dict[str, Any]:
    """The ResourceClaim kube-scheduler makes for the pod's `resources` on `device_class` (as NVIDIA's
    k8s-dra-driver-gpu demo/specs/extended-resources/ shows it): one request per container and
    resource, owned by the pod, with the scheduler's annotation."""
    wanted = set(resources)
    requests = []
    for index, (_, container) in enumerate(target.containers()):
        asked = sorted({n for section in _sections(container) for n in section if n in wanted})
        for position, name in enumerate(asked):
            exactly = {
                "deviceClassName": device_class,
                "allocationMode": "ExactCount",
                "count": _count(container, name),
            }
            requests.append({"name": f"container-{index}-request-{position}", "exactly": exactly})
    metadata = target.metadata
    owner = {"apiVersion": "v1", "kind": "Pod", "name": target.name, "controller": True}
    if isinstance(metadata.get("uid"), str):
        owner["uid"] = metadata["uid"]
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {
            "name": f"{target.name or 'pod'}-extended-resources",
            "namespace": namespace,
            "annotations": {EXTENDED_CLAIM_ANNOTATION: "true"},
            "ownerReferences": [owner],
        },
        "spec": {"devices": {"requests": requests}},
    }


def _count(container: Mapping[str, Any], name: str) -> int:
    for section in _sections(container):
        if name in section:
            try:
                return max(1, quantity.parse_count(section[name], name))
            except quantity.QuantityError:
                return 1  # gpu-builtin/quantities names it; the class is what is judged here
    return 1


def classes_allowed(parameters: Iterable[Mapping[str, Any]], device_class: str) -> bool:
    """True when every one of these gpu-dra-device-classes parameter sets allows the class, read as
    the bundled template reads `allowedClasses`: so that constraint finds nothing, whatever it matches."""
    return all(_allows(p.get("allowedClasses"), device_class) for p in parameters)


def allows_every_class(parameters: Mapping[str, Any]) -> bool:
    patterns = parameters.get("allowedClasses")
    return isinstance(patterns, list) and "*" in patterns


def _allows(patterns: object, name: str) -> bool:
    if not isinstance(patterns, list):
        return False
    for pattern in patterns:
        if not isinstance(pattern, str):
            continue
        if pattern == name or (pattern.endswith("*") and name.startswith(pattern[:-1])):
            return True
        if pattern.startswith("*") and name.endswith(pattern[1:]):
            return True
    return False


def claim_findings(
    obj: Mapping[str, Any],
    namespace: str,
    labels: Mapping[str, str],
    dra: DraIndex,
    policies: Sequence[SharingPolicy] = (),
) -> list[Finding]:
    """What is wrong with a ResourceClaim or ResourceClaimTemplate: one finding per problem."""
    subject = f"{obj.get('kind')} {_name(obj)}"
    squatted = _squatted(obj, namespace, labels, policies)
    if squatted:
        return [Finding(CLAIM_RULES, "deny", f"{subject}: {squatted}")]
    try:
        asks = dra.asks(claim_devices(dict(obj)))
    except ClaimError as e:
        return [Finding(CLAIM_RULES, "deny", f"{subject}: {e}")]
    # "true", case-sensitive, as kube-apiserver reads its own label.
    admin_allowed = any(labels.get(label) == "true" for label in ADMIN_ACCESS_LABELS)
    findings = []
    for ask in asks:
        problem = _problem(ask, namespace, admin_allowed)
        if problem:
            findings.append(Finding(CLAIM_RULES, "deny", f"{subject}: request {ask.request!r} {problem}"))
    return findings


def _squatted(
    obj: Mapping[str, Any], namespace: str, labels: Mapping[str, str], policies: Sequence[SharingPolicy]
) -> str | None:
    """A template under a name a mode dra policy points pods at must be that policy's template:
    otherwise whoever creates it first decides what those pods get."""
    if obj.get("kind") != templates.KIND or not any(p.sharing.mode == "dra" for p in policies):
        return None
    name = _name(obj)
    reserved = templates.reserved_by(policies, namespace, labels, name)
    if reserved is None or obj.get("spec") == reserved[1]:
        return None
    owner = reserved[0]
    return (
        f"the name belongs to policy {owner}'s mode dra template, whose spec this is not; "
        "create it as `gpu-webhook dra templates` prints it, or leave it to the webhook"
    )


def _problem(ask: DeviceAsk, namespace: str, admin_allowed: bool) -> str | None:
    if ask.takes_node:
        return f"asks for every {ask.device_class} device of a node (allocationMode All); ask for a count"
    if ask.admin_access and not admin_allowed:
        return (
            f"sets adminAccess on {ask.device_class}, which reaches devices other pods use; namespace "
            f"{namespace} lacks the label {KUBERNETES_ADMIN_ACCESS_LABEL}=true (or {ADMIN_ACCESS_LABEL}=true)"
        )
    return None


def _name(obj: Mapping[str, Any]) -> str:
    meta = obj.get("metadata")
    name = meta.get("name") if isinstance(meta, dict) else None
    return name if isinstance(name, str) and name else "?"
