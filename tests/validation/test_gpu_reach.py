"""Every route to a node's GPUs that does not go through a GPU request, tried as an attacker would.

Each case goes through the installed webhook configurations (manifests/base), rules, selectors
and CEL matchConditions included, as kube-apiserver dispatches them: /mutate first with its
patch applied, then /validate, answered by review() with the policies `make run` serves. The
legitimate pods of the GPU stack must pass with their patch applied.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator
from dataclasses import replace
from typing import Any

import pytest

from tests.dra.objects import claim, device_class, request
from tests.dra.test_no_wrong_denials import CHANNELS, CLASSES, documents
from tests.support.dispatch import Admission, Dispatcher, Request, installed, installed_with_bundle
from tests.support.policies import bundled_policies, sharing_policy
from webhook.inventory import Inventory
from webhook.offline import offline_deps
from webhook.review import ReviewDeps

GPU = {"nvidia.com/gpu": "1"}
CAPABILITIES = "NVIDIA_DRIVER_CAPABILITIES"
VISIBLE = "NVIDIA_VISIBLE_DEVICES"


@pytest.fixture(scope="module")
def dispatcher() -> Iterator[Dispatcher]:
    with installed_with_bundle() as dispatcher:
        yield dispatcher


def container(name: str = "main", limits: dict[str, str] | None = None, **extra: Any) -> dict[str, Any]:
    found: dict[str, Any] = {"name": name, "image": "registry.example.com/app:1", **extra}
    if limits:
        found["resources"] = {"limits": dict(limits)}
    return found


def pod(
    *containers: dict[str, Any],
    namespace: str = "team-a",
    annotations: Any = None,
    labels: Any = None,
    **spec: Any,
) -> Any:
    metadata: dict[str, Any] = {"name": "p", "namespace": namespace}
    if annotations:
        metadata["annotations"] = annotations
    if labels:
        metadata["labels"] = labels
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": metadata,
        "spec": {"containers": list(containers) or [container()], **spec},
    }


def host_path(path: str, mount: str = "/host", **volume: Any) -> Any:
    return pod(
        container(volumeMounts=[{"name": "h", "mountPath": mount}]),
        volumes=[{"name": "h", "hostPath": {"path": path, **volume}}],
    )


def capability(name: str, where: str = "containers") -> Any:
    context: dict[str, Any] = {"capabilities": {"add": [name]}}
    if where == "containers":
        return pod(container(securityContext=context))
    extra: dict[str, Any] = {where: [container("extra", securityContext=context)]}
    return pod(container(), **extra)


def env(name: str, value: str | None = None, *, gpu: bool = False, **entry: Any) -> Any:
    item: dict[str, Any] = {"name": name, **({"value": value} if value is not None else {}), **entry}
    return pod(container(limits=GPU if gpu else None, env=[item]))


def native_sidecar_gpus() -> Any:
    sidecar = container("helper", {"nvidia.com/gpu": "8"}, restartPolicy="Always")
    return pod(container("main", {"nvidia.com/gpu": "8"}), initContainers=[sidecar])


def workload(kind: str, template_spec: dict[str, Any]) -> tuple[str, Any]:
    template = {"metadata": {"labels": {"app": "x"}}, "spec": template_spec}
    if kind == "PodTemplate":
        return "podtemplates", {
            "apiVersion": "v1",
            "kind": "PodTemplate",
            "metadata": {"name": "t", "namespace": "team-a"},
            "template": template,
        }
    return "replicationcontrollers", {
        "apiVersion": "v1",
        "kind": "ReplicationController",
        "metadata": {"name": "rc", "namespace": "team-a"},
        "spec": {"replicas": 1, "selector": {"app": "x"}, "template": template},
    }


PRIVILEGED = container(securityContext={"privileged": True})
CLAIM = {"name": "gpus", "resourceClaimTemplateName": "eight-gpus"}

# (what the attacker tries, the pod or (resource, object), a phrase the denial must contain)
ESCAPES: list[tuple[str, Any, str]] = [
    ("privileged, no GPU, preset nodeName", pod(PRIVILEGED, nodeName="gpu-node-1"), "is privileged"),
    ("hostPID, no GPU, preset nodeName", pod(hostPID=True, nodeName="gpu-node-1"), "spec.hostPID"),
    ("hostIPC", pod(hostIPC=True), "spec.hostIPC"),
    ("hostNetwork", pod(hostNetwork=True), "spec.hostNetwork"),
    ("preset nodeName alone", pod(nodeName="gpu-node-1"), "bypasses the scheduler"),
    ("/dev/null under the device-list root", host_path("/dev/null", "/var/run/nvidia-container-devices/all"),
     "device requests"),
    ("an emptyDir under the device-list root",
     pod(container(volumeMounts=[{"name": "e", "mountPath": "/run/nvidia-container-devices/GPU-0"}]),
         volumes=[{"name": "e", "emptyDir": {}}]), "device requests"),
    ("the device-list root spelled with //", pod(
        container(volumeMounts=[{"name": "e", "mountPath": "/var/run//nvidia-container-devices//all/"}]),
        volumes=[{"name": "e", "emptyDir": {}}]), "device requests"),
    ("kubelet device-plugin socket", host_path("/var/lib/kubelet/device-plugins"), "not on the allowed list"),
    ("kubelet pod-resources socket", host_path("/var/lib/kubelet/pod-resources"), "allowed list"),
    ("containerd socket", host_path("/run/containerd/containerd.sock"), "allowed list"),
    ("CRI-O socket", host_path("/var/run/crio/crio.sock"), "allowed list"),
    ("containerd configuration", host_path("/etc/containerd"), "allowed list"),
    ("the toolkit's configuration", host_path("/etc/nvidia-container-runtime"), "allowed list"),
    ("the toolkit's install", host_path("/usr/local/nvidia/toolkit"), "allowed list"),
    ("/sys", host_path("/sys"), "allowed list"),
    ("/dev/char", host_path("/dev/char"), "allowed list"),
    ("a /dev/char link to a GPU", host_path("/dev/char/195:0"), "allowed list"),
    ("/dev/char/195:255, nvidiactl", host_path("/dev/char/195:255"), "allowed list"),
    ("the driver root", host_path("/run/nvidia/driver"), "allowed list"),
    ("a relative path", host_path("dev/nvidia0"), "not an absolute path"),
    ("a .. segment", host_path("/var/log/../../dev"), "'..'"),
    ("double slashes", host_path("//dev//nvidia0"), "allowed list"),
    ("a trailing slash", host_path("/dev/"), "allowed list"),
    ("the root", host_path("/"), "allowed list"),
    ("SYS_MODULE", capability("SYS_MODULE"), "SYS_MODULE"),
    ("SYS_RAWIO", capability("sys_rawio"), "sys_rawio"),
    ("BPF with a CAP_ prefix", capability("CAP_BPF"), "CAP_BPF"),
    ("PERFMON", capability("PERFMON"), "PERFMON"),
    ("DAC_READ_SEARCH", capability("DAC_READ_SEARCH"), "DAC_READ_SEARCH"),
    ("SYS_PTRACE", capability("SYS_PTRACE"), "SYS_PTRACE"),
    ("ALL in mixed case", capability("All"), "All"),
    ("cap_all", capability("cap_all"), "cap_all"),
    ("SYS_ADMIN in an init container", capability("SYS_ADMIN", "initContainers"), "SYS_ADMIN"),
    ("NVIDIA_VISIBLE_DEVICES=all, no GPU", env(VISIBLE, "all"), "sets NVIDIA_VISIBLE_DEVICES;"),
    ("NVIDIA_VISIBLE_DEVICES=0 in a GPU pod", env(VISIBLE, "0", gpu=True), "sets NVIDIA_VISIBLE_DEVICES;"),
    ("IMEX channels", env("NVIDIA_IMEX_CHANNELS", "all"), "NVIDIA_IMEX_CHANNELS"),
    ("MOFED", env("NVIDIA_MOFED", "enabled"), "NVIDIA_MOFED"),
    ("NVSwitch", env("NVIDIA_NVSWITCH", "enabled"), "NVIDIA_NVSWITCH"),
    ("GDS", env("NVIDIA_GDS", "enabled"), "NVIDIA_GDS"),
    ("GDRCopy", env("NVIDIA_GDRCOPY", "enabled"), "NVIDIA_GDRCOPY"),
    # NVIDIA/nvidia-container-toolkit internal/discover/mofed.go, nvswitch.go: the node's, not the GPUs'.
    ("MOFED on a GPU container", env("NVIDIA_MOFED", "enabled", gpu=True), "NVIDIA_MOFED"),
    ("NVSwitch on a GPU container", env("NVIDIA_NVSWITCH", "enabled", gpu=True), "NVIDIA_NVSWITCH"),
    ("IMEX channels on a GPU container", env("NVIDIA_IMEX_CHANNELS", "0", gpu=True), "NVIDIA_IMEX_CHANNELS"),
    ("GDRCopy from a ConfigMap on a GPU container",
     env("NVIDIA_GDRCOPY", gpu=True, valueFrom={"configMapKeyRef": {"name": "c", "key": "k"}}), "valueFrom"),
    ("GDS in the sidecar of a GPU pod", pod(container(limits=GPU), container("side", env=[
        {"name": "NVIDIA_GDS", "value": "enabled"}])), "container <side> sets NVIDIA_GDS"),
    ("MIG monitor devices", env("NVIDIA_MIG_MONITOR_DEVICES", "all"), "NVIDIA_MIG_MONITOR_DEVICES"),
    ("MIG config devices", env("NVIDIA_MIG_CONFIG_DEVICES", "all"), "NVIDIA_MIG_CONFIG_DEVICES"),
    ("a device variable from a Secret",
     env("NVIDIA_VISIBLE_DEVICES", valueFrom={"secretKeyRef": {"name": "s", "key": "k"}}), "valueFrom"),
    ("envFrom with prefix NVIDIA_",
     pod(container(envFrom=[{"prefix": "NVIDIA_", "configMapRef": {"name": "c"}}])), "prefix NVIDIA_"),
    ("envFrom with prefix N", pod(container(envFrom=[{"prefix": "N", "secretRef": {"name": "s"}}])),
     "prefix N"),
    ("envFrom without prefix in a GPU container",
     pod(container(limits=GPU, envFrom=[{"configMapRef": {"name": "c"}}])), "gets GPUs and takes envFrom"),
    # ROCm/container-toolkit reads AMD_VISIBLE_DEVICES, as NVIDIA's toolkit reads its variables.
    ("envFrom without prefix in an AMD GPU container",
     pod(container(limits={"amd.com/gpu": "1"}, envFrom=[{"configMapRef": {"name": "c"}}])),
     "gets GPUs and takes envFrom"),
    ("envFrom without prefix in an Intel GPU container",
     pod(container(limits={"gpu.intel.com/i915": "1"}, envFrom=[{"secretRef": {"name": "s"}}])),
     "gets GPUs and takes envFrom"),
    ("driver capabilities all", env(CAPABILITIES, "all", gpu=True), "with a capability outside"),
    ("a DRA claim and privileged", pod(
        container(securityContext={"privileged": True}, resources={"claims": [{"name": "gpus"}]}),
        resourceClaims=[CLAIM]), "is privileged"),
    ("16 GPUs, 8 of them in a native sidecar", native_sidecar_gpus(), "asks for 16 GPUs"),
    ("9 MIG slices", pod(container(limits={"nvidia.com/mig-1g.10gb": "9"})), "asks for 9 GPUs"),
    ("10 GPUs spelled 1e1", pod(container(limits={"nvidia.com/gpu": "1e1"})), "asks for 10 GPUs"),
    ("9 GPUs spelled 9000m", pod(container(limits={"nvidia.com/gpu": "9000m"})), "asks for 9 GPUs"),
    ("a count that cannot be read", pod(container(limits={"nvidia.com/gpu": "lots"})), "lots"),
    ("KAI fraction on 9 devices",
     pod(annotations={"gpu-fraction": "0.5", "gpu-fraction-num-devices": "9"}, schedulerName="kai-scheduler"),
     "asks for 9 GPUs"),
    ("CDI annotation", pod(annotations={"cdi.k8s.io/gpu": "nvidia.com/gpu=all"}), "CDI"),
    ("vendor CDI annotation", pod(annotations={"nvidia.cdi.k8s.io/all": "nvidia.com/gpu=all"}), "CDI"),
    ("a privileged ReplicationController", workload("ReplicationController", {"containers": [PRIVILEGED]}),
     "is privileged"),
    ("a PodTemplate with a host path", workload("PodTemplate", {
        "containers": [container()], "volumes": [{"name": "h", "hostPath": {"path": "/dev"}}]}),
     "allowed list"),
    ("a field of the wrong type", pod(container(securityContext={"privileged": "true"})),
     "must be a boolean"),
    ("hostPID as a string", pod(hostPID="true"), "must be a boolean"),
    ("a MIG slice where GPUs are time-sliced",
     pod(container(limits={"nvidia.com/mig-1g.10gb": "1"}), namespace="example-timeslice"), "the MIG slice"),
    ("KAI's fraction where MIG shares GPUs",
     pod(annotations={"gpu-fraction": "0.5"}, namespace="example-mig", schedulerName="kai-scheduler"),
     "a KAI GPU fraction"),
    ("a time-sliced GPU where MIG shares GPUs",
     pod(container(limits={"nvidia.com/gpu.shared": "1"}), namespace="example-mig"),
     "the shared GPU resource"),
    ("KAI's ConfigMap of another pod",
     pod(annotations={"gpu-fraction": "0.5", "runai/shared-gpu-configmap": "victim-x7k2m9q-shared-gpu"},
         schedulerName="kai-scheduler"), "runai/shared-gpu-configmap belongs to the GPU scheduler"),
    ("KAI's GPU group label", pod(container(limits=GPU), labels={"runai-gpu-group": "g1"}),
     "label runai-gpu-group"),
]  # fmt: skip


@pytest.mark.parametrize(("subject", "message"), [pytest.param(o, m, id=n) for n, o, m in ESCAPES])
def test_every_escape_route_is_denied(dispatcher: Dispatcher, subject: Any, message: str) -> None:
    resource, obj = subject if isinstance(subject, tuple) else ("pods", subject)
    outcome = dispatcher.admit(Request("CREATE", obj, resource=resource))
    assert not outcome.allowed, outcome
    assert message in outcome.message, outcome.message


def kai_fraction_pod() -> Any:
    """A fractional pod exactly as KAI's own admission webhook leaves it."""
    prefix = "train-x7k2m9q-shared-gpu"
    source = {"configMapKeyRef": {"name": f"{prefix}-0", "key": "NVIDIA_VISIBLE_DEVICES"}}
    main = container(
        "main",
        env=[
            {"name": "NVIDIA_VISIBLE_DEVICES", "valueFrom": source},
            {
                "name": "RUNAI_NUM_OF_GPUS",
                "valueFrom": {"configMapKeyRef": {"name": f"{prefix}-0", "key": "RUNAI_NUM_OF_GPUS"}},
            },
            {
                "name": "GPU_PORTION",
                "valueFrom": {"configMapKeyRef": {"name": f"{prefix}-0", "key": "GPU_PORTION"}},
            },
        ],
        envFrom=[{"configMapRef": {"name": f"{prefix}-0-evar", "optional": False}}],
        volumeMounts=[{"name": f"{prefix}-0-vol", "mountPath": "/etc/runai.d"}],
    )
    found = pod(
        main,
        annotations={"gpu-fraction": "0.5", "runai/shared-gpu-configmap": prefix},
        schedulerName="kai-scheduler",
        volumes=[{"name": f"{prefix}-0-vol", "configMap": {"name": f"{prefix}-0"}}],
    )
    # KAI names the ConfigMaps after the pod's first owner (gpusharingconfigmap/config_map.go).
    owner = {"apiVersion": "batch/v1", "kind": "Job", "name": "train", "uid": "0f3c", "controller": True}
    found["metadata"]["ownerReferences"] = [owner]
    return found


def operator_pod(name: str, **spec: Any) -> Any:
    found = pod(**spec, namespace="gpu-operator")
    found["metadata"]["name"] = name
    return found


DEVICE_PLUGIN = container(
    "nvidia-device-plugin",
    env=[
        {"name": "NVIDIA_VISIBLE_DEVICES", "value": "all"},
        {"name": "NVIDIA_DRIVER_CAPABILITIES", "value": "all"},
    ],
    securityContext={"privileged": True},
    volumeMounts=[{"name": "device-plugin", "mountPath": "/var/lib/kubelet/device-plugins"}],
)

LEGITIMATE: list[tuple[str, Any, bool]] = [
    ("a KAI fraction as KAI's webhook leaves it", kai_fraction_pod(), True),
    ("NVIDIA_VISIBLE_DEVICES=void", env("NVIDIA_VISIBLE_DEVICES", "void"), True),
    ("NVIDIA_VISIBLE_DEVICES=none", env("NVIDIA_VISIBLE_DEVICES", "none"), True),
    ("NVENC's capabilities", env("NVIDIA_DRIVER_CAPABILITIES", "compute,utility,video", gpu=True), True),
    ("istio-init", capability("NET_ADMIN"), True),
    ("NET_RAW", capability("NET_RAW"), True),
    ("RDMA's IPC_LOCK", capability("IPC_LOCK"), True),
    ("envFrom without a prefix, no GPU", pod(container(envFrom=[{"configMapRef": {"name": "c"}}])), True),
    ("a GPU pod", pod(container(limits=GPU)), True),
    # NVIDIA/nvidia-container-toolkit internal/discover/gdrcopy.go, gds.go: the container's own GPU memory.
    ("a DeepSeek wide-EP worker: 8 GPUs with GDRCopy", pod(container(limits={"nvidia.com/gpu": "8"}, env=[
        {"name": "NVIDIA_GDRCOPY", "value": "enabled"}])), True),
    ("GDS on a GPU container", env("NVIDIA_GDS", "enabled", gpu=True), True),
    ("8 GPUs", pod(container(limits={"nvidia.com/gpu": "8"})), True),
    ("the GPU Operator's device plugin", operator_pod("nvidia-device-plugin-x", containers=[DEVICE_PLUGIN],
        volumes=[{"name": "device-plugin", "hostPath": {"path": "/var/lib/kubelet/device-plugins"}}]), False),
    ("dcgm-exporter", operator_pod("nvidia-dcgm-exporter-x",
        containers=[container("dcgm", volumeMounts=[{"name": "r", "mountPath": "/run/nvidia"}])],
        volumes=[{"name": "r", "hostPath": {"path": "/run/nvidia"}}]), False),
    ("the MPS control daemon", operator_pod("nvidia-device-plugin-mps-control-daemon-x", hostPID=True,
        containers=[container("mps", securityContext={"privileged": True})]), False),
    ("a validator with a CDI annotation", operator_pod("nvidia-cuda-validator-x",
        annotations={"nvidia.cdi.k8s.io/x": "nvidia.com/gpu=all"}), False),
]  # fmt: skip


@pytest.mark.parametrize(("obj", "reviewed"), [pytest.param(o, r, id=n) for n, o, r in LEGITIMATE])
def test_legitimate_pods_are_admitted(dispatcher: Dispatcher, obj: Any, reviewed: bool) -> None:
    outcome = dispatcher.admit(Request("CREATE", obj))
    assert outcome.allowed, outcome.message
    assert bool(outcome.called) is reviewed, outcome.called


def test_a_mirror_pod_from_its_node_is_left_alone(dispatcher: Dispatcher) -> None:
    mirror = pod(PRIVILEGED, annotations={"kubernetes.io/config.mirror": "abc"}, hostNetwork=True)
    node = Request(
        "CREATE", mirror, username="system:node:n1", groups=("system:nodes", "system:authenticated")
    )
    assert dispatcher.admit(node).allowed
    forged = Request("CREATE", mirror)  # the same annotation from anyone else counts for nothing
    assert not dispatcher.admit(forged).allowed


def void_env(outcome: Admission, field: str = "containers") -> list[Any]:
    assert outcome.object is not None
    return [c.get("env") for c in outcome.object["spec"][field]]


def test_a_cpu_pod_gets_void_devices_on_every_container(dispatcher: Dispatcher) -> None:
    cuda = pod(
        container("app", image="nvcr.io/nvidia/cuda:12.4.0-base-ubuntu22.04"),
        container("side", env=[{"name": "HOME", "value": "/h"}]),
        initContainers=[container("setup")],
    )
    outcome = dispatcher.admit(Request("CREATE", cuda))
    assert outcome.allowed
    void = {"name": "NVIDIA_VISIBLE_DEVICES", "value": "void"}
    assert void_env(outcome) == [[void], [{"name": "HOME", "value": "/h"}, void]]
    assert void_env(outcome, "initContainers") == [[void]]


def test_only_containers_without_gpus_get_void_devices(dispatcher: Dispatcher) -> None:
    mixed = pod(container("train", limits=GPU), container("cuda-sidecar", image="nvcr.io/nvidia/cuda:12"))
    outcome = dispatcher.admit(Request("CREATE", mixed))
    assert outcome.allowed
    assert void_env(outcome) == [None, [{"name": "NVIDIA_VISIBLE_DEVICES", "value": "void"}]]
    kai = dispatcher.admit(Request("CREATE", kai_fraction_pod()))
    assert kai.object is not None
    assert [e["name"] for e in kai.object["spec"]["containers"][0]["env"]].count(
        "NVIDIA_VISIBLE_DEVICES"
    ) == 1


def test_a_debug_container_gets_void_devices_and_the_rules(dispatcher: Dispatcher) -> None:
    running = pod(container())
    debugged = copy.deepcopy(running)
    debugged["spec"]["ephemeralContainers"] = [{"name": "debugger", "image": "nvcr.io/nvidia/cuda:12"}]
    outcome = dispatcher.admit(Request("UPDATE", debugged, running, sub_resource="ephemeralcontainers"))
    assert outcome.allowed
    assert void_env(outcome, "ephemeralContainers") == [[{"name": "NVIDIA_VISIBLE_DEVICES", "value": "void"}]]
    privileged = copy.deepcopy(running)
    privileged["spec"]["ephemeralContainers"] = [
        {"name": "d", "image": "x", "securityContext": {"privileged": True}}
    ]
    assert not dispatcher.admit(
        Request("UPDATE", privileged, running, sub_resource="ephemeralcontainers")
    ).allowed


def test_a_value_the_pod_sets_itself_is_kept_for_the_rules_to_judge(dispatcher: Dispatcher) -> None:
    outcome = dispatcher.admit(Request("CREATE", env("NVIDIA_VISIBLE_DEVICES", "")))
    assert outcome.allowed
    assert void_env(outcome) == [[{"name": "NVIDIA_VISIBLE_DEVICES", "value": ""}]]


NONE = {"name": VISIBLE, "value": "none"}
VOID = {"name": VISIBLE, "value": "void"}
# Unprefixed envFrom: allowed in a container without GPUs, and free to hold feature variables.
FEATURES = [{"configMapRef": {"name": "fabric"}}, {"secretRef": {"name": "imex"}}]


def hami_pod() -> Any:
    """As HAMi's webhook leaves a pod with overwriteEnv: `none` appended to every container it gives
    no GPU (Project-HAMi/HAMi pkg/device/nvidia/device.go MutateAdmission)."""
    gpu = container("train", {"nvidia.com/gpu": "1", "nvidia.com/gpumem": "4000"})
    return pod(gpu, container("sidecar", env=[NONE], envFrom=FEATURES), schedulerName="hami-scheduler")


# (case, pod): `none` keeps the toolkit's feature-gated modifiers alive, so NVIDIA_NVSWITCH,
# NVIDIA_GDS, NVIDIA_MOFED, NVIDIA_GDRCOPY from envFrom or the image, and NVIDIA_IMEX_CHANNELS, still
# add devices (NVIDIA/nvidia-container-toolkit internal/modifier/gated.go, cdi.go, devices.go;
# cmd/nvidia-container-runtime-hook/container_config.go). Each must end with `void` in effect.
NONE_ROUTES: list[tuple[str, Any]] = [
    ("none, features from an unprefixed envFrom", pod(container(env=[NONE], envFrom=FEATURES))),
    ("none after void: HAMi's webhook after ours, then our reinvocation", pod(container(env=[VOID, NONE]))),
    ("none with spaces", pod(container(env=[{"name": VISIBLE, "value": " none "}]))),
    ("none in an init container", pod(container(), initContainers=[container("setup", env=[NONE])])),
    ("HAMi's sidecar", hami_pod()),
]  # fmt: skip


def effective(entries: Any) -> Any:
    """The kubelet's reading of a container's env: the last entry of a name wins."""
    values = [e.get("value") for e in entries or [] if e.get("name") == VISIBLE]
    return values[-1] if values else None


@pytest.mark.parametrize("obj", [pytest.param(o, id=n) for n, o in NONE_ROUTES])
def test_none_on_a_container_without_gpus_becomes_void(dispatcher: Dispatcher, obj: Any) -> None:
    outcome = dispatcher.admit(Request("CREATE", obj))
    assert outcome.allowed, outcome.message
    assert outcome.object is not None
    spec = outcome.object["spec"]
    for field in ("containers", "initContainers"):
        for found in spec.get(field, []):
            gets_gpu = "resources" in found
            assert effective(found.get("env")) == (None if gets_gpu else "void"), found["name"]
    again = dispatcher.admit(Request("CREATE", outcome.object))  # a reinvocation changes nothing
    assert again.allowed and again.object == outcome.object


def test_hami_keeps_its_gpu_container_as_it_was(dispatcher: Dispatcher) -> None:
    original = hami_pod()
    outcome = dispatcher.admit(Request("CREATE", original))
    assert outcome.allowed and outcome.object is not None
    assert outcome.object["spec"]["containers"][0] == original["spec"]["containers"][0]
    assert outcome.object["spec"]["schedulerName"] == "hami-scheduler"


def test_the_exempt_namespaces_cannot_be_created_by_just_anyone(dispatcher: Dispatcher) -> None:
    namespace = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "gpu-operator"}}
    denied = dispatcher.admit(Request("CREATE", namespace, resource="namespaces"))
    assert not denied.allowed and "only administrators may create it" in denied.message
    admin = Request("CREATE", namespace, resource="namespaces", groups=("system:masters",))
    assert dispatcher.admit(admin).allowed


@pytest.mark.parametrize(
    ("key", "where", "scheduler"),
    [
        ("hami.io/vgpu-node", "annotations", "system:serviceaccount:kube-system:hami-scheduler"),
        ("volcano.sh/gpu-index", "annotations", "system:serviceaccount:volcano-system:volcano-scheduler"),
        ("runai-gpu-group", "labels", "system:serviceaccount:kai-scheduler:binder"),
    ],
)
def test_a_pod_update_cannot_forge_what_the_scheduler_writes(
    dispatcher: Dispatcher, key: str, where: str, scheduler: str
) -> None:
    before = pod(container(limits=GPU))
    after = copy.deepcopy(before)
    after["metadata"][where] = {key: "gpu-node-7"}
    outcome = dispatcher.admit(Request("UPDATE", after, old_object=before))
    assert not outcome.allowed and key in outcome.message
    assert dispatcher.admit(Request("UPDATE", after, old_object=before, username=scheduler)).allowed


def test_a_pod_update_that_changes_nothing_reviewed_is_never_sent(dispatcher: Dispatcher) -> None:
    before = pod(container(limits=GPU), nodeName="gpu-node-1")
    after = copy.deepcopy(before)
    after["spec"]["activeDeadlineSeconds"] = 60
    outcome = dispatcher.admit(Request("UPDATE", after, old_object=before))
    assert outcome.allowed and outcome.called == []


NIC_CLASS = device_class("nic.example.com", 'device.driver == "nic.example.com"')
DRA_INVENTORY = Inventory(
    "dra",
    (
        *CLASSES,
        NIC_CLASS,
        *CHANNELS,
        claim("gpu"),
        claim("nic", request("nic", "nic.example.com")),
        claim("gpu-and-nic", request("gpu"), request("nic", "nic.example.com")),
    ),
)


@pytest.fixture(scope="module")
def dra_dispatcher() -> Iterator[Dispatcher]:
    with installed(offline_deps(bundled_policies(), DRA_INVENTORY)) as dispatcher:
        yield dispatcher


def claiming(*entries: tuple[str, str, str | None]) -> Any:
    """One container per (container, claim, request): each names a pod claim on ResourceClaim `claim`."""
    names = sorted({c for _, c, _ in entries})
    containers = [
        container(name, resources={"claims": [{"name": c, **({"request": r} if r else {})}]})
        for name, c, r in entries
    ]
    return pod(*containers, resourceClaims=[{"name": n, "resourceClaimName": n} for n in names])


IMEX_POD = next(d for d in documents("channel-injection.yaml") if d["kind"] == "Pod")
# (case, pod, the effective NVIDIA_VISIBLE_DEVICES of each container): a claim on another driver's
# class gives no GPU, so its container is voided; NVIDIA's DRA driver's own CDI specs set `void` too
# (NVIDIA/k8s-dra-driver-gpu cmd/compute-domain-kubelet-plugin/cdi.go), so it never conflicts.
DRA_ROUTES: list[tuple[str, Any, list[str | None]]] = [
    ("a container with only a NIC claim", claiming(("main", "nic", None)), ["void"]),
    ("an IMEX channel, NVIDIA's demo", {**IMEX_POD, "metadata": {"name": "imex", "namespace": "default"}},
     ["void"]),
    ("a GPU claim beside a NIC sidecar", claiming(("train", "gpu", None), ("net", "nic", None)),
     [None, "void"]),
    ("the NIC request of a GPU-and-NIC claim", claiming(("net", "gpu-and-nic", "nic")), ["void"]),
    ("the whole GPU-and-NIC claim", claiming(("train", "gpu-and-nic", None)), [None]),
]  # fmt: skip


@pytest.mark.parametrize(("obj", "expected"), [pytest.param(o, e, id=n) for n, o, e in DRA_ROUTES])
def test_only_gpu_claims_keep_a_container_from_void(
    dra_dispatcher: Dispatcher, obj: Any, expected: list[str | None]
) -> None:
    outcome = dra_dispatcher.admit(Request("CREATE", obj))
    assert outcome.allowed, outcome.message
    assert [effective(e) for e in void_env(outcome)] == expected
    again = dra_dispatcher.admit(Request("CREATE", outcome.object))
    assert again.object == outcome.object


def with_env(obj: Any, *entries: dict[str, Any]) -> Any:
    found = copy.deepcopy(obj)
    for item in found["spec"]["containers"]:
        item["env"] = list(entries)
    return found


GDRCOPY = {"name": "NVIDIA_GDRCOPY", "value": "enabled"}
# (case, pod, allowed): GDRCopy on a container only if its claims resolve to GPU devices.
DRA_FEATURES = [
    ("GDRCopy on a GPU claim", with_env(claiming(("train", "gpu", None)), GDRCOPY), True),
    ("GDRCopy on a NIC claim", with_env(claiming(("net", "nic", None)), GDRCOPY), False),
    ("GDRCopy on the NIC request of a GPU-and-NIC claim",
     with_env(claiming(("net", "gpu-and-nic", "nic")), GDRCOPY), False),
]  # fmt: skip


@pytest.mark.parametrize(("obj", "allowed"), [pytest.param(o, a, id=n) for n, o, a in DRA_FEATURES])
def test_gpu_features_need_a_gpu_claim(dra_dispatcher: Dispatcher, obj: Any, allowed: bool) -> None:
    outcome = dra_dispatcher.admit(Request("CREATE", obj))
    assert outcome.allowed is allowed, outcome.message
    assert allowed or "sets NVIDIA_GDRCOPY" in outcome.message


# Subresources that change what the rules guard. kube-apiserver keeps the labels and annotations a
# pods/status update sends and resets its spec (kubernetes/kubernetes pkg/registry/core/pod/
# strategy.go, podStatusStrategy.PrepareForUpdate), copies a Binding's annotations onto the pod
# (pkg/registry/core/pod/storage/storage.go, setPodHostAndAnnotations), and lets namespaces/status
# change a namespace's labels (pkg/registry/core/namespace/strategy.go).
HAMI_SCHEDULER = "system:serviceaccount:kube-system:hami-scheduler"


def status_update(before: Any, **metadata: Any) -> Request:
    after = copy.deepcopy(before)
    after["status"] = {"phase": "Running"}
    for where, values in metadata.items():
        after["metadata"].setdefault(where, {}).update(values)
    return Request("UPDATE", after, old_object=before, sub_resource="status")


def binding(annotations: dict[str, str] | None, username: str = "alice") -> Request:
    metadata: dict[str, Any] = {"name": "p", "namespace": "team-a"}
    if annotations is not None:
        metadata["annotations"] = annotations
    obj = {
        "apiVersion": "v1",
        "kind": "Binding",
        "metadata": metadata,
        "target": {"kind": "Node", "name": "n1"},
    }
    return Request("CREATE", obj, sub_resource="binding", username=username)


@pytest.mark.parametrize("limits", [GPU, None], ids=["gpu-pod", "cpu-pod"])
def test_a_status_update_cannot_forge_what_the_scheduler_writes(
    dispatcher: Dispatcher, limits: dict[str, str] | None
) -> None:
    before = pod(container(limits=limits))
    forged = status_update(before, annotations={"hami.io/vgpu-node": "gpu-node-7"})
    outcome = dispatcher.admit(forged)
    assert not outcome.allowed and "hami.io/vgpu-node" in outcome.message
    by_scheduler = Request(**{**forged.__dict__, "username": HAMI_SCHEDULER})
    assert dispatcher.admit(by_scheduler).allowed


def test_a_status_update_cannot_add_cdi_annotations(dispatcher: Dispatcher) -> None:
    before = pod(container())
    outcome = dispatcher.admit(status_update(before, annotations={"cdi.k8s.io/gpu": "nvidia.com/gpu=all"}))
    assert not outcome.allowed and "CDI" in outcome.message


def test_the_kubelets_status_updates_are_never_sent(dispatcher: Dispatcher) -> None:
    outcome = dispatcher.admit(status_update(pod(container(limits=GPU))))
    assert outcome.allowed and outcome.called == []


@pytest.mark.parametrize(
    ("annotations", "username", "refused"),
    [
        ({"hami.io/vgpu-node": "gpu-node-7"}, "alice", "hami.io/vgpu-node"),
        ({"hami.io/vgpu-node": "gpu-node-7"}, HAMI_SCHEDULER, None),
        ({"cdi.k8s.io/gpu": "nvidia.com/gpu=all"}, HAMI_SCHEDULER, "CDI"),
        ({"gpu-fraction": "0.5"}, "alice", "pods/binding changes KAI's GPU ask gpu-fraction"),
        ({"example.com/note": "x"}, "alice", None),
    ],
)
def test_a_binding_is_judged_by_the_annotations_it_writes(
    dispatcher: Dispatcher, annotations: dict[str, str], username: str, refused: str | None
) -> None:
    outcome = dispatcher.admit(binding(annotations, username))
    assert outcome.called == ["gpu-pods.validate.gpuwebhook.io", "advisory.validate.gpuwebhook.io"]
    assert outcome.allowed is (refused is None), outcome.message
    assert refused is None or refused in outcome.message


@pytest.mark.parametrize("annotations", [None, {}])
def test_a_binding_without_annotations_is_never_sent(dispatcher: Dispatcher, annotations: Any) -> None:
    outcome = dispatcher.admit(binding(annotations, "system:kube-scheduler"))
    assert outcome.allowed and outcome.called == []


def namespace(labels: dict[str, str]) -> Any:
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team-a", "labels": labels}}


@pytest.mark.parametrize(
    "label", ["gpuwebhook.io/ignore", "gpuwebhook.io/dra-admin-access", "resource.kubernetes.io/admin-access"]
)
@pytest.mark.parametrize("sub", ["", "status", "finalize"])
def test_only_administrators_set_the_exemption_and_admin_access_labels(
    dispatcher: Dispatcher, label: str, sub: str
) -> None:
    before, after = namespace({"team": "a"}), namespace({"team": "a", label: "true"})
    update = Request("UPDATE", after, old_object=before, resource="namespaces", sub_resource=sub)
    denied = dispatcher.admit(update)
    assert not denied.allowed and f"the {label} label" in denied.message
    assert dispatcher.admit(Request(**{**update.__dict__, "groups": ("system:masters",)})).allowed
    unchanged = Request("UPDATE", after, old_object=after, resource="namespaces", sub_resource=sub)
    assert dispatcher.admit(unchanged).called == []


# A running pod's GPUs cannot change (kube-apiserver refuses resource changes on UPDATE:
# pkg/apis/core/validation ValidatePodUpdate), so a label that brings it under another sharing
# policy is no reason to refuse the label.
SLICED = {"gpu": "sliced"}


@pytest.fixture(scope="module")
def mig_dispatcher() -> Iterator[Dispatcher]:
    mig = sharing_policy(
        "match: {namespaces: [team-a], podSelector: {matchLabels: {gpu: sliced}}}\n"
        "sharing: {mode: mig, gpuModel: A100-40GB}",
        "team-a-mig",
    )
    with installed(ReviewDeps(policies=replace(bundled_policies(), sharing=(mig,)))) as found:
        yield found


@pytest.mark.parametrize("sub", ["", "status"])
def test_a_label_on_a_running_whole_gpu_pod_is_not_judged_by_a_sharing_policy(
    mig_dispatcher: Dispatcher, sub: str
) -> None:
    before = pod(container(limits=GPU))
    after = copy.deepcopy(before)
    after["metadata"]["labels"] = dict(SLICED)
    outcome = mig_dispatcher.admit(Request("UPDATE", after, old_object=before, sub_resource=sub))
    assert outcome.called and outcome.allowed, outcome.message
    # The same pod created with the label is still shared as the policy says.
    created = mig_dispatcher.admit(Request("CREATE", after))
    assert created.allowed and created.object is not None
    assert "nvidia.com/gpu" not in created.object["spec"]["containers"][0]["resources"]["limits"]


@pytest.mark.parametrize("sub", ["", "status"])
@pytest.mark.parametrize("limits", [GPU, None], ids=["whole-gpu-pod", "cpu-pod-that-would-escape-quota"])
def test_a_kai_fraction_added_to_a_running_pod_is_refused(
    mig_dispatcher: Dispatcher, sub: str, limits: dict[str, str] | None
) -> None:
    before = pod(container(limits=limits))
    after = copy.deepcopy(before)
    after["metadata"]["annotations"] = {"gpu-fraction": "0.5"}
    outcome = mig_dispatcher.admit(Request("UPDATE", after, old_object=before, sub_resource=sub))
    assert not outcome.allowed and "KAI's GPU ask gpu-fraction" in outcome.message
