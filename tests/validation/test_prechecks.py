"""A precheck may only skip Rego when the Rego would have found nothing: checked against real regopy.

The engine clears a constraint without running its template when the template's precheck
(webhook.validation.prechecks) says True. A precheck that says True where the Rego reports a
violation, or fails, silently admits a pod that must be denied, and nothing else would notice:
the pod is admitted either way. So the prechecks are checked here against the Rego they model,
on generated reviews and parameters that reach the shapes the prechecks claim to handle (odd
types, absent and null fields, wrong parameter types), each template run as Gatekeeper runs
it: its libs and Rego in a fresh interpreter, input `{review, parameters}`. The same property
is shown to fail with a precheck that clears everything, so that it cannot pass vacuously, and
the engine is shown to decide alike with and without its prechecks.
"""

from __future__ import annotations

import copy
import dataclasses
import json
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson
import pytest
import yaml
from hypothesis import HealthCheck, Phase, find, given, settings
from hypothesis import strategies as st
from hypothesis.errors import NoSuchExample

from tests.support.pods import make_pod, res
from webhook.accounting.count import count_object
from webhook.policy.engines import ConstraintSet
from webhook.policy.engines.regopy import RegoEngine, new_interpreter
from webhook.policy.loader import load_directory, regopy_engine, single_parameter_sets
from webhook.policy.model import PolicySet
from webhook.validation.gatekeeper import Constraint, ConstraintTemplate
from webhook.validation.gatekeeper_input import review_of_request
from webhook.validation.prechecks import (
    PRECHECKS,
    PodCreate,
    Precheck,
    fingerprint,
    pod_create,
    prechecks_for,
)
from webhook.validation.prechecks import bundle as precheck_bundle
from webhook.validation.results import ConstraintResult

REPO = Path(__file__).resolve().parents[2]
BUNDLE = REPO / "policies" / "security"
TRAINING_POD = REPO / "examples" / "pod-gpu-training.yaml"
# The one bundled template without a precheck: it reviews Namespaces, never a Pod.
WITHOUT_PRECHECK = {"GpuIgnoreLabel", "GpuDraDeviceClasses"}  # they judge no pods

Case = tuple[dict[str, Any], dict[str, Any]]  # (AdmissionRequest, constraint parameters)
Strategy = st.SearchStrategy[Any]

# A key left out of the object it would be put in; absent and null differ in Rego.
ABSENT: Any = object()


def _present(obj: dict[str, Any]) -> dict[str, Any]:
    return {key: value for key, value in obj.items() if value is not ABSENT}


def _object(**fields: Strategy) -> st.SearchStrategy[dict[str, Any]]:
    """Objects of these fields; a field whose strategy draws ABSENT is left out."""
    return st.fixed_dictionaries(fields).map(_present)


def _mostly(usual: Strategy, odd: Sequence[Any], one_in: int = 4) -> Strategy:
    """Usually a draw from `usual`; about one time in `one_in`, one of the `odd` values."""
    odd_values, chooser = st.sampled_from(odd), st.integers(0, one_in - 1)

    @st.composite
    def mostly(draw: st.DrawFn) -> Any:
        # Hypothesis favours small integers, 0 most: the largest comes up about as often as uniform.
        return draw(odd_values) if draw(chooser) == one_in - 1 else draw(usual)

    return mostly()


# --- Generated reviews ------------------------------------------------------------------------

# The shipped constraint's keys, and some that only look like them.
SCHEDULER_ANNOTATIONS = sorted(
    {
        "hami.io/vgpu-node",
        "hami.io/vgpu-devices-to-allocate",
        "hami.io/Ascend910B-devices-allocated",
        "received-resource-type",
        "runai/shared-gpu-configmap",
        "volcano.sh/gpu-index",
        "scheduling.koordinator.sh/device-allocated",
        "ALIYUN_COM_GPU_MEM_IDX",
        "runai-gpu-group",
        "runai-gpu-group/g1",
        "hami.io/gpu-scheduler-policy",
        "hami.io/-devices-allocated-x",
    }
)
# The Rego's own defaults, written out here rather than taken only from bundle.py, so that a
# precheck whose list lost a name is caught; bundle.py's list is added in case it grows.
DEVICE_VARIABLES = sorted(
    {
        "NVIDIA_VISIBLE_DEVICES",
        "NVIDIA_MIG_CONFIG_DEVICES",
        "NVIDIA_MIG_MONITOR_DEVICES",
        "NVIDIA_IMEX_CHANNELS",
        "NVIDIA_GDS",
        "NVIDIA_MOFED",
        "NVIDIA_NVSWITCH",
        "NVIDIA_GDRCOPY",
        *precheck_bundle._DEVICE_VARIABLES,
    }
)
CAPABILITIES_VARIABLE = "NVIDIA_DRIVER_CAPABILITIES"
# KAI's generated ConfigMap names for a pod named p or owned by trainer-7d9f, and forgeries.
ANNOTATION_VALUES = [
    "1",
    "",
    "p-bcdfghj-shared-gpu",
    "trainer-7d9f-x2x4x5x-shared-gpu",
    "other-bcdfghj-shared-gpu",
]
LABEL_KEYS = ["app", "runai-gpu-group", "runai-gpu-group/g1", "kai.scheduler/queue", "hami.io/vgpu-node"]
ANNOTATION_KEYS = [
    *SCHEDULER_ANNOTATIONS,
    "run.ai/gpu-fraction",
    "run.ai/",
    "RUN.AI/x",
    "example.com/run.ai/x",
    "gpu-fraction",
    "gpuwebhook.io/gpu-memory",
    "app",
    "cdi.k8s.io/gpu",
    "nvidia.cdi.k8s.io/x",
    "cdi.k8s.io",
    "example.com/cdi.k8s.io",
    "io.containerd.cdi/x",
]
# Each field is usually a plausible value (clean or violating, the commonest first: Hypothesis
# draws early entries more often) and now and then an odd one, which most prechecks refuse:
# too many odd values and no precheck would ever clear a pod for the property to check.
IMAGES = _mostly(
    st.sampled_from(
        [
            "registry.example.com/ml/trainer:2.3",
            "python",
            "nvcr.io/x/y:1",
            "localhost/x",
            "localhost:5000/x",
            "evil/x",
            "a:5000/x",
            "docker.io/library/python:3",
            "nvcr.io.evil.example/x",
            "/x",
            "",
        ]
    ),
    [5, None, ["nvcr.io/x"], ABSENT],
    one_in=8,
)
# A long s (U+017F) then "ys_admin": Python's upper() makes it SYS_ADMIN, regopy's (ASCII only) does not.
LONG_S_ADMIN = "\u017fys_admin"
CAPABILITY_NAMES = _mostly(
    st.sampled_from(
        [
            "NET_RAW",
            "SYS_ADMIN",
            "cap_sys_admin",
            "CAP_SYS_MODULE",
            "sys_rawio",
            "IPC_LOCK",
            "CAP_ALL",
            "ALL",
            "all",
            "SS",
            "",
        ]
    ),
    [LONG_S_ADMIN, "ß", 5, None],
    one_in=8,
)
CAPABILITIES = _object(
    add=_mostly(
        st.lists(CAPABILITY_NAMES, min_size=1, max_size=2),
        [ABSENT, None, [], "SYS_ADMIN", {"a": "SYS_ADMIN"}],
        one_in=5,
    ),
    drop=st.sampled_from([ABSENT, ["ALL"]]),
)
SECURITY_CONTEXTS = _mostly(
    _object(
        privileged=st.sampled_from([ABSENT, False, True, "true", 1, None]),
        capabilities=_mostly(CAPABILITIES, [ABSENT, ABSENT, None, [], "SYS_ADMIN"], one_in=3),
        runAsNonRoot=st.sampled_from([ABSENT, True]),
    ),
    [ABSENT, ABSENT, ABSENT, None, [], "privileged", [{"privileged": True}]],
    one_in=3,
)
ENV_VALUES = _mostly(
    st.sampled_from(
        ["void", "all", "none", "", "0", "compute,utility", " video , graphics", "all,compute", "enabled"]
    ),
    [ABSENT, None, 5, "\tcompute", "Compute", "void\u00a0"],
    one_in=6,
)
VALUE_FROM = st.sampled_from(
    [
        ABSENT,
        ABSENT,
        ABSENT,
        {"configMapKeyRef": {"name": "c", "key": "NVIDIA_VISIBLE_DEVICES"}},
        {"fieldRef": {"fieldPath": "metadata.name"}},
        None,
        False,
    ]
)
ENVS = _mostly(
    st.lists(
        _object(
            name=_mostly(
                st.sampled_from(["HOME", "CUDA_VISIBLE_DEVICES", CAPABILITIES_VARIABLE, *DEVICE_VARIABLES]),
                [5, None, ABSENT],
                one_in=8,
            ),
            value=ENV_VALUES,
            valueFrom=VALUE_FROM,
        ),
        max_size=2,
    ),
    [ABSENT, ABSENT, None, {}, {"name": "NVIDIA_VISIBLE_DEVICES"}, ["NVIDIA_VISIBLE_DEVICES"]],
    one_in=4,
)
ENV_SOURCES = _object(
    prefix=st.sampled_from([ABSENT, ABSENT, "", "APP_", "NVIDIA_", "N", "NVIDIA_VISIBLE_DEVICES_X", 5, None]),
    configMapRef=st.sampled_from([{"name": "a"}, ABSENT]),
    secretRef=st.sampled_from([ABSENT, {"name": "s"}]),
)
ENV_FROM = _mostly(
    st.one_of(st.sampled_from([ABSENT, ABSENT, []]), st.lists(ENV_SOURCES, min_size=1, max_size=2)),
    [[{"configMapRef": {"name": "a"}}], None, {}, "a", ["a"]],
    one_in=5,
)
DEVICE_LIST = "/var/run/nvidia-container-devices"
MOUNT_PATHS = _mostly(
    st.sampled_from(
        ["/data", "/var/run/nvidia-container-devices/all", "/run//nvidia-container-devices", "/x"]
    ),
    [ABSENT, None, 5],
    one_in=6,
)
VOLUME_MOUNTS = _mostly(
    st.lists(_object(name=st.just("data"), mountPath=MOUNT_PATHS), max_size=2),
    [ABSENT, ABSENT, None, {}, "data", [5]],
    one_in=4,
)
RESOURCE_NAMES = [
    "nvidia.com/gpu",
    "cpu",
    "nvidia.com/gpu.shared",
    "nvidia.com/mig-1g.10gb",
    "example.com/accel",
]
AMOUNTS = _mostly(
    st.sampled_from(["1", "2", 1, 2, "0", 0, "4", "8", "16"]),
    ["08", "1.5", "1e3", "abc", "-1", -1, "999999999999999", True, None, 1.5, 2.0, 2**53 - 1, 2**53, 2**60],
    one_in=10,
)
RESOURCE_SECTIONS = _mostly(
    st.dictionaries(st.sampled_from(RESOURCE_NAMES), AMOUNTS, max_size=2),
    [ABSENT, ABSENT, None, [], ["nvidia.com/gpu"], "1"],
    one_in=12,
)
RESOURCES = _mostly(
    _object(
        limits=RESOURCE_SECTIONS,
        requests=RESOURCE_SECTIONS,
        claims=st.sampled_from([ABSENT, ABSENT, ABSENT, [], [{"name": "gpu"}], "x"]),
    ),
    [ABSENT, None, [], [{"limits": {"nvidia.com/gpu": "1"}}]],
    one_in=12,
)
CONTAINERS = _mostly(
    _object(
        name=st.sampled_from(["main", "side", "init"]),
        image=IMAGES,
        securityContext=SECURITY_CONTEXTS,
        env=ENVS,
        envFrom=ENV_FROM,
        resources=RESOURCES,
        volumeMounts=VOLUME_MOUNTS,
    ),
    # Now and then not an object at all: pod_create must refuse the whole pod then.
    ["main", None],
    one_in=40,
)
# Half the time present: absent and [] read alike, null and an object make pod_create refuse.
OTHER_CONTAINERS = _mostly(
    st.lists(CONTAINERS, min_size=1, max_size=2),
    [ABSENT] * 16 + [[], [], None, {"c": {}}],
    one_in=2,
)
HOST_PATHS = ["/tmp", "/dev/nvidia0", "/", "//dev/../x", "/dev", "/var/log/x", "/dev/dri/", "rel", 5]
VOLUMES = _mostly(
    st.builds(lambda path: {"name": "host", "hostPath": {"path": path}}, st.sampled_from(HOST_PATHS)),
    [
        {"name": "data", "emptyDir": {}},
        {"name": "host", "hostPath": None},
        {"name": "host", "hostPath": {}},
        "data",
    ],
    one_in=3,
)
SPECS = _mostly(
    _object(
        nodeName=st.sampled_from([ABSENT, ABSENT, "", "n1", None, 5]),
        hostIPC=st.sampled_from([ABSENT, True, False, 1, "true"]),
        hostPID=st.sampled_from([ABSENT, True, False, 1, "true"]),
        hostNetwork=st.sampled_from([ABSENT, ABSENT, True, False, "true"]),
        volumes=_mostly(
            st.lists(VOLUMES, min_size=1, max_size=2), [ABSENT, ABSENT, [], None, {}, "data"], one_in=3
        ),
        containers=_mostly(st.lists(CONTAINERS, min_size=1, max_size=2), [ABSENT, [], None, {}], one_in=20),
        initContainers=OTHER_CONTAINERS,
        ephemeralContainers=OTHER_CONTAINERS,
    ),
    [None, [], "spec"],
    one_in=60,
)
POD_METADATA = _mostly(
    _object(
        namespace=st.just("ml"),
        name=st.sampled_from(["p", "p", "", 5, ABSENT]),
        generateName=st.sampled_from([ABSENT, "p-"]),
        annotations=_mostly(
            st.dictionaries(st.sampled_from(ANNOTATION_KEYS), st.sampled_from(ANNOTATION_VALUES), max_size=3),
            [ABSENT, None, [], ["run.ai/x"], "run.ai/x"],
        ),
        labels=_mostly(
            st.dictionaries(st.sampled_from(LABEL_KEYS), st.just("1"), max_size=2),
            [ABSENT, None, ["runai-gpu-group"]],
        ),
        ownerReferences=st.sampled_from([ABSENT, [{"name": "trainer-7d9f"}]]),
    ),
    [None, ABSENT, []],
    one_in=60,
)
OPERATIONS = _mostly(
    st.sampled_from(["CREATE", "CREATE", ""]), ["UPDATE", "DELETE", ABSENT, 1, None], one_in=6
)
OLD_OBJECTS = _mostly(st.sampled_from([None, ABSENT]), ["same", "other"], one_in=12)
USER_INFOS = _object(
    username=st.sampled_from(["alice", "system:serviceaccount:kube-system:hami-scheduler"]),
    groups=st.sampled_from([[], ["system:masters"], ["gpu-admins"]]),
)


@st.composite
def requests(draw: st.DrawFn) -> dict[str, Any]:
    """An AdmissionRequest as the API server (or gator, for operation "") would send it, bent."""
    spec, metadata = draw(SPECS), draw(POD_METADATA)
    obj = _present({"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": spec})
    if draw(st.integers(0, 11)) == 11:  # as in _mostly: about one time in 12
        template = _present({"metadata": metadata, "spec": spec})
        workload_meta = {"name": "d", "namespace": "ml"}
        obj = {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": workload_meta,
            "spec": {"template": template},
        }
    group = "apps" if obj["kind"] == "Deployment" else ""
    operation, old = draw(OPERATIONS), draw(OLD_OBJECTS)
    if old == "same":
        old = copy.deepcopy(obj)
    elif old == "other":
        # Removing a scheduler's annotation is a violation on UPDATE only.
        old = make_pod(
            "p", "ml", [res("main", {"nvidia.com/gpu": 1})], annotations={"hami.io/vgpu-node": "n1"}
        )
    request = _present(
        {
            "uid": "u",
            "kind": {"group": group, "version": "v1", "kind": obj["kind"]},
            "resource": {"group": group, "version": "v1", "resource": obj["kind"].lower() + "s"},
            "namespace": "ml",
            "name": "p",
            "userInfo": draw(USER_INFOS),
            "operation": operation,
            "object": obj,
            "oldObject": old,
            "dryRun": False,
        }
    )
    if operation == "DELETE" and old is not None and old is not ABSENT and draw(st.booleans()):
        request["object"] = None  # as the API server sends a DELETE
    return request


# --- Generated parameters ---------------------------------------------------------------------


def _list_param(values: Sequence[Any], odd: Sequence[Any], max_size: int = 3) -> Strategy:
    """A list parameter: a list of plausible values, or now and then empty or of the wrong type."""
    return _mostly(st.lists(st.sampled_from(values), min_size=1, max_size=max_size), [[], *odd], one_in=5)


WRONG_LISTS = [None, "x", [5], [None], {"a": "x"}]
PATTERNS = [{"prefix": "hami.io/", "suffix": "-devices-allocated"}, {"prefix": "runai-", "suffix": ""}]
SCHEDULER = "GpuSchedulerAnnotations"
OWNS_NODE = {"annotations": ["hami.io/vgpu-node"]}
OWNS_RUNAI = {"annotationPrefixes": ["run.ai/"]}
OWNS_HAMI = {"annotationPatterns": PATTERNS}
HALF_PATTERN = {"annotationPatterns": [{"prefix": "hami.io/"}]}
OWNS_LABEL = {"labelPrefixes": ["runai-"]}
EXTRA_GPU_RESOURCES = _list_param(["example.com/accel", "cpu", "nvidia.com/gpu"], WRONG_LISTS)
USERS = _list_param(["alice", "bob"], WRONG_LISTS)
GROUPS = _list_param(["gpu-admins", "system:masters"], WRONG_LISTS)
REGISTRIES = ["registry.example.com", "nvcr.io", "docker.io/library/", "localhost", "docker.io", "a:5000", ""]


def _parameters(**fields: Strategy) -> st.SearchStrategy[dict[str, Any]]:
    """Parameters where any key may be absent (one time in four), so the Rego's defaults are reached."""
    fields["extraGpuResources"] = EXTRA_GPU_RESOURCES
    return st.fixed_dictionaries({k: _mostly(v, [ABSENT], one_in=4) for k, v in fields.items()}).map(_present)


PARAMETERS: dict[str, st.SearchStrategy[dict[str, Any]]] = {
    "GpuAllowedRegistries": _parameters(
        registries=_list_param(REGISTRIES, [*WRONG_LISTS, "nvcr.io"]),
        allPods=st.sampled_from([True, False, "yes", None]),
    ),
    "GpuAddedCapabilities": _parameters(
        capabilities=_list_param(
            ["SYS_ADMIN", "ALL", "sys_admin", "CAP_SYS_ADMIN", "cap_all", "NET_RAW", "ß", "SS", LONG_S_ADMIN],
            [*WRONG_LISTS, "SYS_ADMIN"],
        ),
    ),
    "GpuCdiAnnotations": _parameters(
        annotationPrefixes=_list_param(["io.containerd.cdi/", "app", ""], [*WRONG_LISTS, "cdi/"]),
    ),
    "GpuDeviceEnvironment": _parameters(
        variables=_list_param([*DEVICE_VARIABLES, "HOME"], [*WRONG_LISTS, "NVIDIA_VISIBLE_DEVICES"]),
        allowedValues=_list_param(["void", "none", "", "all"], [*WRONG_LISTS, "void"]),
        allowedDriverCapabilities=_list_param(
            ["compute", "utility", "video", "graphics", "all"], [*WRONG_LISTS, "compute"]
        ),
        allowEnvFrom=st.sampled_from([False, True, "yes", None, 1]),
        allowedEnvFrom=_list_param(["a", "s"], WRONG_LISTS),
        allowedGpuFeatures=_list_param(["NVIDIA_GDRCOPY", "NVIDIA_MOFED"], WRONG_LISTS),
    ),
    "GpuDeviceListMounts": _parameters(),
    "GpuHostNamespaces": _parameters(allowHostNetwork=st.sampled_from([False, True, "yes", None, 1])),
    "GpuHostPaths": _parameters(
        allowedHostPaths=_mostly(
            st.lists(
                _object(
                    pathPrefix=st.sampled_from(["/tmp", "/var/log", "/", "/dev/", 5]),
                    readOnly=st.sampled_from([ABSENT, True, False, "yes"]),
                ),
                min_size=1,
                max_size=2,
            ),
            [[], None, "x", [5], [{}]],
            one_in=5,
        ),
    ),
    "GpuMaxPerPod": _parameters(
        # The schema requires `max`, but a precheck must not rely on a schema.
        max=_mostly(st.integers(-1, 10), [2**53, 2**63, 10**20, "8", True, 1.5, 8.0, None], one_in=4),
    ),
    "GpuPresetNodeName": _parameters(exemptUsers=USERS, exemptGroups=GROUPS),
    "GpuPrivilegedContainer": _parameters(),
    "GpuSchedulerAnnotations": _parameters(
        annotations=_list_param(SCHEDULER_ANNOTATIONS, [*WRONG_LISTS, "hami.io/vgpu-node"]),
        annotationPrefixes=_list_param(["run.ai/", "runai-", "hami.io/", ""], [*WRONG_LISTS, "run.ai/"]),
        annotationPatterns=_list_param(PATTERNS, [*WRONG_LISTS, {"prefix": "hami.io/"}, PATTERNS[0]]),
        labels=_list_param(LABEL_KEYS, WRONG_LISTS),
        labelPrefixes=_list_param(["runai-", ""], WRONG_LISTS),
        labelPatterns=_list_param(PATTERNS, WRONG_LISTS),
        schedulerUsers=USERS,
        schedulerGroups=GROUPS,
    ),
}
KINDS = sorted(PARAMETERS)


def cases(kind: str) -> st.SearchStrategy[Case]:
    return st.tuples(requests(), PARAMETERS[kind])


# --- The reference: a template's Rego as Gatekeeper runs it -----------------------------------


@dataclass(frozen=True)
class RegoVerdict:
    failed: bool
    violations: int
    output: str  # regopy's, for messages

    @property
    def clean(self) -> bool:
        return not self.failed and self.violations == 0


def rego_verdict(
    template: ConstraintTemplate, review: Mapping[str, Any], parameters: Mapping[str, Any]
) -> RegoVerdict:
    """What the template's Rego finds, run as Gatekeeper runs it."""
    assert template.rego is not None
    interpreter = new_interpreter()
    for n, source in enumerate([*template.libs, template.rego]):
        interpreter.add_module(f"m{n}.rego", source.text)
    # As JSON text: regopy.Input would wrap integers outside int64 (2**63 reads as -2**63) and
    # invent violations of `max`. Not ASCII-escaped: regopy keeps a \u escape as its six characters.
    document = {"review": review, "parameters": parameters, "gpu": counted(review)}
    interpreter.set_input_term(json.dumps(document, ensure_ascii=False))
    package = template.rego.text.split("package ", 1)[1].split()[0]
    # Counted rather than read: regopy writes sprintf("%v", "") (a pod named "") as `""` in a
    # message without escaping it, and its output then is not JSON.
    output = interpreter.query(f"n := count(data.{package}.violation)")
    if not output.ok():
        return RegoVerdict(failed=True, violations=0, output=str(output))
    count = output[0]["n"] if len(output) else 0
    shown = str(output)
    if count:
        try:
            shown = str(interpreter.query(f"v := data.{package}.violation"))
        except ValueError as e:
            shown = f"{count} violations, in output regopy could not write as JSON ({e})"
    return RegoVerdict(failed=False, violations=count, output=shown)


def counted(review: Mapping[str, Any]) -> dict[str, Any]:
    """input.gpu as the engine computes it for a review."""
    return count_object(review.get("object")).as_input()


def created(review: Mapping[str, Any]) -> PodCreate | None:
    return pod_create(review, counted(review))


# What a precheck is to the properties below: a Precheck, or a stand-in that clears everything.
Clears = Callable[[PodCreate, Mapping[str, Any]], bool]


def unsound(template: ConstraintTemplate, check: Clears, case: Case) -> str | None:
    """Why `check` clearing this case would be wrong, or None if it does not clear it or is right."""
    request, parameters = case
    review = review_of_request(request)
    pod = created(review)
    if pod is None or not check(pod, parameters):
        return None
    verdict = rego_verdict(template, review, parameters)
    if verdict.failed:
        return f"the precheck cleared it, but the Rego failed: {verdict.output}"
    if verdict.violations:
        return f"the precheck cleared it, but the Rego found {verdict.output}"
    return None


# --- Fixtures ---------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def policies() -> PolicySet:
    return load_directory(BUNDLE, regopy_engine)


@pytest.fixture(scope="module")
def templates(policies: PolicySet) -> dict[str, ConstraintTemplate]:
    assert policies.engine is not None
    return dict(policies.engine.templates)


@pytest.fixture(scope="module")
def prechecks(templates: dict[str, ConstraintTemplate]) -> dict[str, Precheck]:
    return prechecks_for(templates.values())


@pytest.fixture(scope="module")
def bundled_parameters(policies: PolicySet) -> dict[str, Mapping[str, Any]]:
    assert policies.constraints is not None
    return {c.kind: c.parameters for c in policies.constraints.constraints}


# --- 1. Every bundled template keeps its precheck ---------------------------------------------


def test_every_bundled_template_but_the_namespace_one_has_its_precheck(
    templates: dict[str, ConstraintTemplate], prechecks: dict[str, Precheck]
) -> None:
    missing = {
        kind: fingerprint(template)
        for kind, template in templates.items()
        if kind not in prechecks and kind not in WITHOUT_PRECHECK
    }
    assert not missing, (
        f"these bundled templates have no precheck for their Rego (kind: new fingerprint): {missing}. "
        "After checking that the template's precheck in webhook/validation/prechecks/bundle.py still "
        "models its Rego, update its fingerprint in PRECHECKS in webhook/validation/prechecks/__init__.py."
    )
    assert set(prechecks) == set(templates) - WITHOUT_PRECHECK == set(KINDS)
    # An entry no bundled template has is a stale fingerprint left behind by an edit.
    bundled = {fingerprint(t) for t in templates.values()}
    assert set(PRECHECKS) <= bundled, f"stale fingerprints in PRECHECKS: {set(PRECHECKS) - bundled}"


# --- 2. Soundness: a precheck clears only what the Rego clears --------------------------------


@pytest.mark.parametrize("kind", KINDS)
def test_a_precheck_clears_only_what_the_rego_finds_nothing_in(
    kind: str, templates: dict[str, ConstraintTemplate], prechecks: dict[str, Precheck]
) -> None:
    template, check = templates[kind], prechecks[kind]
    said: Counter[str] = Counter()

    @settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(case=cases(kind))
    def clears_soundly(case: Case) -> None:
        pod = created(review_of_request(case[0]))
        verdict = "no pod" if pod is None else "cleared" if check(pod, case[1]) else "left to Rego"
        said[verdict] += 1
        problem = unsound(template, check, case)
        assert problem is None, problem

    clears_soundly()
    # Soundness checked on pods that are never cleared would prove nothing. The bounds are far
    # below what the strategies give (over 60 seeds, every kind cleared 13 to 156 of its 250
    # pods and left 27 or more to Rego), so that no random draw should fail them: at 20, one did.
    assert said["cleared"] >= 5, said
    assert said["left to Rego"] >= 5, said


# --- 3. The property above can fail -----------------------------------------------------------


def _clears_everything(pod: PodCreate, parameters: Mapping[str, Any]) -> bool:
    return True


@pytest.mark.parametrize("kind", KINDS)
def test_the_soundness_property_catches_a_precheck_that_clears_everything(
    kind: str, templates: dict[str, ConstraintTemplate]
) -> None:
    """The generators must make pods that each template denies, or the property would be vacuous."""
    template = templates[kind]
    try:
        found = find(
            cases(kind),
            lambda case: unsound(template, _clears_everything, case) is not None,
            # Deterministic, and no shrinking: any counterexample will do, and shrinking runs the Rego.
            settings=settings(
                max_examples=2000, derandomize=True, database=None, phases=[Phase.generate], deadline=None
            ),
        )
    except NoSuchExample:
        pytest.fail(f"no generated case makes {kind} find a violation: the soundness property is vacuous")
    assert unsound(template, _clears_everything, found) is not None


# --- 4. Prechecks are not vacuous -------------------------------------------------------------


def _training_pod() -> dict[str, Any]:
    pod: dict[str, Any] = yaml.safe_load(TRAINING_POD.read_text())
    return pod


def _main(pod: dict[str, Any]) -> dict[str, Any]:
    container: dict[str, Any] = pod["spec"]["containers"][0]
    return container


Change = Callable[[dict[str, Any]], None]


def _set(path: str | tuple[str, ...], value: Any) -> Change:
    """Set a path (dotted, or a tuple when a key has dots) under the pod; `main` is its first container."""

    def change(pod: dict[str, Any]) -> None:
        *parents, last = path.split(".") if isinstance(path, str) else path
        node = pod
        for part in parents:
            node = _main(pod) if part == "main" and node is pod else node.setdefault(part, {})
        node[last] = value

    return change


def _unchanged(pod: dict[str, Any]) -> None:
    pass


def _adds(*capabilities: Any) -> Change:
    return _context({"capabilities": {"add": list(capabilities)}})


def _context(value: Any) -> Change:
    return _set("main.securityContext", value)


def _env(*names: str) -> Change:
    return _set("main.env", [{"name": name, "value": "1"} for name in names])


def _annotations(value: Any) -> Change:
    return _set("metadata.annotations", value)


TAKES_ENV_FROM = _set("main.envFrom", [{"configMapRef": {"name": "a"}}])
GPU_LIMIT = ("main", "resources", "limits", "nvidia.com/gpu")
HOST_TMP = [{"name": "h", "hostPath": {"path": "/tmp"}}]
REGISTRY = "registry.example.com"  # the training pod's
ONLY_OURS = {"registries": [REGISTRY]}
ALLOW_NETWORK = {"allowHostNetwork": True}
FRACTIONAL = {"limits": {"nvidia.com/gpu": "1.5"}}


def _env_value(name: str, value: Any) -> Change:
    return _set("main.env", [{"name": name, "value": value}])


def _capabilities(value: str) -> Change:
    return _env_value(CAPABILITIES_VARIABLE, value)


def _mount(path: Any) -> Change:
    return _set("main.volumeMounts", [{"name": "data", "mountPath": path}])


# (kind, what the row shows, change to the training pod, parameters over the bundled ones, cleared)
ROWS: list[tuple[str, str, Change, dict[str, Any], bool]] = [
    *[(kind, "the training pod, bundled parameters", _unchanged, {}, True) for kind in KINDS],
    ("GpuAllowedRegistries", "a listed registry", _unchanged, {"registries": [f"{REGISTRY}/"]}, True),
    ("GpuAllowedRegistries", "images from elsewhere", _unchanged, {"registries": ["nvcr.io"]}, False),
    ("GpuAllowedRegistries", "a look-alike", _set("main.image", f"{REGISTRY}.x/y"), ONLY_OURS, False),
    ("GpuAllowedRegistries", "an image not a string", _set("main.image", 5), ONLY_OURS, False),
    ("GpuAllowedRegistries", "registries not a list", _unchanged, {"registries": REGISTRY}, False),
    ("GpuAddedCapabilities", "an allowed capability", _adds("NET_RAW", "IPC_LOCK"), {}, True),
    ("GpuAddedCapabilities", "SYS_ADMIN", _adds("SYS_ADMIN"), {}, False),
    ("GpuAddedCapabilities", "cap_sys_module", _adds("NET_RAW", "cap_sys_module"), {}, False),
    ("GpuAddedCapabilities", "a non-ASCII name", _adds(LONG_S_ADMIN), {}, False),
    ("GpuAddedCapabilities", "a non-ASCII parameter", _unchanged, {"capabilities": ["ß"]}, False),
    ("GpuAddedCapabilities", "a name not a string", _adds(5), {}, False),
    ("GpuAddedCapabilities", "add not a list", _context({"capabilities": {"add": "NET_RAW"}}), {}, False),
    ("GpuCdiAnnotations", "ordinary annotations", _annotations({"a.b/cdi.k8s.io": "1"}), {}, True),
    ("GpuCdiAnnotations", "a CDI request", _annotations({"cdi.k8s.io/x": "nvidia.com/gpu=all"}), {}, False),
    ("GpuCdiAnnotations", "a vendor CDI request", _annotations({"nvidia.cdi.k8s.io/x": "a"}), {}, False),
    ("GpuCdiAnnotations", "annotations a list", _annotations(["cdi.k8s.io/x"]), {}, False),
    ("GpuDeviceEnvironment", "ordinary variables", _env("HOME", "CUDA_CACHE_PATH"), {}, True),
    ("GpuDeviceEnvironment", "void devices", _env_value("NVIDIA_VISIBLE_DEVICES", "void"), {}, True),
    ("GpuDeviceEnvironment", "NVENC's capabilities", _capabilities("compute,video"), {}, True),
    ("GpuDeviceEnvironment", "a device variable", _env_value("NVIDIA_VISIBLE_DEVICES", "all"), {}, False),
    ("GpuDeviceEnvironment", "capabilities all", _capabilities("all"), {}, False),
    ("GpuDeviceEnvironment", "a capability with a tab", _capabilities("\tvideo"), {}, False),
    ("GpuDeviceEnvironment", "envFrom in the GPU container", TAKES_ENV_FROM, {}, False),
    ("GpuDeviceEnvironment", "envFrom, allowed", TAKES_ENV_FROM, {"allowEnvFrom": True}, True),
    ("GpuDeviceEnvironment", "envFrom, allowed by a string", TAKES_ENV_FROM, {"allowEnvFrom": "yes"}, False),
    ("GpuDeviceEnvironment", "envFrom with a harmless prefix",
     _set("main.envFrom", [{"prefix": "APP_", "configMapRef": {"name": "a"}}]), {}, True),
    ("GpuDeviceEnvironment", "envFrom with prefix NVIDIA_",
     _set("main.envFrom", [{"prefix": "NVIDIA_", "configMapRef": {"name": "a"}}]), {}, False),
    ("GpuDeviceEnvironment", "env an object", _set("main.env", {"name": "HOME"}), {}, False),
    ("GpuDeviceListMounts", "a mount under the device list", _mount(f"{DEVICE_LIST}/x"), {}, False),
    ("GpuDeviceListMounts", "a mount path not a string", _mount(5), {}, False),
    ("GpuHostPaths", "a hostPath volume", _set("spec.volumes", HOST_TMP), {}, False),
    ("GpuHostPaths", "volumes an object", _set("spec.volumes", {"name": "data"}), {}, False),
    ("GpuHostNamespaces", "hostPID false", _set("spec.hostPID", False), {}, True),
    ("GpuHostNamespaces", "hostPID", _set("spec.hostPID", True), {}, False),
    ("GpuHostNamespaces", "hostIPC", _set("spec.hostIPC", True), {}, False),
    ("GpuHostNamespaces", "hostNetwork", _set("spec.hostNetwork", True), {}, False),
    ("GpuHostNamespaces", "hostNetwork, allowed", _set("spec.hostNetwork", True), ALLOW_NETWORK, True),
    ("GpuMaxPerPod", "exactly the maximum", _unchanged, {"max": 1}, True),
    ("GpuMaxPerPod", "more than the maximum", _unchanged, {"max": 0}, False),
    ("GpuMaxPerPod", "a fractional count", _set("main.resources", FRACTIONAL), {}, False),
    ("GpuMaxPerPod", "max a string", _unchanged, {"max": "8"}, False),
    ("GpuMaxPerPod", "max a boolean", _unchanged, {"max": True}, False),
    ("GpuMaxPerPod", "max absent", _unchanged, {"max": ABSENT}, False),
    ("GpuPresetNodeName", "an empty nodeName", _set("spec.nodeName", ""), {}, True),
    ("GpuPresetNodeName", "a nodeName", _set("spec.nodeName", "gpu-node-1"), {}, False),
    ("GpuPresetNodeName", "a null nodeName", _set("spec.nodeName", None), {}, False),
    ("GpuPrivilegedContainer", "privileged false", _context({"privileged": False}), {}, True),
    ("GpuPrivilegedContainer", "privileged", _context({"privileged": True}), {}, False),
    ("GpuPrivilegedContainer", "securityContext a string", _context("privileged"), {}, False),
    (SCHEDULER, "an owned annotation", _annotations({"hami.io/vgpu-node": "n"}), OWNS_NODE, False),
    (SCHEDULER, "an owned prefix", _annotations({"run.ai/gpu": "1"}), OWNS_RUNAI, False),
    (SCHEDULER, "an owned pattern", _annotations({"hami.io/x-devices-allocated": "1"}), OWNS_HAMI, False),
    (SCHEDULER, "a pattern without suffix", _annotations({"hami.io/x": "1"}), HALF_PATTERN, False),
    (SCHEDULER, "an owned label", _set("metadata.labels", {"runai-gpu-group": "g"}), OWNS_LABEL, False),
    (SCHEDULER, "nothing owned", _annotations({"app": "1"}), OWNS_NODE, True),
    ("GpuSchedulerAnnotations", "annotations a list", _annotations(["app"]), {}, False),
]  # fmt: skip


def _row_id(row: tuple[str, str, Change, dict[str, Any], bool]) -> str:
    return f"{row[0]}: {row[1]}"


@pytest.mark.parametrize("row", ROWS, ids=_row_id)
def test_a_precheck_clears_a_clean_gpu_pod_and_leaves_the_rest_to_rego(
    row: tuple[str, str, Change, dict[str, Any], bool],
    templates: dict[str, ConstraintTemplate],
    prechecks: dict[str, Precheck],
    bundled_parameters: dict[str, Mapping[str, Any]],
) -> None:
    kind, _, change, overrides, cleared = row
    pod = _training_pod()
    change(pod)
    parameters = {**bundled_parameters[kind], **overrides}
    parameters = {key: value for key, value in parameters.items() if value is not ABSENT}
    review = review_of_request(_request(pod, "CREATE"))
    found = created(review)
    assert found is not None
    assert prechecks[kind](found, parameters) is cleared
    if cleared:  # the table itself must be right about what is clean
        assert rego_verdict(templates[kind], review, parameters).clean


def test_the_training_pod_asks_for_a_gpu() -> None:
    """The rows above clear a GPU pod, not a pod every template would ignore anyway."""
    assert _main(_training_pod())["resources"]["limits"]["nvidia.com/gpu"] == "1"


# --- 5. pod_create ----------------------------------------------------------------------------


def _pod_with_spec(spec: Any) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": spec}


POD = make_pod("p", "ml", [res("main", {"nvidia.com/gpu": 1})], init=[res("init")])
DEPLOYMENT = {
    "apiVersion": "apps/v1",
    "kind": "Deployment",
    "metadata": {"name": "d"},
    "spec": {"template": {"metadata": {}, "spec": POD["spec"]}},
}

POD_CREATE_ROWS: list[tuple[str, dict[str, Any], bool]] = [
    ("CREATE", {"operation": "CREATE", "object": POD, "oldObject": None}, True),
    ("gator's offline review", {"operation": "", "object": POD, "oldObject": None}, True),
    ("no oldObject key", {"operation": "CREATE", "object": POD}, True),
    ("no metadata", {"operation": "CREATE", "object": {"kind": "Pod", "spec": POD["spec"]}}, True),
    ("UPDATE", {"operation": "UPDATE", "object": POD, "oldObject": POD}, False),
    ("UPDATE without oldObject", {"operation": "UPDATE", "object": POD, "oldObject": None}, False),
    ("DELETE", review_of_request({"operation": "DELETE", "object": None, "oldObject": POD}), False),
    ("operation not a string", {"operation": 1, "object": POD, "oldObject": None}, False),
    ("no operation", {"object": POD, "oldObject": None}, False),
    ("CREATE with an oldObject", {"operation": "CREATE", "object": POD, "oldObject": POD}, False),
    ("a Deployment", {"operation": "CREATE", "object": DEPLOYMENT, "oldObject": None}, False),
    ("no object", {"operation": "CREATE", "object": None, "oldObject": None}, False),
    ("spec a list", {"operation": "CREATE", "object": _pod_with_spec([]), "oldObject": None}, False),
    ("spec null", {"operation": "CREATE", "object": _pod_with_spec(None), "oldObject": None}, False),
    ("no spec", {"operation": "CREATE", "object": {"kind": "Pod", "metadata": {}}, "oldObject": None}, False),
    ("metadata null", {"operation": "CREATE", "object": {**POD, "metadata": None}, "oldObject": None}, False),
    (
        "containers an object",
        {"operation": "CREATE", "object": _pod_with_spec({"containers": {"main": {}}})},
        False,
    ),
    (
        "a container a string",
        {"operation": "CREATE", "object": _pod_with_spec({"containers": ["main"]})},
        False,
    ),
    (
        "initContainers null",
        {"operation": "CREATE", "object": _pod_with_spec({"containers": [], "initContainers": None})},
        False,
    ),
]


@pytest.mark.parametrize(
    ("review", "is_pod"), [r[1:] for r in POD_CREATE_ROWS], ids=[r[0] for r in POD_CREATE_ROWS]
)
def test_pod_create_accepts_only_a_well_formed_pod_being_created(
    review: dict[str, Any], is_pod: bool
) -> None:
    found = pod_create(review, {})
    assert (found is not None) is is_pod
    if found is not None:
        spec = review["object"]["spec"]
        expected = [
            (f, c) for f in ("containers", "initContainers", "ephemeralContainers") for c in spec.get(f, [])
        ]
        assert found.spec == spec
        assert list(found.containers) == expected  # every kind of container, in the Rego's order


# --- 6. The engine decides alike with and without prechecks -----------------------------------


def _request(obj: dict[str, Any], operation: str) -> dict[str, Any]:
    return {
        "uid": "u",
        "kind": {"group": "", "version": "v1", "kind": obj["kind"]},
        "resource": {"group": "", "version": "v1", "resource": "pods"},
        "namespace": "ml-team",
        "name": obj["metadata"]["name"],
        "operation": operation,
        "userInfo": {"username": "alice", "groups": []},
        "object": obj,
        "oldObject": obj if operation == "UPDATE" else None,
        "dryRun": False,
    }


Decision = dict[str, tuple[str | None, list[str]]]


def _decision(results: list[ConstraintResult]) -> Decision:
    """Each constraint's error and violations, comparable whatever order the engine returned them in."""
    return {
        r.constraint.id: (
            r.error,
            sorted(
                orjson.dumps(dataclasses.asdict(v), option=orjson.OPT_SORT_KEYS).decode()
                for v in r.violations
            ),
        )
        for r in results
    }


def test_a_violating_pod_still_gets_its_violation_from_rego(
    policies: PolicySet, prechecks: dict[str, Precheck], bundled_parameters: dict[str, Mapping[str, Any]]
) -> None:
    assert policies.engine is not None and policies.constraints is not None
    pod = _training_pod()
    _main(pod)["securityContext"] = {"privileged": True}
    request = _request(pod, "CREATE")
    # The engine skips Rego for every template but the one that finds the violation.
    found = created(review_of_request(request))
    assert found is not None
    cleared = {kind for kind, check in prechecks.items() if check(found, bundled_parameters[kind])}
    assert cleared == set(KINDS) - {"GpuPrivilegedContainer"}
    results = {r.constraint.kind: r for r in policies.engine.evaluate(request, policies.constraints)}
    privileged = results.pop("GpuPrivilegedContainer")
    assert privileged.error is None
    assert [(v.msg, v.details) for v in privileged.violations] == [
        (
            "Pod trainer-0: container <trainer> is privileged, and a privileged container sees every device "
            "of its node",
            {"container": "trainer"},
        )
    ]
    assert set(results) == cleared
    assert all(r.error is None and not r.violations for r in results.values())


@pytest.fixture(scope="module")
def twin(policies: PolicySet, templates: dict[str, ConstraintTemplate]) -> RegoEngine:
    """The loaded engine without its prechecks: the same bundles, the same folded parameters."""
    assert policies.constraints is not None
    fixed = single_parameter_sets(policies.constraints.constraints)
    return RegoEngine.compile(list(templates.values()), fixed=fixed, prechecks=False)


@pytest.fixture(scope="module")
def unfixed(templates: dict[str, ConstraintTemplate]) -> tuple[RegoEngine, RegoEngine]:
    """Engines that take parameters from the request, with and without prechecks."""
    compiled = list(templates.values())
    return RegoEngine.compile(compiled), RegoEngine.compile(compiled, prechecks=False)


@st.composite
def constraint_parameters(draw: st.DrawFn, constraints: Sequence[Constraint]) -> ConstraintSet:
    """The bundled constraints, each template's with generated parameters (the Namespace one kept)."""
    return ConstraintSet(
        [
            dataclasses.replace(c, parameters=draw(PARAMETERS[c.kind].filter(_fits_orjson)))
            if c.kind in PARAMETERS
            else c
            for c in constraints
        ]
    )


def _fits_orjson(parameters: dict[str, Any]) -> bool:
    """The engine keys parameter sets by their JSON from orjson, which refuses integers beyond 64 bits."""
    try:
        orjson.dumps(parameters)
    except orjson.JSONEncodeError:
        return False
    return True


def test_the_engine_decides_alike_with_and_without_prechecks(
    policies: PolicySet,
    prechecks: dict[str, Precheck],
    twin: RegoEngine,
    unfixed: tuple[RegoEngine, RegoEngine],
) -> None:
    assert policies.engine is not None and policies.constraints is not None
    engine, constraints = policies.engine, policies.constraints
    with_prechecks, without = unfixed
    outcomes: Counter[str] = Counter()

    @settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(request=requests(), generated=constraint_parameters(constraints.constraints))
    def decides_alike(request: dict[str, Any], generated: ConstraintSet) -> None:
        bundled = _decision(engine.evaluate(request, constraints))
        assert bundled == _decision(twin.evaluate(request, constraints))
        found = _decision(with_prechecks.evaluate(request, generated))
        assert found == _decision(without.evaluate(request, generated))
        pod = created(review_of_request(request))
        for c in generated.constraints:
            if pod is not None and c.kind in prechecks and prechecks[c.kind](pod, c.parameters):
                outcomes["cleared by its precheck"] += 1
            elif c.id in found:
                outcomes["denied" if found[c.id][0] or found[c.id][1] else "clean by Rego"] += 1

    decides_alike()
    # Both engines must have had something to disagree about.
    assert outcomes["cleared by its precheck"] >= 50 and outcomes["denied"] >= 50, outcomes
