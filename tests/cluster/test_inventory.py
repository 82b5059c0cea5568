"""Inventory files: every accepted layout, clear errors, and Gatekeeper's data.inventory."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest
import yaml

from tests.support.pods import gpu_pod, namespace, quota
from tests.support.reviews import make_review
from webhook.accounting.demand import DEFAULT_SETTINGS
from webhook.errors import ConfigError
from webhook.inventory import cache_from, load_inventory, parse_inventory
from webhook.quota.check import check_quota

PODS = [gpu_pod("a", gpus=2), gpu_pod("b", gpus=3), gpu_pod("done", gpus=8, phase="Succeeded")]
NAMESPACES = [namespace("ml-team", {"team": "ml"})]


def as_multi_document() -> str:
    return yaml.safe_dump_all([*NAMESPACES, *PODS])


def as_kubectl_list() -> str:
    return yaml.safe_dump({"apiVersion": "v1", "kind": "List", "items": [*NAMESPACES, *PODS]})


def as_api_lists() -> str:
    def strip(objs: list[dict[str, object]]) -> list[dict[str, object]]:
        return [{k: v for k, v in o.items() if k not in ("kind", "apiVersion")} for o in objs]

    pods = {"apiVersion": "v1", "kind": "PodList", "metadata": {"resourceVersion": "9"}, "items": strip(PODS)}
    namespaces = {"apiVersion": "v1", "kind": "NamespaceList", "items": strip(NAMESPACES)}
    return yaml.safe_dump_all([pods, namespaces])


def as_json() -> str:
    return orjson.dumps({"apiVersion": "v1", "kind": "List", "items": [*NAMESPACES, *PODS]}).decode()


@pytest.mark.parametrize("render", [as_multi_document, as_kubectl_list, as_api_lists, as_json])
def test_every_layout_feeds_the_same_state(render: object, tmp_path: Path) -> None:
    assert callable(render)
    path = tmp_path / "inventory.yaml"
    path.write_text(render())
    cache = cache_from(load_inventory(path))
    assert cache.synced
    assert cache.usage("ml-team", DEFAULT_SETTINGS).gpus == 5
    assert cache.namespace_labels("ml-team")["team"] == "ml"


def test_objects_without_a_namespace_land_in_default() -> None:
    pod = gpu_pod("a")
    del pod["metadata"]["namespace"]
    inventory = parse_inventory(yaml.safe_dump(pod), "inv")
    assert inventory.objects[0]["metadata"]["namespace"] == "default"
    assert "namespace" not in pod["metadata"]


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("kind: Pod\nmetadata: {name: a}\n", "without an apiVersion"),
        ("apiVersion: v1\nmetadata: {name: a}\n", "without a kind"),
        ("apiVersion: v1\nkind: Pod\nmetadata: {}\n", "without metadata.name"),
        ("- 1\n", "expected a Kubernetes object"),
        ("apiVersion: v1\nkind: Pod\nmetadata: [\n", "inv:4: not valid YAML: the file ends where a value"),
        ("---\nkind: Pod\n", "inv: document 1"),
    ],
)
def test_problems_are_located(text: str, words: str) -> None:
    with pytest.raises(ConfigError, match=words):
        parse_inventory(text, "inv")


def test_a_missing_file_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot read inventory"):
        load_inventory(tmp_path / "nope.yaml")


def test_gatekeeper_inventory_layout() -> None:
    deployment = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "d", "namespace": "ml-team"},
    }
    data = parse_inventory(yaml.safe_dump_all([*NAMESPACES, PODS[0], deployment]), "inv").gatekeeper()
    assert data["namespace"]["ml-team"]["v1"]["Pod"]["a"] == PODS[0]
    assert data["namespace"]["ml-team"]["apps/v1"]["Deployment"]["d"] == deployment
    assert data["cluster"]["v1"]["Namespace"]["ml-team"] == NAMESPACES[0]
    assert "Namespace" not in data["namespace"].get("ml-team", {}).get("v1", {})


def test_an_inventory_drives_quota_decisions() -> None:
    """The offline path: existing pods from a file, new pods checked against them."""
    inventory = parse_inventory(as_kubectl_list(), "inv")
    cache = cache_from(inventory)
    cap = quota("ml-team", {"gpus": 8}, match={"namespaceSelector": {"matchLabels": {"team": "ml"}}})
    fits = make_review(gpu_pod("fits", gpus=3))["request"]
    too_big = make_review(gpu_pod("too-big", gpus=4))["request"]
    assert check_quota(fits, [cap], cache).allowed
    message = check_quota(too_big, [cap], cache).decision().message
    assert message.startswith(
        'GPU quota "ml-team" exceeded in namespace ml-team: this pod needs 4 GPUs, 5 of 8'
    )
