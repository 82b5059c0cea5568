"""The shape check's quick accept and its detailed walk give one verdict on every pod."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from webhook.accounting.target import PodTarget
from webhook.mutation import shape
from webhook.mutation.shape import ShapeError

ROOT = Path(__file__).resolve().parents[2]


class Text(str):
    """A string subclass: the walk accepts it (isinstance), the quick accept leaves it to the walk."""


class Object(dict[str, Any]):
    pass


def _walk_accepts(pod: dict[str, Any]) -> bool:
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(shape, "_well_shaped", lambda _: False)
        try:
            shape.check_pod_shape(PodTarget(pod, "Pod", "p"))
        except ShapeError:
            return False
    return True


JUNK = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-2, 2),
    st.just(1.5),
    st.sampled_from(["", "x"]),
    st.just([]),
    st.just({}),
    st.just(["x"]),
    st.just([{}]),
    st.just([1]),
    st.just({"a": 1}),
)
SUBCLASSED = st.sampled_from([Text("x"), Object(), [Text("x")], Object(a="b")])


def obj(fields: dict[str, st.SearchStrategy[Any]]) -> st.SearchStrategy[dict[str, Any]]:
    """Every field present, so that each can be the one made wrong (None stands for absent)."""
    return st.fixed_dictionaries(fields)


def well_shaped_pods() -> st.SearchStrategy[dict[str, Any]]:
    """Pods of the right types throughout, with every field the check reads."""

    def f(valid: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
        return valid

    text = st.sampled_from(["a", "main", "/dev"])
    boolean = st.booleans()
    strings = st.lists(text, min_size=1, max_size=2)
    string_map = st.dictionaries(text, f(text), min_size=1, max_size=2)
    maps: st.SearchStrategy[Any] = st.lists(st.just({}), min_size=1, max_size=2)
    env = obj({"name": f(text), "value": f(text), "valueFrom": f(st.just({}))})
    env_from = obj({"prefix": f(text), "configMapRef": f(st.just({})), "secretRef": f(st.just({}))})
    mount = obj({"name": f(text), "mountPath": f(text), "readOnly": f(boolean)})
    capabilities = obj({"add": f(strings), "drop": f(strings)})
    security = obj(
        {
            **{k: f(boolean) for k in shape._SECURITY_BOOLS},
            "procMount": f(text),
            "capabilities": f(capabilities),
        }
    )
    resources = obj(
        {"limits": f(st.just({"nvidia.com/gpu": "1"})), "requests": f(st.just({})), "claims": f(maps)}
    )
    container = obj(
        {
            **{k: f(text) for k in shape._CONTAINER_STRINGS},
            "resources": f(resources),
            "securityContext": f(security),
            "env": f(st.lists(f(env), min_size=1, max_size=3)),
            "envFrom": f(st.lists(f(env_from), min_size=1, max_size=2)),
            "volumeMounts": f(st.lists(f(mount), min_size=1, max_size=2)),
        }
    )
    volume = obj({"name": f(text), "hostPath": f(obj({"path": f(text), "type": f(text)}))})
    term = obj({"matchExpressions": f(maps)})
    node = obj(
        {
            "requiredDuringSchedulingIgnoredDuringExecution": f(
                obj({"nodeSelectorTerms": f(st.lists(f(term), min_size=1, max_size=2))})
            ),
            "preferredDuringSchedulingIgnoredDuringExecution": f(
                st.lists(f(obj({"preference": f(st.just({}))})), min_size=1, max_size=2)
            ),
        }
    )
    spec = obj(
        {
            **{k: f(text) for k in shape._SPEC_STRINGS},
            **{k: f(boolean) for k in shape._SPEC_BOOLS},
            "terminationGracePeriodSeconds": f(st.integers(0, 30)),
            "tolerations": f(maps),
            "resourceClaims": f(maps),
            "volumes": f(st.lists(f(volume), min_size=1, max_size=2)),
            **{k: f(st.lists(f(container), min_size=1, max_size=2)) for k in shape._ALL_CONTAINER_LISTS},
            "affinity": f(obj({"nodeAffinity": f(node)})),
        }
    )
    metadata = obj(
        {
            "name": f(text),
            "namespace": f(text),
            "generateName": f(text),
            "labels": f(string_map),
            "annotations": f(string_map),
        }
    )
    return obj({"metadata": f(metadata), "spec": f(spec)})


def _places(node: Any) -> list[tuple[Any, Any]]:
    """Every (container, key or index) of the pod: where one wrong value can be put."""
    found: list[tuple[Any, Any]] = []
    entries = node.items() if isinstance(node, dict) else enumerate(node) if isinstance(node, list) else ()
    for key, child in entries:
        found.append((node, key))
        found += _places(child)
    return found


def corrupted(data: st.DataObject, wrong: st.SearchStrategy[Any]) -> dict[str, Any]:
    """A well-shaped pod, and most often one value in it replaced by something else."""
    pod = data.draw(well_shaped_pods())
    places = _places(pod)
    corrupt: int = data.draw(st.integers(0, 4))
    if places and corrupt:
        parent, key = data.draw(st.sampled_from(places))
        parent[key] = data.draw(wrong)
    return pod


@settings(max_examples=800, deadline=None)
@given(st.data())
def test_on_json_the_quick_accept_is_the_walk(data: st.DataObject) -> None:
    """On what a JSON decoder builds, the quick accept accepts exactly what the walk accepts."""
    pod = corrupted(data, JUNK)
    assert shape._well_shaped(pod) == _walk_accepts(pod)


@settings(max_examples=300, deadline=None)
@given(st.data())
def test_the_quick_accept_never_passes_what_the_walk_refuses(data: st.DataObject) -> None:
    """Offline callers may pass subclasses: the quick accept leaves those to the walk."""
    pod = corrupted(data, st.one_of(JUNK, SUBCLASSED))
    if shape._well_shaped(pod):
        assert _walk_accepts(pod)


@pytest.mark.parametrize("example", ["pod-gpu-training.yaml", "pod-cpu.yaml"])
def test_the_examples_take_the_quick_path(example: str) -> None:
    pod = yaml.safe_load((ROOT / "examples" / example).read_text())
    assert shape._well_shaped(pod)


@pytest.mark.parametrize(
    "pod",
    [
        {"spec": {"terminationGracePeriodSeconds": True}},
        {"spec": {"containers": [{"name": Text("c")}]}},
        {"metadata": Object(name="p")},
        {"spec": {"containers": [{"env": [{"name": "A", "value": 1}]}]}},
    ],
)
def test_the_walk_decides_what_the_quick_accept_does_not_take(pod: dict[str, Any]) -> None:
    assert not shape._well_shaped(pod)
