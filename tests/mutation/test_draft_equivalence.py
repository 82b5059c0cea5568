"""The draft engine against the clone-and-diff engine it replaced (tests/mutation/old_engine).

mutate_object no longer clones the request's object: its mutators write through a
copy-on-write draft and the diff walks only what they wrote (webhook/mutation/draft.py). On
generated GPU pods, for every sharing mode (exclusive, timeslice, mps, mig, hami, kai, dra),
with and without injection and checkpointing, native sidecars or not:
- both engines refuse the same pods with the same message;
- otherwise they give the same object, the same warnings and mode, and the same patch,
  operation for operation; applying it to the submitted object gives that object;
- the submitted object is left as it was, though the result shares its untouched parts;
- mutating the result again gives no patch (idempotence), in both.
"""

from __future__ import annotations

import copy
import re
from typing import Any

import jsonpatch
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.dra.test_mode_rewrite import ALL as DRA_POLICIES
from tests.mutation.old_engine.engine import mutate_object as old_mutate_object
from tests.mutation.test_hints import view
from tests.mutation.test_properties import POLICIES, pods
from tests.mutation.test_reference_equivalence import FULL_POLICIES, PLACEMENTS
from tests.support.policies import sharing_policy
from webhook.capacity import CapacityView
from webhook.errors import AdmissionDenied
from webhook.kubeversion import Version
from webhook.mutation.engine import mutate_object
from webhook.sharing_policy import SharingPolicy

CHECKPOINT = """
checkpoint:
  image: registry.example.com/ckpt:1
  mountPath: /checkpoints
  volume: {emptyDir: {}}
  nativeSidecar: true
"""
DRA_FULL = [
    sharing_policy(
        "sharing: {mode: dra, strategy: MPS, mps: {defaultActiveThreadPercentage: 50}, "
        "driverFeatureGates: {MPSSupport: true}}\n"
        "inject: {tolerations: [{key: nvidia.com/gpu, operator: Exists}]}" + CHECKPOINT,
        name="dra-mps-full",
    ),
    sharing_policy("sharing: {mode: dra}" + CHECKPOINT, name="dra-whole-full"),
]
EVERY_POLICY = [*FULL_POLICIES, *POLICIES, *DRA_POLICIES, *DRA_FULL]
MODES = sorted({p.sharing.mode for p in EVERY_POLICY})
# A mode first, then one of its policies: the examples' many exclusive policies would crowd out the rest.
POLICY = st.sampled_from(MODES).flatmap(
    lambda mode: st.sampled_from([p for p in EVERY_POLICY if p.sharing.mode == mode])
)
VERSIONS: list[Version | None] = [None, (1, 28), (1, 31)]
DEVICES = ["none", "all", "void", " none ,", "0"]
KINDS = {
    "Pod": (),
    "Deployment": ("spec", "template"),
    "CronJob": ("spec", "jobTemplate", "spec", "template"),
}


@st.composite
def gpu_objects(draw: st.DrawFn) -> dict[str, Any]:
    """test_properties' pods, with the parts only some mutators touch: the device variable,
    volumes and mounts, preferred terms, pod claims, ephemeral containers; some in a workload."""
    pod = draw(pods())
    spec = pod["spec"]
    for container in [*spec["containers"], *spec.get("initContainers", [])]:
        if draw(st.integers(0, 2)) == 0:
            value = draw(st.sampled_from(DEVICES))
            container.setdefault("env", []).append({"name": "NVIDIA_VISIBLE_DEVICES", "value": value})
        if draw(st.integers(0, 3)) == 0:
            container["volumeMounts"] = [{"name": "data", "mountPath": "/data"}]
    if draw(st.booleans()):
        spec["volumes"] = [{"name": "data", "emptyDir": {}}]
    if draw(st.integers(0, 3)) == 0:
        preferred = [
            {
                "weight": 10,
                "preference": {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]},
            }
        ]
        spec.setdefault("affinity", {}).setdefault("nodeAffinity", {})[
            "preferredDuringSchedulingIgnoredDuringExecution"
        ] = preferred
    if draw(st.integers(0, 3)) == 0:
        spec["resourceClaims"] = [{"name": "nic", "resourceClaimName": "nic-claim"}]
        spec["containers"][0].setdefault("resources", {})["claims"] = [{"name": "nic"}]
    if draw(st.integers(0, 4)) == 0:
        spec["ephemeralContainers"] = [{"name": "debug", "image": "busybox"}]
    kind = draw(st.sampled_from(sorted(KINDS)))
    if kind == "Pod":
        return pod
    if "ephemeralContainers" in spec:
        del spec["ephemeralContainers"]  # a template has none
    obj: dict[str, Any] = {
        "apiVersion": "apps/v1",
        "kind": kind,
        "metadata": {"name": "w", "namespace": "ns"},
    }
    node = obj
    for key in KINDS[kind][:-1]:
        node = node.setdefault(key, {})
    node[KINDS[kind][-1]] = {"metadata": pod["metadata"], "spec": spec}
    return obj


def _outcome(engine: Any, obj: dict[str, Any], **options: Any) -> Any:
    try:
        result = engine(obj, **options)
    except AdmissionDenied as e:
        return str(e)
    return result


def _assert_same(obj: dict[str, Any], **options: Any) -> Any:
    submitted = copy.deepcopy(obj)
    old = _outcome(old_mutate_object, copy.deepcopy(obj), **options)
    new = _outcome(mutate_object, obj, **options)
    assert obj == submitted  # the request's own object is never edited
    if isinstance(old, str):
        assert new == old
        return None
    assert not isinstance(new, str), new
    assert new.object == old.object
    assert list(new.patch) == list(old.patch)
    assert (new.warnings, new.mode) == (old.warnings, old.mode)
    assert jsonpatch.apply_patch(obj, list(new.patch)) == old.object
    return new


EQUIVALENCE = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@EQUIVALENCE
@given(
    obj=gpu_objects(),
    policy=POLICY,
    placement=st.sampled_from(PLACEMENTS),
    version=st.sampled_from(VERSIONS),
)
def test_the_draft_engine_gives_the_clone_and_diff_engines_patch(
    obj: dict[str, Any], policy: SharingPolicy, placement: CapacityView | None, version: Version | None
) -> None:
    options = {"policy": policy, "placement": placement, "kubernetes_version": version}
    result = _assert_same(obj, **options)
    if result is not None:
        again = _assert_same(result.object, **options)
        assert again is not None and again.patch == ()


@pytest.mark.parametrize("mode", ["exclusive", "timeslice", "mps", "mig", "hami", "kai"])
def test_every_mode_rewrites_in_the_comparison(mode: str) -> None:
    """Guards the property above against comparing untouched pods: each mode's full policy
    changes a plain GPU pod, and both engines agree on it."""
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p", "namespace": "ns", "annotations": {"gpuwebhook.io/gpu-memory": "10Gi"}},
        "spec": {
            "containers": [
                {"name": "main", "image": "x", "resources": {"limits": {"nvidia.com/gpu": "1"}}},
                {"name": "side", "image": "y", "env": [{"name": "NVIDIA_VISIBLE_DEVICES", "value": "none"}]},
            ]
        },
    }
    policy = next(p for p in FULL_POLICIES if p.sharing.mode == mode)
    result = _assert_same(pod, policy=policy, placement=view())
    assert result is not None and len(result.patch) > 3
    assert any(re.search("/env/0/value$", op["path"]) for op in result.patch)  # none became void in place


def test_a_write_past_the_draft_would_show() -> None:
    """The comparison can fail: a mutator that writes a part it did not get from the draft
    edits the request's object, and its write is missing from the patch."""
    from webhook.mutation import engine

    def careless(target: Any, _context: Any) -> bool:
        target.metadata["ownerReferences"][0]["name"] = "other"  # never asked of the draft
        return True

    owner = {"kind": "ReplicaSet", "name": "rs"}
    pod = {"kind": "Pod", "metadata": {"name": "p", "ownerReferences": [owner]}, "spec": {"containers": []}}
    original = engine.PLACEMENT
    engine.PLACEMENT = (*original, careless)
    try:
        result = mutate_object(pod, FULL_POLICIES[0], shape_checked=True)
    finally:
        engine.PLACEMENT = original
    assert owner["name"] == "other"
    assert not any(op["path"].startswith("/metadata/ownerReferences") for op in result.patch)
