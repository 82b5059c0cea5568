"""NVIDIA_VISIBLE_DEVICES=void: the direct patch agrees with the mutator, the fast path with the full one,
`none` becomes `void` where no GPU is given, and only claims on GPU devices keep a container's value."""

from __future__ import annotations

import copy
import json
from typing import Any

import jsonpatch
import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st

from tests.dra.objects import claim, device_class, request, template
from tests.support.policies import sharing_policy
from webhook.accounting.needs import PodNeeds
from webhook.accounting.target import pod_target
from webhook.dra.index import DraIndex, build_index
from webhook.mutation import void
from webhook.mutation.context import MutationContext
from webhook.review import is_gpu_pod

VISIBLE = "NVIDIA_VISIBLE_DEVICES"
RESOURCES = st.sampled_from(
    [
        {},
        {"limits": {"cpu": "1"}},
        {"limits": {"nvidia.com/gpu": "1"}},
        {"limits": {"nvidia.com/mig-1g.10gb": "1"}},
        {"requests": {"nvidia.com/gpu.shared": "1"}},
        {"claims": [{"name": "gpu"}]},
        "not a mapping",
    ]
)
ENV = st.sampled_from(
    [
        None,
        [],
        [{"name": "HOME", "value": "/h"}],
        [{"name": VISIBLE, "value": "all"}],
        [{"name": VISIBLE, "value": "none"}],
        [{"name": VISIBLE, "value": "void"}, {"name": VISIBLE, "value": " none"}],
        [{"name": VISIBLE, "value": "none"}, {"name": VISIBLE, "value": "void"}],
        [{"name": VISIBLE, "valueFrom": {"configMapKeyRef": {"name": "c", "key": "k"}}}],
        "not a list",
    ]
)
CONTAINER = st.one_of(
    st.fixed_dictionaries({"name": st.sampled_from(["a", "b"]), "resources": RESOURCES, "env": ENV}).map(
        lambda c: {k: v for k, v in c.items() if v is not None}
    ),
    st.just("not a container"),
)
EXCLUSIVE = sharing_policy("sharing: {mode: exclusive}")
ANNOTATIONS = st.sampled_from([{}, {"gpu-fraction": "0.5"}, {"gpu-memory": "4Gi"}, {"app": "x"}])


@st.composite
def pods(draw: st.DrawFn) -> dict[str, Any]:
    spec: dict[str, Any] = {"containers": draw(st.lists(CONTAINER, min_size=1, max_size=3))}
    for field in ("initContainers", "ephemeralContainers"):
        if draw(st.booleans()):
            spec[field] = draw(st.lists(CONTAINER, max_size=2))
    metadata = {"name": "p", "annotations": draw(ANNOTATIONS)}
    # Through JSON, as a review arrives: drawn values may share one list, decoded ones never do.
    decoded: dict[str, Any] = json.loads(json.dumps({"kind": "Pod", "metadata": metadata, "spec": spec}))
    return decoded


@given(pods())
def test_the_fast_path_voids_what_the_full_check_voids(pod: dict[str, Any]) -> None:
    target = pod_target(pod)
    assert target is not None
    if not is_gpu_pod(target, ()):
        assert void.void_patch(pod, gpu_pod=False) == void.void_patch(pod)


@given(pods())
def test_the_direct_patch_does_what_the_mutator_does(pod: dict[str, Any]) -> None:
    target = pod_target(copy.deepcopy(pod))
    assert target is not None
    void.void_devices(target, MutationContext(EXCLUSIVE, PodNeeds(), "exclusive"))
    patched = jsonpatch.apply_patch(pod, void.void_patch(pod))
    assert patched == target.pod


@given(pods())
def test_a_second_pass_changes_nothing(pod: dict[str, Any]) -> None:
    """Reinvocation (reinvocationPolicy IfNeeded) sees the patched pod: it must be a fixed point."""
    patched = jsonpatch.apply_patch(pod, void.void_patch(pod))
    assert void.void_patch(patched) == []
    assert all(_effective(c) in (None, "void") for c in _voided_containers(pod, patched))


def _voided_containers(before: dict[str, Any], after: dict[str, Any]) -> list[dict[str, Any]]:
    return [
        container
        for field in void.ALL_LISTS
        for old, container in zip(before["spec"].get(field, []), after["spec"].get(field, []), strict=True)
        if old != container
    ]


def _effective(container: dict[str, Any]) -> str | None:
    """The value the kubelet gives the container: the last entry of the name wins."""
    values = [e.get("value") for e in container["env"] if isinstance(e, dict) and e.get("name") == VISIBLE]
    return values[-1] if values else None


# NVIDIA/nvidia-container-toolkit internal/config/image/cuda_image.go devicesFromEnvvars (split on
# commas, TrimSpace, empty parts dropped; none left or any `void` is void) and devices.go
# NewVisibleDevices (the first `all` or `none` decides).
READINGS = [
    ("void", "void"),
    ("", "void"),
    (" , ,", "void"),
    ("none,void", "void"),
    ("0,void", "void"),
    (" void ", "void"),
    ("none", "none"),
    (" none\t", "none"),
    ("0,none", "none"),
    ("none,all", "none"),
    ("all", "all"),
    ("all,none", "all"),
    ("0", "devices"),
    ("GPU-0f3c,1", "devices"),
    ("NONE", "devices"),
    ("\u3000none", "devices"),  # an ideographic space: Go trims it, this reading keeps it (never less)
]


@pytest.mark.parametrize(("value", "read"), READINGS)
def test_a_value_reads_as_the_toolkit_reads_it(value: str, read: str) -> None:
    assert void.reading(value) == read


def _pod(*env: dict[str, Any], limits: dict[str, str] | None = None) -> dict[str, Any]:
    container: dict[str, Any] = {"name": "c", "env": list(env)}
    if limits:
        container["resources"] = {"limits": limits}
    return {"kind": "Pod", "metadata": {"name": "p"}, "spec": {"containers": [container]}}


def _visible(value: str) -> dict[str, Any]:
    return {"name": VISIBLE, "value": value}


ENV_PATH = "/spec/containers/0/env"
# (case, env, the patch for a container without GPUs): `none` and what reads as it become `void`
# in place, the effective (last) entry only; void values stay; anything else is the rules' to judge.
ENV_CASES: list[tuple[str, list[dict[str, Any]], list[dict[str, Any]]]] = [
    ("HAMi's none", [_visible("none")], [{"op": "replace", "path": f"{ENV_PATH}/0/value", "value": "void"}]),
    ("none after void, as HAMi appends it after ours", [_visible("void"), _visible("none")],
     [{"op": "replace", "path": f"{ENV_PATH}/1/value", "value": "void"}]),
    ("void after none: the last wins", [_visible("none"), _visible("void")], []),
    ("none with spaces", [{"name": "HOME", "value": "/h"}, _visible(" none ")],
     [{"op": "replace", "path": f"{ENV_PATH}/1/value", "value": "void"}]),
    ("a list the toolkit reads as none", [_visible("0,none")],
     [{"op": "replace", "path": f"{ENV_PATH}/0/value", "value": "void"}]),
    ("void", [_visible("void")], []),
    ("empty", [_visible("")], []),
    ("no value at all", [{"name": VISIBLE}], []),
    ("none,void", [_visible("none,void")], []),
    ("all: denied by /validate, not hidden", [_visible("all")], []),
    ("valueFrom: judged by /validate", [{"name": VISIBLE, "valueFrom": {"secretKeyRef": {"name": "s"}}}], []),
    ("features from env, no variable", [{"name": "NVIDIA_NVSWITCH", "value": "enabled"}],
     [{"op": "add", "path": f"{ENV_PATH}/-", "value": {"name": VISIBLE, "value": "void"}}]),
]  # fmt: skip


@pytest.mark.parametrize(("env", "patch"), [pytest.param(e, p, id=n) for n, e, p in ENV_CASES])
def test_a_container_without_gpus_asks_for_nothing(env: list[dict[str, Any]], patch: list[Any]) -> None:
    pod = _pod(*env)
    assert void.void_patch(pod) == patch
    assert void.void_patch(pod, gpu_pod=False) == patch


def test_a_gpu_container_keeps_none() -> None:
    """HAMi writes `none` only where it gives no GPU; a GPU container's value is the device plugin's."""
    assert void.void_patch(_pod(_visible("none"), limits={"nvidia.com/gpu": "1"})) == []


def _classes() -> list[dict[str, Any]]:
    # NVIDIA/k8s-dra-driver-gpu deployments/helm/.../deviceclass-*.yaml, as tests/dra/data/imex has them.
    with open("tests/dra/data/imex/device-classes.yaml") as f:
        imex = [d for d in yaml.safe_load_all(f) if d]
    return [*imex, device_class("nic.example.com", 'device.driver == "nic.example.com"')]


def _index() -> DraIndex:
    nic = request("nic", "nic.example.com")
    channel = request("channel", "compute-domain-default-channel.nvidia.com")
    alternatives = [
        {"name": "nic", "deviceClassName": "nic.example.com"},
        {"name": "gpu", "deviceClassName": "gpu.nvidia.com"},
    ]
    either = {"name": "any", "firstAvailable": alternatives}
    objects = {
        "deviceclasses": _classes(),
        "resourceclaims": [
            claim("gpu"),
            claim("nic", nic),
            claim("both", request("gpu"), nic),
            claim("either", either),
        ],
        "resourceclaimtemplates": [template("channel", channel)],
    }
    return build_index(objects, synced=True)


ENTRIES = [
    {"name": "gpu", "resourceClaimName": "gpu"},
    {"name": "nic", "resourceClaimName": "nic"},
    {"name": "both", "resourceClaimName": "both"},
    {"name": "either", "resourceClaimName": "either"},
    {"name": "channel", "resourceClaimTemplateName": "channel"},
    {"name": "missing", "resourceClaimName": "not-yet"},
]
# (case, the container's resources.claims, voided): only a claim that resolves to no GPU device
# voids; one that cannot be resolved keeps today's reading (a GPU: /validate's DRA checks judge it).
CLAIM_CASES = [
    ("a GPU claim", [{"name": "gpu"}], False),
    ("a NIC claim", [{"name": "nic"}], True),
    ("an IMEX channel claim", [{"name": "channel"}], True),
    ("a NIC and a GPU claim", [{"name": "nic"}, {"name": "gpu"}], False),
    ("a claim with a GPU request and a NIC request", [{"name": "both"}], False),
    ("only the NIC request of it", [{"name": "both", "request": "nic"}], True),
    ("only the GPU request of it", [{"name": "both", "request": "gpu"}], False),
    ("firstAvailable with a GPU alternative", [{"name": "either"}], False),
    ("a claim not known yet", [{"name": "missing"}], False),
    ("a name the pod does not hold", [{"name": "elsewhere"}], False),
]


@pytest.mark.parametrize(("claims", "voided"), [pytest.param(c, v, id=n) for n, c, v in CLAIM_CASES])
def test_only_claims_on_gpu_devices_keep_a_container_from_void(claims: list[Any], voided: bool) -> None:
    pod = _pod()
    pod["spec"]["containers"][0]["resources"] = {"claims": claims}
    pod["spec"]["resourceClaims"] = ENTRIES
    for gpu_pod in (True, False):
        found = void.void_patch(pod, gpu_pod=gpu_pod, claims=void.claim_gpus(pod, _index(), "team-a"))
        assert bool(found) is voided
        # Without a DRA snapshot every claim may be a GPU, as before.
        assert void.void_patch(pod, gpu_pod=gpu_pod, claims=void.claim_gpus(pod, None, "team-a")) == []


def test_the_mutator_reads_the_claims_from_its_context() -> None:
    pod = _pod()
    pod["spec"]["containers"][0]["resources"] = {"claims": [{"name": "nic"}]}
    pod["spec"]["resourceClaims"] = ENTRIES
    target = pod_target(pod)
    assert target is not None
    context = MutationContext(EXCLUSIVE, PodNeeds(), "exclusive", dra=_index(), namespace="team-a")
    assert void.void_devices(target, context)
    assert target.pod["spec"]["containers"][0]["env"] == [{"name": VISIBLE, "value": "void"}]


def test_a_container_that_gets_no_gpu_is_voided_and_one_that_does_is_not() -> None:
    pod = {
        "kind": "Pod",
        "metadata": {"name": "p"},
        "spec": {
            "containers": [
                {"name": "app", "resources": {"limits": {"nvidia.com/gpu": "1"}}},
                {"name": "side", "env": [{"name": "HOME", "value": "/h"}]},
            ]
        },
    }
    assert void.void_patch(pod) == [
        {"op": "add", "path": "/spec/containers/1/env/-", "value": {"name": VISIBLE, "value": "void"}}
    ]
