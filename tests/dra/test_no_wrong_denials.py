"""No wrong DRA denials, and no way around the rules either: a pod's own mode dra templates before
the cache has them, NVIDIA's IMEX/ComputeDomain demos applied in one go, claims that do not exist
yet, and the ResourceClaims kube-scheduler makes for extended resources a DeviceClass serves.
Every case goes through review(), offline, against an inventory standing for the cache."""

from __future__ import annotations

import copy
import shutil
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.dra.objects import WHOLE_DRA_FILE, request, template
from tests.support.policies import BUNDLED_POLICIES
from tests.support.schema import assert_valid
from webhook.accounting.target import pod_target
from webhook.decision import Decision
from webhook.dra import templates
from webhook.inventory import EMPTY, Inventory
from webhook.offline import Identity, offline_deps, request_for, run
from webhook.policy.loader import load_directory
from webhook.policy.model import PolicySet
from webhook.review import CLASS_RULE, CLASS_RULE_FINGERPRINT, ReviewDeps, review
from webhook.validation import dra
from webhook.validation.prechecks import fingerprint

DATA = Path(__file__).parent / "data" / "imex"
SCHEDULER = "system:kube-scheduler"
# Beside the repository's policies: the docs' restriction of a namespace to whole GPUs, the same
# as advice elsewhere, a GPU quota, and a mode dra policy for the team-* namespaces.
EXTRA = """\
apiVersion: constraints.gatekeeper.sh/v1beta1
kind: GpuDraDeviceClasses
metadata: {name: notebooks-whole-gpus-only}
spec:
  match:
    namespaces: [notebooks]
    kinds: [{apiGroups: [resource.k8s.io], kinds: [ResourceClaim, ResourceClaimTemplate]}]
  parameters:
    allowedClasses: [gpu.nvidia.com]
---
apiVersion: constraints.gatekeeper.sh/v1beta1
kind: GpuDraDeviceClasses
metadata: {name: advised-whole-gpus}
spec:
  enforcementAction: warn
  match:
    namespaces: [advised]
    kinds: [{apiGroups: [resource.k8s.io], kinds: [ResourceClaim, ResourceClaimTemplate]}]
  parameters:
    allowedClasses: [gpu.nvidia.com]
---
apiVersion: gpuwebhook.io/v1alpha1
kind: GPUQuota
metadata: {name: counted}
spec:
  match: {namespaces: [counted, team-a]}
  limits: {gpus: 1}
---
"""


@pytest.fixture(scope="module")
def chosen(tmp_path_factory: pytest.TempPathFactory) -> PolicySet:
    root = tmp_path_factory.mktemp("policies") / "policies"
    shutil.copytree(BUNDLED_POLICIES, root)
    (root / "extra.yaml").write_text(EXTRA + WHOLE_DRA_FILE)
    return load_directory(root)


def documents(name: str) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all((DATA / name).read_text()) if d]


CLASSES = documents("device-classes.yaml")
SLICES = documents("compute-domain-slice.yaml")
CHANNELS = documents("controller-templates.yaml")
IMEX_TEST1 = documents("imex-test1.yaml")


def deps_for(chosen: PolicySet, *objects: dict[str, Any], slices: bool = True) -> ReviewDeps:
    """The cache holds these objects, and has listed every DRA kind: what is absent is known absent.
    The node's compute-domain plugin publishes its channels unless `slices` is False."""
    published = SLICES if slices else []
    return offline_deps(chosen, Inventory("test", (*CLASSES, *published, *objects)))


def admit(deps: ReviewDeps, obj: dict[str, Any], username: str = "alice") -> Decision:
    """What the apiserver gets: /mutate, the patch applied, then /validate of the result."""
    outcome = run(request_for(obj, namespace=None, identity=Identity(username)), deps)
    verdict = outcome.validation if outcome.validation is not None else outcome.mutation
    return Decision(
        allowed=outcome.allowed,
        message=verdict.message,
        warnings=outcome.warnings,
        findings=verdict.findings,
        gpus=verdict.gpus,
    )


def validate(deps: ReviewDeps, obj: dict[str, Any], username: str = "alice") -> Decision:
    return review(request_for(obj, namespace=None, identity=Identity(username)), "validate", deps)


def kind(docs: list[dict[str, Any]], wanted: str) -> list[dict[str, Any]]:
    return [d for d in docs if d["kind"] == wanted]


def pod_of(pod_template: dict[str, Any], name: str, namespace: str = "default") -> dict[str, Any]:
    """The pod a controller makes from a pod template (MPIJob replicas, Deployments)."""
    made = copy.deepcopy(pod_template)
    made["metadata"] = {**made.get("metadata", {}), "name": name, "namespace": namespace}
    return {"apiVersion": "v1", "kind": "Pod", **made}


def mpi_worker(path: str) -> dict[str, Any]:
    (job,) = kind(documents(path), "MPIJob")
    return pod_of(job["spec"]["mpiReplicaSpecs"]["Worker"]["template"], f"{job['metadata']['name']}-worker-0")


def plain_pod(
    namespace: str, *, claims: tuple[str, ...] = (), limits: dict[str, str] | None = None
) -> dict[str, Any]:
    container: dict[str, Any] = {"name": "ctr", "image": "registry.example.com/cuda:12", "resources": {}}
    if claims:
        container["resources"]["claims"] = [{"name": c} for c in claims]
    if limits:
        container["resources"]["limits"] = dict(limits)
    spec: dict[str, Any] = {"containers": [container]}
    if claims:
        spec["resourceClaims"] = [{"name": c, "resourceClaimTemplateName": c} for c in claims]
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p", "namespace": namespace},
        "spec": spec,
    }


def deployment_of(pod: dict[str, Any]) -> dict[str, Any]:
    namespace = pod["metadata"]["namespace"]
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "d", "namespace": namespace},
        "spec": {
            "selector": {"matchLabels": {"app": "d"}},
            "template": {"metadata": {"labels": {"app": "d"}}, "spec": pod["spec"]},
        },
    }


def privileged(pod: dict[str, Any]) -> dict[str, Any]:
    made = copy.deepcopy(pod)
    made["spec"]["containers"][0]["securityContext"] = {"privileged": True}
    return made


def messages(decision: Decision) -> str:
    return "\n".join([decision.message, *decision.warnings])


# --- A pod's own mode dra templates, before the cache has them --------------------------------

WHOLE = "whole"  # tests/dra/objects.py WHOLE_DRA: team-* namespaces, maxGpusPerPod 2


def policy_template(chosen: PolicySet, count: int) -> str:
    (policy,) = [p for p in chosen.sharing if p.name == WHOLE]
    return templates.template_name(policy, templates.Shape(count))


def rewritten(chosen: PolicySet, namespace: str, count: int) -> dict[str, Any]:
    """A pod as /mutate leaves it under the policy: a claim on the policy's template."""
    made = plain_pod(namespace)
    made["spec"]["containers"][0]["resources"] = {"claims": [{"name": "gpu-ctr"}]}
    name = policy_template(chosen, count)
    made["spec"]["resourceClaims"] = [{"name": "gpu-ctr", "resourceClaimTemplateName": name}]
    return made


@pytest.mark.parametrize(
    ("case", "namespace", "gpus", "allowed", "counted"),
    [
        ("one GPU, counted from the policy", "team-b", 1, True, 1),
        ("two GPUs, counted from the policy", "team-b", 2, True, 2),
        ("the quota counts what the policy's template will give", "team-a", 2, False, None),
    ],
)
def test_a_pod_under_mode_dra_is_counted_from_its_policy_before_the_cache_has_the_template(
    chosen: PolicySet, case: str, namespace: str, gpus: int, allowed: bool, counted: int | None
) -> None:
    deps = deps_for(chosen)  # no template at all, and templates are listed
    asked = plain_pod(namespace, limits={"nvidia.com/gpu": str(gpus)})
    for decision in (admit(deps, asked), validate(deps, rewritten(chosen, namespace, gpus))):
        assert decision.allowed is allowed, (case, messages(decision))
        if counted is not None:
            assert decision.gpus == counted, case
            assert "does not exist" not in messages(decision)
        else:
            assert 'GPU quota "counted" exceeded' in decision.message, decision.message


def test_the_cache_wins_over_what_the_policy_expects(chosen: PolicySet) -> None:
    """A template someone else made under the policy's name is what pods get: counted as it is, and
    not the policy's own, so the sharing rule refuses pods pointed at it."""
    squatted = template(policy_template(chosen, 1), request(count=8), namespace="team-b")
    decision = validate(deps_for(chosen, squatted), rewritten(chosen, "team-b", 1))
    assert not decision.allowed
    assert "gpu-builtin/sharing-enforced" in decision.message


def test_the_policys_templates_are_remembered_per_policy(chosen: PolicySet) -> None:
    (policy,) = [p for p in chosen.sharing if p.name == WHOLE]
    assert templates.expected_devices(policy) is templates.expected_devices(policy)
    assert set(templates.expected_devices(policy)) == {policy_template(chosen, n) for n in (1, 2)}


# --- NVIDIA's IMEX/ComputeDomain demos, applied with one kubectl apply -f ----------------------

DEMO_PODS = [
    # (case, the pod, GPUs it holds once admitted)
    ("demo/specs/imex/channel-injection.yaml", kind(documents("channel-injection.yaml"), "Pod")[0], 0),
    (
        "demo/specs/imex/channel-injection-all.yaml",
        kind(documents("channel-injection-all.yaml"), "Pod")[0],
        0,
    ),
]


@pytest.mark.parametrize(("case", "shown", "gpus"), DEMO_PODS, ids=[c[0] for c in DEMO_PODS])
@pytest.mark.parametrize("cache", ["before the controller's template", "after it"])
def test_the_channel_injection_demos_are_admitted_whatever_the_cache_holds(
    chosen: PolicySet, case: str, shown: dict[str, Any], gpus: int, cache: str
) -> None:
    """k8s-dra-driver-gpu demo/specs/imex: the pod names the channel template the compute-domain
    controller makes from the ComputeDomain sent just before it (cmd/compute-domain-controller)."""
    assert_valid(shown)
    deps = deps_for(chosen) if cache.startswith("before") else deps_for(chosen, *CHANNELS)
    decision = admit(deps, shown)
    assert decision.allowed, decision.message
    assert (decision.gpus or 0) == gpus
    (entry,) = shown["spec"]["resourceClaims"]
    waiting = [w for w in decision.warnings if entry["resourceClaimTemplateName"] in w]
    assert bool(waiting) is cache.startswith("before"), decision.warnings


def test_a_channel_is_no_gpu_before_its_devices_are_published(chosen: PolicySet) -> None:
    """An 8-GPU MPI worker with its channel must stay within gpu-max-per-pod's 8."""
    worker = mpi_worker("nvbandwidth-test-job-1.yaml")
    worker["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] = 8
    decision = admit(deps_for(chosen, *CHANNELS, slices=False), worker)
    assert decision.allowed, decision.message
    assert decision.gpus == 8


def test_the_controllers_channel_templates_are_admitted_and_hold_no_gpu(chosen: PolicySet) -> None:
    """The templates the compute-domain controller creates (templates/compute-domain-workload-claim-
    template.tmpl.yaml): on compute-domain-default-channel.nvidia.com, no GPU class."""
    deps = deps_for(chosen)
    for made in CHANNELS:
        assert_valid(made)
        decision = validate(deps, made, username="system:serviceaccount:nvidia-dra-driver-gpu:compute-domain")
        assert decision.allowed, decision.message
        assert not decision.gpus


def test_mpi_workers_wait_for_the_channel_their_controller_retries(chosen: PolicySet) -> None:
    """demo/specs/imex/nvbandwidth-test-job-1.yaml: the MPIJob's workers ask for 2 GPUs besides the
    channel; mpi-operator creates them and retries a refusal, admitted once the channel exists."""
    worker = mpi_worker("nvbandwidth-test-job-1.yaml")
    assert_valid(worker)
    before = admit(deps_for(chosen), worker)
    assert not before.allowed
    assert "ResourceClaimTemplate default/nvbandwidth-test-compute-domain-1-channel" in before.message
    assert "pods created by a controller are retried automatically" in before.message
    after = admit(deps_for(chosen, *CHANNELS), worker)
    assert after.allowed, after.message
    assert after.gpus == 2


def test_imex_test1_applied_in_one_go(chosen: PolicySet) -> None:
    """demo/specs/quickstart/v1/imex-test1.yaml: claims, a template and the Deployments using them in
    one file. The Deployments are admitted even before the cache shows the claims (their pods are
    judged when made); the pods, made once they exist, hold the template's one GPU."""
    namespace = "imex-test1"
    deployments = kind(IMEX_TEST1, "Deployment")
    before = deps_for(chosen)
    for made in kind(IMEX_TEST1, "ResourceClaim") + kind(IMEX_TEST1, "ResourceClaimTemplate"):
        assert validate(before, made).allowed
    for deployment in deployments:
        decision = validate(before, deployment)
        assert decision.allowed, decision.message
        assert any("does not exist yet" in w for w in decision.warnings), decision.warnings
    after = deps_for(chosen, *kind(IMEX_TEST1, "ResourceClaim"), *kind(IMEX_TEST1, "ResourceClaimTemplate"))
    for deployment in deployments:
        made = pod_of(deployment["spec"]["template"], f"{deployment['metadata']['name']}-abc12", namespace)
        decision = admit(after, made)
        assert decision.allowed, decision.message
        assert decision.gpus == 1
        assert not [w for w in decision.warnings if "does not exist" in w]


# --- Claims that do not exist yet: what the user is told, and no way around the rules ----------

UNSEEN_CASES = [
    # (case, the pod, allowed, words the answer must hold)
    (
        "waits for its only claim: judged when it is created",
        plain_pod("default", claims=("later",)),
        True,
        [
            "gpu-builtin/dra-claims: ResourceClaimTemplate default/later does not exist yet; "
            "judged when created"
        ],
    ),
    (
        "a GPU quota counts pods at admission",
        plain_pod("counted", claims=("later",)),
        False,
        [
            "ResourceClaimTemplate counted/later (pod claim 'later') does not exist yet, and GPU quota "
            "'counted' counts the pod's devices when it is admitted: create it before the pod, or let its "
            "controller create it and retry; pods created by a controller are retried automatically"
        ],
    ),
    (
        "its total with other GPUs is judged at admission",
        plain_pod("default", claims=("later",), limits={"nvidia.com/gpu": "8"}),
        False,
        ["the pod gets 8 other GPU device(s)", "create it before the pod"],
    ),
    (
        "two claims not created yet",
        plain_pod("default", claims=("later", "later-too")),
        False,
        ["it is one of 2 the pod names that do not exist, whose total is judged at admission"],
    ),
    (
        "a claim sidesteps a sharing policy, whatever it turns out to be",
        plain_pod("example-timeslice", claims=("later",)),
        False,
        ["gpu-builtin/sharing-enforced", "ResourceClaimTemplate example-timeslice/later, not created yet"],
    ),
    (
        "the security rules take any claim for GPUs",
        privileged(plain_pod("default", claims=("later",))),
        False,
        ["[gpu-no-privileged-containers]"],
    ),
]


@pytest.mark.parametrize(
    ("case", "shown", "allowed", "words"), UNSEEN_CASES, ids=[c[0] for c in UNSEEN_CASES]
)
def test_a_claim_that_does_not_exist_yet(
    chosen: PolicySet, case: str, shown: dict[str, Any], allowed: bool, words: list[str]
) -> None:
    assert_valid(shown)
    decision = admit(deps_for(chosen), shown)
    assert decision.allowed is allowed, (case, messages(decision))
    for word in words:
        assert word in messages(decision), (case, messages(decision))


@pytest.mark.parametrize(
    ("case", "made", "allowed", "needle"),
    [
        (
            "more than a pod may hold",
            template("later", request(count=9), namespace="default"),
            False,
            "gpu-max-per-pod",
        ),
        (
            "all of a node's GPUs",
            template("later", request(allocationMode="All"), namespace="default"),
            False,
            "All",
        ),
        ("a pod's worth", template("later", request(count=8), namespace="default"), True, None),
    ],
)
def test_the_template_a_pod_waited_for_is_judged_as_a_pod_holding_it(
    chosen: PolicySet, case: str, made: dict[str, Any], allowed: bool, needle: str | None
) -> None:
    """The attack: name a template that does not exist, get admitted, then create it with GPUs. The
    pod waited only because the template is all it gets and no quota counts it; the template's own
    CREATE is judged as that pod would be, and the pod then holds what was judged."""
    waiting = plain_pod("default", claims=("later",))
    assert admit(deps_for(chosen), waiting).allowed
    decision = validate(deps_for(chosen), made)
    assert decision.allowed is allowed, (case, decision.message)
    if needle:
        assert needle in decision.message
    if allowed:
        held = admit(deps_for(chosen, made), waiting)
        assert held.allowed and held.gpus == 8


def test_a_workload_only_warns_its_pods_are_judged_when_made(chosen: PolicySet) -> None:
    pod = plain_pod("counted", claims=("later",))
    deployment = deployment_of(pod)
    assert_valid(deployment)
    decision = validate(deps_for(chosen), deployment)
    assert decision.allowed, decision.message
    assert any("ResourceClaimTemplate counted/later" in w for w in decision.warnings)
    assert not admit(deps_for(chosen), pod).allowed


def test_an_update_never_refuses_for_a_claim_gone_since(chosen: PolicySet) -> None:
    """A pod's claims are fixed at creation, when they were judged: an update brings nothing new."""
    pod = plain_pod("counted", claims=("later",))
    asked = {**request_for(pod, namespace=None, identity=Identity()), "operation": "UPDATE", "oldObject": pod}
    changed = copy.deepcopy(pod)
    changed["metadata"]["labels"] = {"team": "x"}
    decision = review({**asked, "object": changed}, "validate", deps_for(chosen))  # type: ignore[typeddict-item]
    assert decision.allowed, decision.message


def test_before_templates_are_listed_nothing_is_said(chosen: PolicySet) -> None:
    """Until the cache has listed them, a template not found is no fact (not counted, no warning)."""
    deps = offline_deps(chosen, EMPTY)
    decision = admit(deps, plain_pod("counted", claims=("later",)))
    assert decision.allowed
    assert not [w for w in decision.warnings if "does not exist" in w]


# --- Extended resources a DeviceClass serves, and the claims kube-scheduler makes for them ------


def extended_pod(namespace: str, resource: str, kind_: str = "Pod") -> dict[str, Any]:
    made = plain_pod(namespace, limits={resource: "1"})
    return made if kind_ == "Pod" else deployment_of(made)


EXTENDED_CASES = [
    # (case, namespace, resource, kind, allowed, words)
    (
        "a MIG class by its extendedResourceName",
        "notebooks",
        "nvidia.com/mig-1g.12gb",
        "Pod",
        False,
        [
            "[notebooks-whole-gpus-only] Pod p asks for nvidia.com/mig-1g.12gb, which DeviceClass "
            "mig-1g-12gb.gpu.nvidia.com serves: kube-scheduler would claim it for the pod, and "
            "notebooks-whole-gpus-only refuses that claim (ResourceClaim p-extended-resources: device class "
            "mig-1g-12gb.gpu.nvidia.com is not allowed in namespace notebooks (allowed: gpu.nvidia.com))"
        ],
    ),
    (
        "a class by the name Kubernetes gives every class",
        "notebooks",
        "deviceclass.resource.kubernetes.io/mig.nvidia.com",
        "Pod",
        False,
        ["device class mig.nvidia.com is not allowed in namespace notebooks"],
    ),
    (
        "an allowed class by that name",
        "notebooks",
        "deviceclass.resource.kubernetes.io/gpu.nvidia.com",
        "Pod",
        True,
        [],
    ),
    ("nvidia.com/gpu, which gpu.nvidia.com serves", "notebooks", "nvidia.com/gpu", "Pod", True, []),
    ("a namespace without the restriction", "lab", "nvidia.com/mig-1g.12gb", "Pod", True, []),
    (
        "a workload, refused at kubectl apply",
        "notebooks",
        "nvidia.com/mig-1g.12gb",
        "Deployment",
        False,
        ["Deployment d asks for"],
    ),
    (
        "a constraint that only warns",
        "advised",
        "nvidia.com/mig-1g.12gb",
        "Pod",
        True,
        ["advised-whole-gpus: Pod p asks for nvidia.com/mig-1g.12gb"],
    ),
]


@pytest.mark.parametrize(
    ("case", "namespace", "resource", "kind_", "allowed", "words"),
    EXTENDED_CASES,
    ids=[c[0] for c in EXTENDED_CASES],
)
def test_the_class_an_extended_resource_gets_is_judged_when_the_pod_is_admitted(
    chosen: PolicySet,
    case: str,
    namespace: str,
    resource: str,
    kind_: str,
    allowed: bool,
    words: list[str],
) -> None:
    shown = extended_pod(namespace, resource, kind_)
    assert_valid(shown)
    decision = validate(deps_for(chosen), shown)
    assert decision.allowed is allowed, (case, messages(decision))
    for word in words:
        assert word in messages(decision), (case, messages(decision))


def upstream_generated_claim() -> dict[str, Any]:
    """The claim kube-scheduler made for demo/specs/extended-resources/mig-1g-12gb.yaml's pod, as the
    demo's own comment shows it (k8s-dra-driver-gpu), placed in the restricted namespace."""
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {
            "annotations": {"resource.kubernetes.io/extended-resource-claim": "true"},
            "generateName": "mig-1g12gb-pod-extended-resources-",
            "name": "mig-1g12gb-pod-extended-resources-8r9k5",
            "namespace": "notebooks",
            "ownerReferences": [
                {
                    "apiVersion": "v1",
                    "controller": True,
                    "kind": "Pod",
                    "name": "mig-1g12gb-pod",
                    "uid": "6c01cc40-3527-43a9-a241-89c9e7d18921",
                }
            ],
        },
        "spec": {
            "devices": {
                "requests": [
                    {
                        "exactly": {
                            "allocationMode": "ExactCount",
                            "count": 1,
                            "deviceClassName": "mig-1g-12gb.gpu.nvidia.com",
                        },
                        "name": "container-0-request-0",
                    }
                ]
            }
        },
    }


def forged(change: str) -> dict[str, Any]:
    claim = upstream_generated_claim()
    metadata = claim["metadata"]
    if change == "no annotation":
        del metadata["annotations"]
    elif change == "annotation false":
        metadata["annotations"] = {"resource.kubernetes.io/extended-resource-claim": "false"}
    elif change == "owner not a controller":
        metadata["ownerReferences"][0]["controller"] = False
    elif change == "owner not a pod":
        metadata["ownerReferences"][0]["kind"] = "Job"
    elif change == "no owner":
        del metadata["ownerReferences"]
    return claim


GENERATED_CASES = [
    # (case, claim, who creates it, allowed)
    ("kube-scheduler's claim", upstream_generated_claim(), SCHEDULER, True),
    ("the same claim, forged by a user", upstream_generated_claim(), "alice", False),
    (
        "by a controller that is not the scheduler",
        upstream_generated_claim(),
        "system:kube-controller-manager",
        False,
    ),
    ("the scheduler's identity without its annotation", forged("no annotation"), SCHEDULER, False),
    ("the annotation set to false", forged("annotation false"), SCHEDULER, False),
    ("an owner that is not the controller", forged("owner not a controller"), SCHEDULER, False),
    ("an owner that is not a pod", forged("owner not a pod"), SCHEDULER, False),
    ("no owner", forged("no owner"), SCHEDULER, False),
]


@pytest.mark.parametrize(
    ("case", "claim", "username", "allowed"), GENERATED_CASES, ids=[c[0] for c in GENERATED_CASES]
)
def test_only_the_schedulers_own_claim_passes_the_class_restriction(
    chosen: PolicySet, case: str, claim: dict[str, Any], username: str, allowed: bool
) -> None:
    """The pod's admission judged the class already (above); refusing kube-scheduler's claim would
    only leave an admitted pod unbound. The annotation and owner are anyone's to write, so a claim
    that only looks like the scheduler's is judged as any claim: it could be shared by name."""
    assert_valid(claim)
    decision = validate(deps_for(chosen), claim, username=username)
    assert decision.allowed is allowed, (case, decision.message)
    if not allowed:
        assert (
            "device class mig-1g-12gb.gpu.nvidia.com is not allowed in namespace notebooks"
            in decision.message
        )


def test_the_claim_judged_at_admission_is_the_one_the_scheduler_makes(chosen: PolicySet) -> None:
    """demo/specs/extended-resources/mig-1g-12gb.yaml (k8s-dra-driver-gpu): its pod, and the claim the
    demo shows kube-scheduler making for it (k8s.io/api resource/v1 ExtendedResourceClaimAnnotation)."""
    shown = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "namespace": "notebooks",
            "name": "mig-1g12gb-pod",
            "uid": "6c01cc40-3527-43a9-a241-89c9e7d18921",
        },
        "spec": {
            "restartPolicy": "Never",
            "containers": [
                {
                    "name": "cuda-container",
                    "image": "nvcr.io/nvidia/k8s/cuda-sample:vectoradd-cuda12.5.0",
                    "resources": {"limits": {"nvidia.com/mig-1g.12gb": 1}},
                }
            ],
        },
    }
    target = pod_target(shown)
    assert target is not None
    deps = deps_for(chosen)
    assert dra.served_classes(target, deps.dra) == {"mig-1g-12gb.gpu.nvidia.com": ("nvidia.com/mig-1g.12gb",)}
    made = dra.scheduler_claim(target, "notebooks", "mig-1g-12gb.gpu.nvidia.com", ["nvidia.com/mig-1g.12gb"])
    upstream = upstream_generated_claim()
    assert made["spec"] == upstream["spec"]
    assert made["metadata"]["annotations"] == upstream["metadata"]["annotations"]
    assert made["metadata"]["ownerReferences"] == upstream["metadata"]["ownerReferences"]
    assert_valid(made)


def test_the_bundled_class_rule_is_the_one_its_python_reading_models(chosen: PolicySet) -> None:
    """classes_allowed() clears a class without Rego only for this exact template text: an edit to
    policies/security/gpu-dra-device-classes must be matched there and here."""
    engine = chosen.engine
    assert engine is not None
    assert fingerprint(engine.templates[CLASS_RULE]) == CLASS_RULE_FINGERPRINT


PATTERNS = [
    (["*"], "anything.example.com", True),
    (["gpu.nvidia.com"], "gpu.nvidia.com", True),
    (["gpu.nvidia.com"], "mig.nvidia.com", False),
    (["*.gpu.nvidia.com"], "mig-1g-12gb.gpu.nvidia.com", True),
    (["*.gpu.nvidia.com"], "gpu.nvidia.com", False),
    (["gpu.*"], "gpu.nvidia.com", True),
    (["gpu.*"], "vfio.gpu.nvidia.com", False),
    (["*gpu*"], "vfio.gpu.nvidia.com", False),
    ([], "gpu.nvidia.com", False),
    (["mig.nvidia.com", "gpu.nvidia.com"], "gpu.nvidia.com", True),
]


def _one_constraint(root: Path, patterns: list[str]) -> PolicySet:
    shutil.copy(
        BUNDLED_POLICIES / "security" / "gpu-dra-device-classes" / "template.yaml", root / "template.yaml"
    )
    constraint = {
        "apiVersion": "constraints.gatekeeper.sh/v1beta1",
        "kind": CLASS_RULE,
        "metadata": {"name": "patterns"},
        "spec": {
            "match": {"kinds": [{"apiGroups": ["resource.k8s.io"], "kinds": ["ResourceClaim"]}]},
            "parameters": {"allowedClasses": patterns},
        },
    }
    (root / "constraint.yaml").write_text(yaml.safe_dump(constraint))
    return load_directory(root)


@pytest.mark.parametrize(("patterns", "device_class", "allowed"), PATTERNS)
def test_the_python_reading_of_allowed_classes_agrees_with_the_rego(
    tmp_path: Path, patterns: list[str], device_class: str, allowed: bool
) -> None:
    """classes_allowed() stands in for the template's Rego on the common path: both must agree."""
    assert dra.classes_allowed([{"allowedClasses": patterns}], device_class) is allowed
    claim = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": "c", "namespace": "team-c"},
        "spec": {"devices": {"requests": [{"name": "r", "exactly": {"deviceClassName": device_class}}]}},
    }
    decision = validate(deps_for(_one_constraint(tmp_path, patterns)), claim)
    assert decision.allowed is allowed, decision.message
