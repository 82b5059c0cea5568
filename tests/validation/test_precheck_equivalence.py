"""The fast path of constraint planning gives the answers of the straightforward one it replaced.

Two properties, on generated inputs that include hostile shapes (any JSON value in any field):

- each precheck, reading the pod's facts (webhook/validation/prechecks/facts.py) with its
  parameters read once, clears exactly the pods that the precheck as first written clears
  (tests/validation/precheck_reference.py, each walking the pod itself), and never raises;
- ConstraintSet.applicable, which remembers per place what does not depend on the object's
  name and labels, equals a linear scan of every constraint's full match, over a series of
  requests against one set (so that remembered places are read back).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.validation import precheck_reference as reference
from tests.validation.test_prechecks import KINDS, PARAMETERS, counted, requests
from webhook.match import SelectorError
from webhook.policy.engines import ConstraintSet
from webhook.policy.loader import load_directory, regopy_engine
from webhook.validation.constraint_match import NamespaceUnknown, parse_match
from webhook.validation.gatekeeper import Constraint, Where
from webhook.validation.gatekeeper_input import Inventory, inventory_of, review_of_request, subjects
from webhook.validation.prechecks import PodCreate, Precheck, pod_create, prechecks_for
from webhook.validation.results import ConstraintResult

BUNDLE = Path(__file__).resolve().parents[2] / "policies" / "security"

# --- Hostile pods: any JSON where the prechecks look ------------------------------------------

FIELDS = [
    "image", "securityContext", "privileged", "capabilities", "add", "env", "name", "value",
    "valueFrom", "envFrom", "prefix", "volumeMounts", "mountPath", "resources", "limits",
    "requests", "claims", "nvidia.com/gpu", "nvidia.com/mig-1g.10gb", "hostPath",
]  # fmt: skip
WORDS = [
    "", "void", "all", "SYS_ADMIN", "cap_sys_admin", "NET_RAW", "\u017fys_admin", "ß",
    "NVIDIA_VISIBLE_DEVICES", "NVIDIA_DRIVER_CAPABILITIES", "NVIDIA_", "compute,video", "\tcompute",
    "/var/run/nvidia-container-devices", "/data", "registry.example.com/x", "python",
    "cdi.k8s.io/x", "hami.io/x-devices-allocated", "hami.io/vgpu-node", "run.ai/x", "runai-gpu-group",
    "gpu-fraction", "app",
]  # fmt: skip
SCALARS = st.one_of(st.none(), st.booleans(), st.integers(-1, 3), st.floats(0, 2), st.sampled_from(WORDS))
JSON: st.SearchStrategy[Any] = st.recursive(
    SCALARS,
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.sampled_from(FIELDS + WORDS), inner, max_size=4)
    ),
    max_leaves=10,
)


def _or_any(usual: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    """Usually the field's own shape, with any JSON inside; sometimes any JSON in its place."""
    return st.one_of(usual, usual, usual, JSON)


def _fields(**fields: st.SearchStrategy[Any]) -> st.SearchStrategy[dict[str, Any]]:
    return st.fixed_dictionaries({}, optional={name: _or_any(value) for name, value in fields.items()})


WORD = _or_any(st.sampled_from(WORDS))
RESOURCE_NAMES = st.sampled_from(["nvidia.com/gpu", "nvidia.com/mig-1g.10gb", "example.com/accel", "cpu"])
CONTAINER = _fields(
    image=st.sampled_from(WORDS),
    securityContext=_fields(privileged=JSON, capabilities=_fields(add=st.lists(WORD, max_size=2))),
    env=st.lists(_fields(name=st.sampled_from(WORDS), value=WORD, valueFrom=JSON), max_size=3),
    envFrom=st.lists(_fields(prefix=st.sampled_from(WORDS), configMapRef=JSON), max_size=2),
    volumeMounts=st.lists(_fields(mountPath=st.sampled_from(WORDS)), max_size=2),
    resources=_fields(
        limits=st.dictionaries(RESOURCE_NAMES, WORD, max_size=2),
        requests=st.dictionaries(RESOURCE_NAMES, WORD, max_size=2),
        claims=JSON,
    ),
)
SPEC = st.fixed_dictionaries(
    {"containers": st.lists(CONTAINER, max_size=3)},
    optional={
        "initContainers": st.lists(CONTAINER, max_size=2),
        "ephemeralContainers": st.lists(CONTAINER, max_size=1),
        "volumes": _or_any(st.lists(_fields(hostPath=JSON, emptyDir=JSON), max_size=2)),
        "nodeName": JSON,
        "hostIPC": JSON,
        "hostPID": JSON,
        "hostNetwork": JSON,
    },
)
METADATA = st.fixed_dictionaries(
    {"name": st.just("p")},
    optional={
        "annotations": st.one_of(st.dictionaries(st.sampled_from(WORDS), st.just("1"), max_size=3), JSON),
        "labels": st.one_of(st.dictionaries(st.sampled_from(WORDS), st.just("1"), max_size=3), JSON),
    },
)


@st.composite
def hostile_requests(draw: st.DrawFn) -> dict[str, Any]:
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": draw(METADATA), "spec": draw(SPEC)}
    return {"operation": "CREATE", "object": pod, "oldObject": None, "userInfo": {}}


def hostile_parameters(kind: str) -> st.SearchStrategy[dict[str, Any]]:
    """The kind's generated parameters, or now and then any JSON under names the prechecks read."""
    names = [
        "registries", "capabilities", "variables", "variablePrefixes", "allowedValues",
        "allowedDriverCapabilities", "extraGpuResources", "allowEnvFrom", "annotationPrefixes",
        "allowHostNetwork", "max", "annotations", "annotationPatterns", "labels", "labelPrefixes",
        "labelPatterns",
    ]  # fmt: skip
    return PARAMETERS[kind] | st.dictionaries(st.sampled_from(names), JSON, max_size=4)


# --- 1. The prechecks equal the reference ----------------------------------------------------


@pytest.fixture(scope="module")
def prechecks() -> dict[str, Precheck]:
    policies = load_directory(BUNDLE, regopy_engine)
    assert policies.engine is not None
    return prechecks_for(policies.engine.templates.values())


def _reference(precheck: Precheck) -> Callable[[PodCreate, Mapping[str, Any]], bool]:
    """The first implementation of the same rule, which has the same name."""
    found: Callable[[PodCreate, Mapping[str, Any]], bool] = getattr(reference, precheck.prepare.__name__)
    return found


def _reference_clears(precheck: Precheck, pod: PodCreate, parameters: Mapping[str, Any]) -> bool:
    # The engine reads a precheck that raises as one that does not clear (plan's _cleared).
    try:
        return _reference(precheck)(pod, parameters) is True
    except Exception:
        return False


@pytest.mark.parametrize("kind", KINDS)
def test_a_precheck_clears_what_its_first_implementation_clears(
    kind: str, prechecks: dict[str, Precheck]
) -> None:
    precheck = prechecks[kind]
    said: Counter[bool] = Counter()

    @settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(request=requests() | hostile_requests(), parameters=hostile_parameters(kind))
    def alike(request: dict[str, Any], parameters: dict[str, Any]) -> None:
        review = review_of_request(request)
        pod = pod_create(review, counted(review))  # the facts are read here, and must not raise
        if pod is None:
            return
        cleared = precheck.bind(parameters)(pod)  # a bound check must not raise either
        assert cleared is _reference_clears(precheck, pod, parameters)
        said[cleared] += 1

    alike()
    assert said[True] >= 5 and said[False] >= 5, said  # both answers were compared


def test_the_reference_names_every_bundled_precheck(prechecks: dict[str, Precheck]) -> None:
    assert set(prechecks) == set(KINDS)
    assert all(callable(_reference(p)) for p in prechecks.values())


# --- 2. Remembered matching equals a linear scan ---------------------------------------------

KIND_NAMES = ["Pod", "Deployment", "Namespace", "ConfigMap", "*"]
NAMESPACES = ["team-a", "team-b", "kube-system", "other"]
NAMESPACE_GLOBS = [*NAMESPACES, "team-*", "*-b", "kube-*", "*"]
LABELS = st.dictionaries(st.sampled_from(["app", "tier"]), st.sampled_from(["web", "db"]), max_size=2)
SELECTOR = st.fixed_dictionaries(
    {},
    optional={
        "matchLabels": st.dictionaries(
            st.sampled_from(["app", "tier"]), st.sampled_from(["web", "db"]), max_size=1
        ),
        "matchExpressions": st.lists(
            st.sampled_from(
                [
                    {"key": "app", "operator": "Exists"},
                    {"key": "tier", "operator": "DoesNotExist"},
                    {"key": "app", "operator": "In", "values": ["web"]},
                    {"key": "app", "operator": "NotIn", "values": ["db"]},
                ]
            ),
            max_size=2,
        ),
    },
)
MATCHES = st.fixed_dictionaries(
    {},
    optional={
        "kinds": st.lists(
            st.fixed_dictionaries(
                {
                    "apiGroups": st.sampled_from([[""], ["apps"], ["", "apps"], ["*"], []]),
                    "kinds": st.lists(st.sampled_from(KIND_NAMES), max_size=2),
                }
            ),
            max_size=2,
        ),
        "scope": st.sampled_from(["*", "Cluster", "Namespaced"]),
        "namespaces": st.lists(st.sampled_from(NAMESPACE_GLOBS), max_size=2),
        "excludedNamespaces": st.lists(st.sampled_from(NAMESPACE_GLOBS), max_size=2),
        "labelSelector": SELECTOR,
        "namespaceSelector": SELECTOR,
        "name": st.sampled_from(["p", "p*", "*", "q", "team-a"]),
    },
)


def _constraints(raw: list[dict[str, Any]]) -> list[Constraint]:
    return [
        Constraint(
            kind="K8sAny", name=f"c{i}", action="deny", match=parse_match(m), parameters={}, where=Where("c")
        )
        for i, m in enumerate(raw)
    ]


@st.composite
def objects(draw: st.DrawFn) -> Any:
    kind = draw(st.sampled_from(["Pod", "Deployment", "Namespace", "ConfigMap"]))
    api_version = {"Deployment": "apps/v1"}.get(kind, "v1")
    metadata: dict[str, Any] = {"name": draw(st.sampled_from(["p", "p-1", "team-a", "", "kube-system"]))}
    if draw(st.booleans()):
        metadata["generateName"] = "p-"
    if kind != "Namespace" and draw(st.integers(0, 3)):
        metadata["namespace"] = draw(st.sampled_from(NAMESPACES))
    metadata["labels"] = draw(st.one_of(LABELS, st.sampled_from([None, "x", {"app": 5}])))
    obj: dict[str, Any] = {"apiVersion": api_version, "kind": kind, "metadata": metadata}
    if draw(st.integers(0, 9)) == 0:  # no apiVersion nor kind: the request's kind is read
        obj = {"metadata": metadata}
    return draw(st.sampled_from([obj, obj, obj, None, "x", 5]))


@st.composite
def match_requests(draw: st.DrawFn) -> dict[str, Any]:
    request: dict[str, Any] = {
        "kind": {
            "group": draw(st.sampled_from(["", "apps"])),
            "kind": draw(st.sampled_from(["Pod", "Namespace"])),
        },
        "operation": draw(st.sampled_from(["CREATE", "UPDATE", "DELETE"])),
        "object": draw(objects()),
        "oldObject": draw(st.one_of(st.none(), objects())),
    }
    if draw(st.booleans()):
        request["namespace"] = draw(st.sampled_from(NAMESPACES))
    if draw(st.booleans()):
        request["name"] = "from-request"
    return request


INVENTORIES = st.one_of(
    st.none(),
    st.lists(st.sampled_from(NAMESPACES), max_size=3, unique=True).flatmap(
        lambda names: st.tuples(*(LABELS for _ in names)).map(
            lambda labels: inventory_of(
                {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": n, "labels": dict(ls)}}
                for n, ls in zip(names, labels, strict=True)
            )
        )
    ),
)


def linear_applicable(
    constraints: list[Constraint], review: Mapping[str, Any], inventory: Inventory | None
) -> tuple[list[Constraint], list[ConstraintResult]]:
    """Every constraint's full match against every subject, in order: the obvious computation."""
    chosen: set[int] = set()
    failed: dict[int, ConstraintResult] = {}
    for subject in subjects(review, inventory):
        for position, constraint in enumerate(constraints):
            if position in chosen:
                continue
            try:
                if constraint.match.matches(subject):
                    chosen.add(position)
                    failed.pop(position, None)
            except NamespaceUnknown as e:
                reason = f"namespace {e.args[0]!r} is unknown, so namespaceSelector cannot be evaluated"
                failed.setdefault(position, ConstraintResult(constraint, error=reason))
    return [constraints[p] for p in sorted(chosen)], [failed[p] for p in sorted(failed)]


def _parses(raw: dict[str, Any]) -> bool:
    try:
        parse_match(raw)
    except SelectorError:
        return False
    return True


@settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    raw=st.lists(MATCHES.filter(_parses), max_size=8),
    series=st.lists(st.tuples(match_requests(), INVENTORIES), min_size=1, max_size=6),
)
def test_applicable_equals_a_linear_scan_of_every_match(
    raw: list[dict[str, Any]], series: list[tuple[dict[str, Any], Inventory | None]]
) -> None:
    constraints = _constraints(raw)
    indexed = ConstraintSet(constraints)
    for request, inventory in series:
        review = review_of_request(request)
        assert indexed.applicable(review, inventory) == linear_applicable(constraints, review, inventory)
