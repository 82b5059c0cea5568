"""Gatekeeper's inventory from untrusted documents: odd shapes are left out, never raised on."""

from __future__ import annotations

from typing import Any

import pytest

from webhook.validation.gatekeeper_input import inventory_of, namespace_labels


def namespace(name: str, metadata: Any) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, **metadata}}


def with_namespace(found: Any) -> dict[str, Any]:
    return {"cluster": {"v1": {"Namespace": {"gpu": found}}}}


@pytest.mark.parametrize(
    ("inventory", "expected"),
    [
        pytest.param(None, None, id="no inventory"),
        pytest.param({}, None, id="empty"),
        pytest.param({"cluster": []}, None, id="cluster is a list"),
        pytest.param({"cluster": {"v1": "x"}}, None, id="group version is a string"),
        pytest.param({"cluster": {"v1": {"Namespace": [1]}}}, None, id="kind is a list"),
        pytest.param(with_namespace("gpu"), None, id="namespace is a string"),
        pytest.param(with_namespace({}), {}, id="namespace without metadata"),
        pytest.param(with_namespace({"metadata": ["labels"]}), {}, id="metadata is a list"),
        pytest.param(with_namespace({"metadata": {"labels": "tier=gpu"}}), {}, id="labels are a string"),
        pytest.param(
            with_namespace({"metadata": {"labels": {"tier": "gpu", "size": 8, "on": True, "x": None}}}),
            {"tier": "gpu"},
            id="only string values count",
        ),
        pytest.param(
            with_namespace({"metadata": {"labels": {"tier": "gpu", "team": "ml"}}}),
            {"tier": "gpu", "team": "ml"},
            id="well formed",
        ),
    ],
)
def test_namespace_labels_of_any_inventory_shape(inventory: Any, expected: dict[str, str] | None) -> None:
    assert namespace_labels(inventory, "gpu") == expected


def test_inventory_leaves_out_what_is_not_a_named_object() -> None:
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "ml"}}
    good = namespace("ml", {"labels": {"tier": "gpu"}})
    odd: list[Any] = [
        "text",
        ["a", "list"],
        None,
        {"kind": "Pod", "metadata": ["p"]},
        {"kind": "Pod", "metadata": {"name": 7}},
        {"kind": "Pod", "metadata": {"name": ""}},
        {"kind": "Pod"},
    ]
    inventory = inventory_of([*odd, pod, good])
    assert inventory == {
        "cluster": {"v1": {"Namespace": {"ml": good}}},
        "namespace": {"ml": {"v1": {"Pod": {"p": pod}}}},
    }
    assert namespace_labels(inventory, "ml") == {"tier": "gpu"}


def test_a_namespace_that_is_not_a_string_places_the_object_at_cluster_scope() -> None:
    obj = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": ["ml"]}}
    assert inventory_of([obj]) == {"cluster": {"v1": {"Pod": {"p": obj}}}, "namespace": {}}
