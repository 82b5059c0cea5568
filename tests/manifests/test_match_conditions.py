"""matchConditions, evaluated with a real CEL implementation against the requests kube-apiserver sends.

kube-apiserver evaluates each condition with `object`, `oldObject` and `request` bound; all must be
true for the webhook to be called, and an evaluation error is handled by the failurePolicy, so an
error here would turn into rejected pods. The CEL interpreter runs in its own process.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.manifests.objects import webhooks_by_name
from tests.support.cel import CelProcess
from webhook import gpu
from webhook.accounting import names
from webhook.manifests import Manifest

GPU_RESOURCES = [
    gpu.GPU,
    gpu.SHARED_GPU,
    gpu.HAMI_MEMORY,
    gpu.HAMI_MEMORY_PERCENT,
    gpu.HAMI_CORES,
    "nvidia.com/mig-1g.10gb",
    "nvidia.com/mig-7g.141gb",
    "nvidia.com/mig-1g.10gb.shared",
    # Every vendor of the catalog (webhook/vendors.py), by exact name and by pattern.
    "amd.com/gpu",
    "amd.com/cpx_nps4",
    "gpu.intel.com/i915",
    "gpu.intel.com/xe",
    "huawei.com/Ascend910B3",
    "huawei.com/Ascend910-2c",
    "huawei.com/Ascend310P-4c.3cpu",
    "cambricon.com/mlu370",
    "volcano.sh/vgpu-number",
    "aliyun.com/gpu-mem",
    "hygon.com/dcunum",
]
OTHER_RESOURCES = [
    "cpu",
    "memory",
    "ephemeral-storage",
    "amd.com/gpux",
    "amd.com/cpx_nps9",
    "gpu.intel.com/i915x",
    "huawei.com/Ascend910-Unhealthy",
    "cambricon.com/mlu.smlu",
    "nvidia.com/gpu-extra",
    "nvidia.com/gpux",
    "example.com/nvidia.com/gpu",
    "NVIDIA.COM/GPU",
    "nvidia.com/mig",
    "hugepages-2Mi",
]
TEMPLATE_PATHS = {
    "deployments": ("apps", ["spec", "template"]),
    "statefulsets": ("apps", ["spec", "template"]),
    "daemonsets": ("apps", ["spec", "template"]),
    "replicasets": ("apps", ["spec", "template"]),
    "jobs": ("batch", ["spec", "template"]),
    "cronjobs": ("batch", ["spec", "jobTemplate", "spec", "template"]),
    "replicationcontrollers": ("", ["spec", "template"]),
    "podtemplates": ("", ["template"]),
}
KINDS = {
    "pods": "Pod",
    "deployments": "Deployment",
    "statefulsets": "StatefulSet",
    "daemonsets": "DaemonSet",
    "replicasets": "ReplicaSet",
    "jobs": "Job",
    "cronjobs": "CronJob",
    "replicationcontrollers": "ReplicationController",
    "podtemplates": "PodTemplate",
}
Conditions = dict[str, list[str]]
GPU_MUTATE = "gpu-pods.mutate.gpuwebhook.io"
NON_GPU_MUTATE = "non-gpu-pods.mutate.gpuwebhook.io"
GPU_PODS = "gpu-pods.validate.gpuwebhook.io"
WORKLOADS = "workloads.validate.gpuwebhook.io"
ADVISORY = "advisory.validate.gpuwebhook.io"


@pytest.fixture(scope="module")
def conditions(rendered: list[Manifest]) -> Conditions:
    return {
        name: [c["expression"] for c in hook.get("matchConditions", [])]
        for name, hook in webhooks_by_name(rendered).items()
    }


def matches(cel: CelProcess, expressions: list[str], **activation: Any) -> bool:
    """What kube-apiserver decides: every condition true. A CEL error fails the test."""
    bound = {"object": None, "oldObject": None, **activation}
    return all(cel.evaluate(expression, bound) for expression in expressions)


def request(
    operation: str = "CREATE", resource: str = "pods", group: str = "", sub: str = ""
) -> dict[str, Any]:
    return {
        "uid": "705ab4f5-6393-11e8-b7cc-42010a800002",
        "kind": {"group": group, "version": "v1", "kind": KINDS[resource]},
        "resource": {"group": group, "version": "v1", "resource": resource},
        "subResource": sub,
        "operation": operation,
        "namespace": "team-a",
        "name": "example",
        "userInfo": {"username": "alice"},
        "dryRun": False,
    }


def container(name: str, limits: dict[str, str] | None = None, requests: dict[str, str] | None = None) -> Any:
    resources = {part: values for part, values in (("limits", limits), ("requests", requests)) if values}
    return {"name": name, "image": "busybox", **({"resources": resources} if resources else {})}


def pod(
    containers: list[Any], init: list[Any] | None = None, annotations: dict[str, str] | None = None
) -> dict[str, Any]:
    spec: dict[str, Any] = {"containers": containers}
    if init is not None:
        spec["initContainers"] = init
    metadata: dict[str, Any] = {"name": "p"}
    if annotations is not None:
        metadata["annotations"] = annotations
    return {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": spec}


def is_gpu_pod(obj: dict[str, Any]) -> bool:
    """The reference: the accelerator model's resource names, or a KAI ask by annotation."""
    spec = obj["spec"]
    resources = [
        name
        for c in spec.get("containers", []) + spec.get("initContainers", [])
        for part in c.get("resources", {}).values()
        for name in part
    ]
    annotations = obj.get("metadata", {}).get("annotations", {})
    claims = bool(spec.get("resourceClaims"))
    return any(map(names.is_accelerator, resources)) or claims or names.asks_kai(annotations)


def claims(entries: list[Any]) -> dict[str, Any]:
    found = pod([container("a")])
    found["spec"]["resourceClaims"] = entries
    return found


def gpu_pod_cases() -> list[tuple[str, dict[str, Any], bool]]:
    cases: list[tuple[str, dict[str, Any], bool]] = []
    for name in GPU_RESOURCES:
        cases += [
            (f"limit {name}", pod([container("a", limits={name: "1"})]), True),
            (f"request {name}", pod([container("a", requests={name: "1"})]), True),
            (f"init {name}", pod([container("a")], init=[container("i", limits={name: "1"})]), True),
            (
                f"second container {name}",
                pod([container("a", limits={"cpu": "1"}), container("b", requests={name: "2"})]),
                True,
            ),
        ]
    for name in OTHER_RESOURCES:
        cases.append((f"only {name}", pod([container("a", limits={name: "1"}, requests={name: "1"})]), False))
    cases += [
        ("KAI fraction", pod([container("a")], annotations={gpu.KAI_FRACTION: "0.5"}), True),
        ("KAI memory", pod([container("a")], annotations={gpu.KAI_MEMORY: "4096"}), True),
        # KAI's binder refuses it, so it must reach the webhook that says so at admission.
        ("KAI devices alone", pod([container("a")], annotations={gpu.KAI_NUM_DEVICES: "2"}), True),
        ("other annotations", pod([container("a")], annotations={"gpu-fraction-container-name": "a"}), False),
        ("empty annotations", pod([container("a")], annotations={}), False),
        ("no resources", pod([container("a")]), False),
        ("empty resources", pod([{"name": "a", "resources": {}}]), False),
        ("empty init list", pod([container("a")], init=[]), False),
        ("init without GPU", pod([container("a")], init=[container("i", limits={"cpu": "1"})]), False),
        ("no containers", {"apiVersion": "v1", "kind": "Pod", "spec": {}}, False),
        ("a DRA claim", claims([{"name": "gpu", "resourceClaimTemplateName": "one-gpu"}]), True),
        ("no DRA claims", claims([]), False),
    ]  # fmt: skip
    return cases


@pytest.mark.parametrize(("case", "obj", "is_gpu"), gpu_pod_cases(), ids=[c[0] for c in gpu_pod_cases()])
def test_only_gpu_pods_reach_the_gpu_webhook_and_every_pod_is_mutated(
    cel: CelProcess, conditions: Conditions, case: str, obj: dict[str, Any], is_gpu: bool
) -> None:
    assert is_gpu_pod(obj) is is_gpu, f"the table disagrees with the reference: {case}"
    assert matches(cel, conditions[GPU_PODS], object=obj, request=request()) is is_gpu, case
    # Every pod is mutated, by exactly one webhook: a container without GPUs gets
    # NVIDIA_VISIBLE_DEVICES=void, and each kind of pod follows its own failurePolicy.
    mutated_as_gpu = matches(cel, conditions[GPU_MUTATE], object=obj, request=request())
    mutated_as_other = matches(cel, conditions[NON_GPU_MUTATE], object=obj, request=request())
    assert (mutated_as_gpu, mutated_as_other) == (is_gpu, not is_gpu), case


@pytest.mark.parametrize(
    ("groups", "annotations", "mutated"),
    [
        (["system:nodes", "system:authenticated"], {"kubernetes.io/config.mirror": "x"}, False),
        (["system:authenticated"], {"kubernetes.io/config.mirror": "x"}, True),
        (["system:nodes"], {}, True),
        ([], None, True),
    ],
)
def test_only_a_nodes_own_mirror_pods_skip_mutation(
    cel: CelProcess, conditions: Conditions, groups: list[str], annotations: Any, mutated: bool
) -> None:
    sent = {**request(), "userInfo": {"username": "system:node:n1", "groups": groups}}
    for obj, webhook in (
        (pod([container("a")], annotations=annotations), NON_GPU_MUTATE),
        (pod([container("a", limits={gpu.GPU: "1"})], annotations=annotations), GPU_MUTATE),
    ):
        assert matches(cel, conditions[webhook], object=obj, request=sent) is mutated, webhook


def _updated(obj: dict[str, Any], change: str) -> dict[str, Any]:
    new = copy.deepcopy(obj)
    if change == "annotation":
        new["metadata"]["annotations"] = {"hami.io/vgpu-node": "n1"}
    elif change == "label":
        new["metadata"]["labels"] = {"runai/queue": "q"}
    elif change == "image":
        new["spec"]["containers"][0]["image"] = "evil/x:1"
    elif change == "init image":
        new["spec"]["initContainers"][0]["image"] = "evil/x:1"
    elif change == "status":
        new["status"] = {"phase": "Running"}
    return new


@pytest.mark.parametrize("gpu_pod", [True, False])
@pytest.mark.parametrize(
    ("change", "sent"),
    [
        ("annotation", True),
        ("label", True),
        ("image", True),
        ("init image", True),
        ("status", False),
        ("", False),
    ],
)
def test_pod_updates_are_reviewed_when_metadata_or_images_change(
    cel: CelProcess, conditions: Conditions, gpu_pod: bool, change: str, sent: bool
) -> None:
    limits = {gpu.GPU: "1"} if gpu_pod else None
    old = pod([container("a", limits=limits)], init=[container("i")], annotations={})
    new = _updated(old, change)
    update = request("UPDATE")
    enforcing = GPU_PODS if gpu_pod else WORKLOADS
    other = WORKLOADS if gpu_pod else GPU_PODS
    assert matches(cel, conditions[enforcing], object=new, oldObject=old, request=update) is sent
    assert not matches(cel, conditions[other], object=new, oldObject=old, request=update)
    assert matches(cel, conditions[ADVISORY], object=new, oldObject=old, request=update) is sent


@pytest.mark.parametrize(("case", "obj", "is_gpu"), gpu_pod_cases(), ids=[c[0] for c in gpu_pod_cases()])
def test_every_pod_gets_exactly_one_enforcing_review(
    cel: CelProcess, conditions: Conditions, case: str, obj: dict[str, Any], is_gpu: bool
) -> None:
    """GPU pods: the fail-closed GPU webhook. Others: the workloads webhook. Never both, never neither."""
    gpu_review = matches(cel, conditions[GPU_PODS], object=obj, request=request())
    workload_review = matches(cel, conditions[WORKLOADS], object=obj, request=request())
    assert (gpu_review, workload_review) == (is_gpu, not is_gpu), case
    assert matches(cel, conditions[ADVISORY], object=obj, request=request())


resource_names = st.one_of(
    st.sampled_from(GPU_RESOURCES + OTHER_RESOURCES),
    st.from_regex(r"\A(nvidia\.com/|example\.com/|amd\.com/|huawei\.com/Ascend)?[a-z0-9][a-z0-9._-]{0,12}\Z"),
)
resource_maps = st.dictionaries(resource_names, st.just("1"), max_size=3)
containers = st.lists(st.tuples(resource_maps, resource_maps), max_size=3)


@settings(max_examples=150, deadline=None)
@given(app=containers.filter(bool), init=st.none() | containers)
def test_the_gpu_condition_agrees_with_the_server(
    cel: CelProcess, conditions: Conditions, app: list[Any], init: list[Any] | None
) -> None:
    """The condition selects a pod exactly when the accelerator model calls one of its resources one."""

    def build(specs: list[Any], prefix: str) -> list[Any]:
        return [container(f"{prefix}{i}", limits=lim, requests=req) for i, (lim, req) in enumerate(specs)]

    obj = pod(build(app, "c"), None if init is None else build(init, "i"))
    asked = [name for lim, req in app + (init or []) for name in (*lim, *req)]
    expected = any(names.is_accelerator(name) for name in asked)
    assert matches(cel, conditions[GPU_PODS], object=obj, request=request()) is expected
    assert matches(cel, conditions[GPU_MUTATE], object=obj, request=request()) is expected
    assert matches(cel, conditions[NON_GPU_MUTATE], object=obj, request=request()) is not expected


def _template_object(resource: str, image: str) -> dict[str, Any]:
    _, path = TEMPLATE_PATHS[resource]
    node: dict[str, Any] = {"spec": {"containers": [{"name": "a", "image": image}]}}
    for key in reversed(path):
        node = {key: node}
    return {"metadata": {"name": "w", "annotations": {"deployment.kubernetes.io/revision": "1"}}, **node}


@pytest.mark.parametrize("resource", sorted(TEMPLATE_PATHS))
@pytest.mark.parametrize("webhook", ["workloads.validate.gpuwebhook.io", "advisory.validate.gpuwebhook.io"])
def test_workloads_are_reviewed_on_create_and_on_template_changes_only(
    cel: CelProcess, conditions: Conditions, webhook: str, resource: str
) -> None:
    group, _ = TEMPLATE_PATHS[resource]
    old, new = _template_object(resource, "app:1"), _template_object(resource, "app:2")
    relabelled = {**old, "metadata": {"name": "w", "annotations": {"deployment.kubernetes.io/revision": "2"}}}
    expressions = conditions[webhook]
    assert matches(cel, expressions, object=new, request=request("CREATE", resource, group))
    assert matches(cel, expressions, object=new, oldObject=old, request=request("UPDATE", resource, group))
    assert not matches(
        cel, expressions, object=relabelled, oldObject=old, request=request("UPDATE", resource, group)
    )


def test_debug_containers_are_reviewed_on_gpu_pods_too(cel: CelProcess, conditions: Conditions) -> None:
    """`kubectl debug` adds an ephemeral container (which could set NVIDIA_VISIBLE_DEVICES) by UPDATE."""
    target = pod([container("a", limits={gpu.GPU: "1"})])
    debugged = {
        **target,
        "spec": {**target["spec"], "ephemeralContainers": [{"name": "debug", "image": "busybox"}]},
    }
    update = request("UPDATE", "pods", sub="ephemeralcontainers")
    assert matches(
        cel, conditions["workloads.validate.gpuwebhook.io"], object=debugged, oldObject=target, request=update
    )
    # The debug container gets no GPU: the non-GPU mutating webhook gives it `void`.
    assert matches(cel, conditions[NON_GPU_MUTATE], object=debugged, oldObject=target, request=update)


def test_every_condition_compiles_and_a_broken_one_would_not(cel: CelProcess, conditions: Conditions) -> None:
    expressions = {expression for group in conditions.values() for expression in group}
    # Distinct texts; shared ones (the mirror pods, pod updates, bindings) count once.
    assert len(expressions) == 9
    for expression in expressions:
        cel.compile(expression)
    with pytest.raises(Exception, match="CELParseError"):
        cel.compile(next(iter(expressions)) + ")")


KUBERNETES_ADMIN = {"resource.kubernetes.io/admin-access": "true"}


def _namespace(labels: dict[str, str] | None) -> dict[str, Any]:
    metadata: dict[str, Any] = {"name": "team-a"}
    if labels is not None:
        metadata["labels"] = labels
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": metadata}


@pytest.mark.parametrize(
    ("new", "old", "sent"),
    [
        ({"gpuwebhook.io/ignore": "true"}, None, True),
        ({"gpuwebhook.io/ignore": "true"}, {}, True),
        ({"team": "a"}, {"gpuwebhook.io/ignore": "true"}, True),
        (None, {"gpuwebhook.io/ignore": "false"}, True),
        ({"team": "a"}, {"team": "b"}, False),
        (None, None, False),
        # An exempted namespace whose other labels change: nothing guarded changes, nothing is sent.
        ({"gpuwebhook.io/ignore": "true", "team": "a"}, {"gpuwebhook.io/ignore": "true"}, False),
        # The admin-access labels, ours and Kubernetes' (k8s.io/api resource/v1/types.go).
        ({"gpuwebhook.io/dra-admin-access": "true"}, None, True),
        ({"resource.kubernetes.io/admin-access": "true"}, {}, True),
        ({}, {"resource.kubernetes.io/admin-access": "true"}, True),
        ({"gpuwebhook.io/dra-admin-access": "false"}, {"gpuwebhook.io/dra-admin-access": "true"}, True),
        (KUBERNETES_ADMIN, KUBERNETES_ADMIN, False),
    ],
)
def test_only_requests_touching_the_ignore_label_reach_the_namespace_guard(
    cel: CelProcess,
    conditions: Conditions,
    new: dict[str, str] | None,
    old: dict[str, str] | None,
    sent: bool,
) -> None:
    operation = "UPDATE" if old is not None else "CREATE"
    activation = {
        "object": _namespace(new),
        "oldObject": _namespace(old) if old is not None else None,
        "request": {
            "operation": operation,
            "resource": {"group": "", "version": "v1", "resource": "namespaces"},
            "subResource": "",
        },
    }
    assert matches(cel, conditions["namespaces.validate.gpuwebhook.io"], **activation) is sent


@pytest.mark.parametrize(
    ("name", "sent"), [("gpu-operator", True), ("kai-scheduler", True), ("team-a", False)]
)
def test_creating_an_exempt_namespace_reaches_the_namespace_guard(
    cel: CelProcess, conditions: Conditions, name: str, sent: bool
) -> None:
    activation = {
        "object": {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}},
        "oldObject": None,
        "request": {
            "operation": "CREATE",
            "resource": {"group": "", "version": "v1", "resource": "namespaces"},
            "subResource": "",
        },
    }
    assert matches(cel, conditions["namespaces.validate.gpuwebhook.io"], **activation) is sent


@pytest.mark.parametrize("webhook", [GPU_PODS, WORKLOADS, GPU_MUTATE, NON_GPU_MUTATE])
def test_the_gpu_pod_conditions_name_the_vendor_catalog(conditions: Conditions, webhook: str) -> None:
    """The configurations carry the catalog's own test (webhook.accounting.names.cel_name_test):
    a name added to the catalog must be added here too, or its pods would skip the GPU webhook."""
    expected = " ".join(names.cel_name_test("name").split())
    assert any(expected in " ".join(expression.split()) for expression in conditions[webhook])


@pytest.mark.parametrize("sub", ["status", "finalize"])
@pytest.mark.parametrize(
    ("new", "old", "sent"),
    [
        ({"gpuwebhook.io/ignore": "true"}, {}, True),
        ({"resource.kubernetes.io/admin-access": "true"}, {"team": "a"}, True),
        ({}, {"gpuwebhook.io/dra-admin-access": "true"}, True),
        # The namespace controller's own status and finalize updates change no label.
        ({"gpuwebhook.io/ignore": "true"}, {"gpuwebhook.io/ignore": "true"}, False),
        ({"team": "a"}, {"team": "a"}, False),
    ],
)
def test_namespace_subresources_that_change_a_guarded_label_reach_the_guard(
    cel: CelProcess, conditions: Conditions, sub: str, new: dict[str, str], old: dict[str, str], sent: bool
) -> None:
    """kubernetes/kubernetes pkg/registry/core/namespace/strategy.go: the status and finalize
    strategies keep the metadata they are sent, so either may change labels."""
    activation = {
        "object": _namespace(new),
        "oldObject": _namespace(old),
        "request": {
            "operation": "UPDATE",
            "resource": {"group": "", "version": "v1", "resource": "namespaces"},
            "subResource": sub,
        },
    }
    assert matches(cel, conditions["namespaces.validate.gpuwebhook.io"], **activation) is sent


def _status_update(obj: dict[str, Any], change: str) -> dict[str, Any]:
    """A pods/status UPDATE as validating webhooks see it: the spec is the stored one
    (kubernetes/kubernetes pkg/registry/core/pod/strategy.go, podStatusStrategy.PrepareForUpdate)."""
    new = copy.deepcopy(obj)
    new["status"] = {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}
    if change == "annotation":
        new["metadata"]["annotations"] = {"hami.io/vgpu-node": "n1"}
    elif change == "label":
        new["metadata"]["labels"] = {"runai-gpu-group": "g"}
    elif change == "KAI fraction":
        new["metadata"]["annotations"] = {gpu.KAI_FRACTION: "0.5"}
    return new


@pytest.mark.parametrize("gpu_pod", [True, False])
@pytest.mark.parametrize(
    ("change", "sent"), [("annotation", True), ("label", True), ("KAI fraction", True), ("", False)]
)
def test_status_updates_are_reviewed_only_when_labels_or_annotations_change(
    cel: CelProcess, conditions: Conditions, gpu_pod: bool, change: str, sent: bool
) -> None:
    """The kubelet updates pods/status all the time and changes no metadata: never sent, since
    these webhooks fail closed. A status update that writes labels or annotations reaches exactly
    one enforcing webhook, chosen by the pod's GPUs as for a pod update."""
    limits = {gpu.GPU: "1"} if gpu_pod else None
    old = pod([container("a", limits=limits)], annotations={})
    new = _status_update(old, change)
    update = request("UPDATE", sub="status")
    enforcing = GPU_PODS if gpu_pod or change == "KAI fraction" else WORKLOADS
    other = WORKLOADS if enforcing == GPU_PODS else GPU_PODS
    assert matches(cel, conditions[enforcing], object=new, oldObject=old, request=update) is sent, change
    assert not matches(cel, conditions[other], object=new, oldObject=old, request=update), change
    assert matches(cel, conditions[ADVISORY], object=new, oldObject=old, request=update) is sent


def _binding(annotations: dict[str, str] | None) -> dict[str, Any]:
    """A v1 Binding as kube-scheduler's default binder sends it, with the annotations it would copy
    onto the pod (pkg/registry/core/pod/storage/storage.go, setPodHostAndAnnotations)."""
    metadata: dict[str, Any] = {"name": "p", "namespace": "team-a", "uid": "1d2e"}
    if annotations is not None:
        metadata["annotations"] = annotations
    target = {"kind": "Node", "name": "n1"}
    return {"apiVersion": "v1", "kind": "Binding", "metadata": metadata, "target": target}


@pytest.mark.parametrize(
    ("annotations", "sent"),
    [
        ({"hami.io/vgpu-node": "n1"}, True),
        ({"cdi.k8s.io/gpu": "nvidia.com/gpu=all"}, True),
        ({gpu.KAI_FRACTION: "0.5"}, True),
        ({}, False),
        (None, False),
    ],
)
def test_only_bindings_that_write_annotations_are_sent_and_to_the_gpu_webhook(
    cel: CelProcess, conditions: Conditions, annotations: dict[str, str] | None, sent: bool
) -> None:
    """kube-scheduler binds every pod: its bindings carry no annotations (kubernetes/kubernetes
    pkg/scheduler/framework/plugins/defaultbinder/default_binder.go) and never reach us. A
    Binding says nothing of the pod's GPUs, so the fail-closed gpu-pods webhook takes them all."""
    binding = {
        **request("CREATE", sub="binding"),
        "kind": {"group": "", "version": "v1", "kind": "Binding"},
    }
    obj = _binding(annotations)
    assert matches(cel, conditions[GPU_PODS], object=obj, request=binding) is sent
    assert matches(cel, conditions[ADVISORY], object=obj, request=binding) is sent
    assert not matches(cel, conditions[WORKLOADS], object=obj, request=binding)
