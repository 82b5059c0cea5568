"""Every GPU stack coexists with the default install, in the namespaces its installer uses.

The objects in data/ are written in the shape of each installer's own manifests (each file names
its upstream source). They go through the installed webhook configurations (manifests/base),
as kube-apiserver dispatches them, answered by review() with the bundled policies: in their own
namespace they are never even sent, and the same objects in an ordinary namespace are denied,
so the exemption is what admits them.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.support.dispatch import Dispatcher, Request, installed_with_bundle
from tests.support.pods import in_namespace
from webhook.config import EXEMPT_NAMESPACES, GPU_STACK_NAMESPACES
from webhook.manifests import RenderOptions, render, server_args

DATA = Path(__file__).parent / "data"
REPO = Path(__file__).resolve().parents[2]
RESOURCES = {"Pod": "pods", "DaemonSet": "daemonsets", "Deployment": "deployments"}
# Who creates a workload's pods (kube-controller-manager's controllers).
CONTROLLERS = {
    "DaemonSet": "system:serviceaccount:kube-system:daemon-set-controller",
    "Deployment": "system:serviceaccount:kube-system:replicaset-controller",
}
ORDINARY = "team-a"
# Namespaces whose pods need nothing the rules refuse: exempt so that a scheduler never waits on
# the webhook (KAI's README.md, Volcano's README.md install them there).
SCHEDULERS = {"kai-scheduler", "volcano-system"}


def _documents(name: str) -> list[dict[str, Any]]:
    return [doc for doc in yaml.safe_load_all((DATA / name).read_text()) if doc]


STACK_OBJECTS = [
    (f"{path.stem}:{doc['metadata']['namespace']}/{doc['metadata']['name']}", doc)
    for path in sorted(DATA.glob("*.yaml"))
    if path.name != "kai.yaml"
    for doc in _documents(path.name)
]
STACKS = [pytest.param(doc, id=name) for name, doc in STACK_OBJECTS]
KAI_RESERVATION, KAI_FRACTION = _documents("kai.yaml")
BINDER = "system:serviceaccount:kai-scheduler:binder"
RESERVATION_POD = "system:serviceaccount:kai-resource-reservation:kai-resource-reservation"


@pytest.fixture(scope="module")
def dispatcher() -> Iterator[Dispatcher]:
    with installed_with_bundle() as dispatcher:
        yield dispatcher


def _creations(obj: dict[str, Any]) -> list[Request]:
    """The object's own CREATE and, for a workload, the CREATE of a pod its controller makes."""
    kind = obj["kind"]
    requests = [Request("CREATE", obj, resource=RESOURCES[kind], username="system:admin")]
    if kind in CONTROLLERS:
        template = obj["spec"]["template"]
        metadata = {**copy.deepcopy(template["metadata"]), "name": f"{obj['metadata']['name']}-x1"}
        metadata["namespace"] = obj["metadata"]["namespace"]
        spec = copy.deepcopy(template["spec"])
        pod = {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": spec}
        requests.append(Request("CREATE", pod, username=CONTROLLERS[kind]))
    return requests


@pytest.mark.parametrize("obj", STACKS)
def test_a_stacks_objects_are_never_sent_from_its_namespace(dispatcher: Dispatcher, obj: Any) -> None:
    for request in _creations(obj):
        outcome = dispatcher.admit(request)
        assert outcome.allowed, outcome.message
        assert outcome.called == [], outcome.called


@pytest.mark.parametrize("obj", STACKS)
def test_the_same_objects_in_an_ordinary_namespace_are_denied(dispatcher: Dispatcher, obj: Any) -> None:
    for request in _creations(in_namespace(ORDINARY, obj)):
        outcome = dispatcher.admit(request)
        assert not outcome.allowed, f"{request.resource} admitted outside {obj['metadata']['namespace']}"


def test_every_stack_namespace_is_exempt_and_needed() -> None:
    """Each namespace the data installs into is exempt by default, and each exempt stack
    namespace holds objects that need it (or a scheduler that must never wait on us)."""
    used = {doc["metadata"]["namespace"] for _, doc in STACK_OBJECTS}
    used.add(KAI_RESERVATION["metadata"]["namespace"])
    assert used <= set(EXEMPT_NAMESPACES)
    assert set(GPU_STACK_NAMESPACES) == (used - {"kube-system"}) | SCHEDULERS


# Every place that lists the exemption agrees with webhook.config.


def test_creating_a_stack_namespace_is_for_administrators_only(dispatcher: Dispatcher) -> None:
    for name in GPU_STACK_NAMESPACES:
        namespace = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}
        denied = dispatcher.admit(Request("CREATE", namespace, resource="namespaces"))
        assert not denied.allowed and "only administrators may create it" in denied.message, name
        admin = Request("CREATE", namespace, resource="namespaces", groups=("system:masters",))
        assert dispatcher.admit(admin).allowed, name
    ordinary = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ORDINARY}}
    assert dispatcher.admit(Request("CREATE", ordinary, resource="namespaces")).called == []


def test_the_guard_lists_the_same_namespaces_as_the_server() -> None:
    constraint = yaml.safe_load((REPO / "policies/security/gpu-ignore-label/constraint.yaml").read_text())
    assert constraint["spec"]["parameters"]["exemptNamespaces"] == list(GPU_STACK_NAMESPACES)


@pytest.mark.parametrize("namespace", ["gpu-system", "gpu-admission"])
def test_the_rendered_install_exempts_every_stack(namespace: str) -> None:
    objects = render(RenderOptions(namespace=namespace))
    expected = ["kube-system", namespace, *GPU_STACK_NAMESPACES]
    assert f"--exclude-namespaces={','.join(expected)}" in server_args(objects)
    pod_webhooks = [
        hook
        for obj in objects
        if obj["kind"].endswith("WebhookConfiguration")
        for hook in obj["webhooks"]
        if hook["name"] != "namespaces.validate.gpuwebhook.io"
    ]
    for hook in pod_webhooks:
        (names,) = (
            e["values"]
            for e in hook["namespaceSelector"]["matchExpressions"]
            if e["key"] == "kubernetes.io/metadata.name"
        )
        assert names == expected, hook["name"]


# KAI's fractional GPU, end to end under the default bundle.


def _binder_update(pod: dict[str, Any], labels: dict[str, str]) -> dict[str, Any]:
    """What KAI's binder patches onto a fractional pod before binding it: its GPU group label
    (resource_reservation.go updatePodGPUGroup) and the received type (binding/binder.go
    patchResourceReceivedTypeAnnotation, common/constants.go ReceivedTypeFraction)."""
    updated = copy.deepcopy(pod)
    updated["metadata"].setdefault("labels", {}).update(labels)
    updated["metadata"]["annotations"]["received-resource-type"] = "Fraction"
    return updated


GROUP = "8f0e3c1a-5b2d-4d7e-9a61-0c4b2f7e9d13"
# pkg/common/resources/gpu_sharing.go: one fraction is labelled runai-gpu-group, a fraction on
# several devices runai-gpu-group/<group> for each group (GetMultiFractionGpuGroupLabel).
GROUPS = {
    "one device": ({}, {"runai-gpu-group": GROUP}),
    "two devices": (
        {"gpu-fraction-num-devices": "2"},
        {f"runai-gpu-group/{GROUP}": GROUP, "runai-gpu-group/0c4b2f7e": "0c4b2f7e"},
    ),
}


def test_kais_reservation_pod_is_admitted_in_its_namespace_only(dispatcher: Dispatcher) -> None:
    created = dispatcher.admit(Request("CREATE", KAI_RESERVATION, username=BINDER))
    assert created.allowed and created.called == [], created.message
    before = copy.deepcopy(KAI_RESERVATION)
    del before["metadata"]["annotations"]["run.ai/reserve_for_gpu_index"]
    written = dispatcher.admit(Request("UPDATE", KAI_RESERVATION, before, username=RESERVATION_POD))
    assert written.allowed and written.called == [], written.message
    elsewhere = dispatcher.admit(Request("CREATE", in_namespace(ORDINARY, KAI_RESERVATION), username=BINDER))
    assert not elsewhere.allowed and "bypasses the scheduler" in elsewhere.message, elsewhere.message


@pytest.mark.parametrize(("annotations", "labels"), list(GROUPS.values()), ids=list(GROUPS))
def test_a_kai_fraction_is_admitted_end_to_end(
    dispatcher: Dispatcher, annotations: dict[str, str], labels: dict[str, str]
) -> None:
    sent = copy.deepcopy(KAI_FRACTION)
    sent["metadata"]["annotations"].update(annotations)
    created = dispatcher.admit(Request("CREATE", sent))
    assert created.allowed and created.called, created.message
    assert created.object is not None
    bound = _binder_update(created.object, labels)
    outcome = dispatcher.admit(Request("UPDATE", bound, created.object, username=BINDER))
    assert outcome.allowed, outcome.message


@pytest.mark.parametrize(("annotations", "labels"), list(GROUPS.values()), ids=list(GROUPS))
def test_a_tenant_cannot_forge_the_binders_writes(
    dispatcher: Dispatcher, annotations: dict[str, str], labels: dict[str, str]
) -> None:
    sent = copy.deepcopy(KAI_FRACTION)
    sent["metadata"]["annotations"].update(annotations)
    created = dispatcher.admit(Request("CREATE", sent))
    assert created.object is not None
    forged = _binder_update(created.object, labels)
    updated = dispatcher.admit(Request("UPDATE", forged, created.object))
    assert not updated.allowed and "runai-gpu-group" in updated.message, updated.message
    assert "received-resource-type" in updated.message, updated.message
    born = dispatcher.admit(Request("CREATE", _binder_update(sent, labels)))
    assert not born.allowed and "runai-gpu-group" in born.message, born.message


# The other schedulers write their keys on tenants' pods from their own service accounts
# (HAMi charts/hami/templates/_helpers.tpl, Volcano installer/helm/chart/volcano/templates/scheduler.yaml).
SCHEDULER_WRITES = [
    ("hami.io/vgpu-node", "system:serviceaccount:kube-system:hami-scheduler"),
    ("volcano.sh/vgpu-node", "system:serviceaccount:volcano-system:volcano-scheduler"),
]


@pytest.mark.parametrize(("key", "scheduler"), SCHEDULER_WRITES)
def test_a_scheduler_writes_its_keys_and_a_tenant_cannot(
    dispatcher: Dispatcher, key: str, scheduler: str
) -> None:
    before = in_namespace(ORDINARY, copy.deepcopy(KAI_FRACTION))
    before["metadata"]["annotations"] = {}
    gpu = {"name": "main", "image": "x", "resources": {"limits": {"nvidia.com/gpu": "1"}}}
    before["spec"] = {"containers": [gpu]}
    after = copy.deepcopy(before)
    after["metadata"]["annotations"] = {key: "gpu-node-1"}
    assert dispatcher.admit(Request("UPDATE", after, before, username=scheduler)).allowed
    forged = dispatcher.admit(Request("UPDATE", after, before))
    assert not forged.allowed and key in forged.message, forged.message
