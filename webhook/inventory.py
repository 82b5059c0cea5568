"""Cluster objects from a file (`--inventory FILE`), for `review`, `test`, `quota status` and `serve`.

Accepts what people have at hand: multi-document YAML, a `kind: List` (what
`kubectl get -o yaml` prints), a typed list such as PodList from the API, or the
same as JSON. The objects feed the same cache the watches feed, and Gatekeeper's
`data.inventory` layout for Rego referential rules. DRA objects (claims, templates, classes,
slices) may be in resource.k8s.io/v1, v1beta2 or v1beta1: the cache is fed them as v1, while
Gatekeeper sees them as written.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson
import yaml

from webhook import yaml_errors
from webhook.cache import NAMESPACES, NODES, PODS, ClusterCache
from webhook.dra import versions
from webhook.dra.index import GROUP, KIND_OF
from webhook.errors import ConfigError
from webhook.types import KubeObject

CLUSTER_SCOPED = frozenset(
    {
        "APIService",
        "CertificateSigningRequest",
        "ClusterRole",
        "ClusterRoleBinding",
        "CSIDriver",
        "CSINode",
        "CustomResourceDefinition",
        "DeviceClass",
        "DeviceTaintRule",
        "IngressClass",
        "MutatingWebhookConfiguration",
        "Namespace",
        "Node",
        "PersistentVolume",
        "PriorityClass",
        "ResourceSlice",
        "RuntimeClass",
        "StorageClass",
        "ValidatingAdmissionPolicy",
        "ValidatingAdmissionPolicyBinding",
        "ValidatingWebhookConfiguration",
        "VolumeAttachment",
    }
)
MAX_BYTES = 256 * 1024 * 1024


@dataclass(frozen=True)
class Inventory:
    source: str
    objects: tuple[KubeObject, ...] = ()

    def of_kind(self, kind: str) -> list[KubeObject]:
        return [obj for obj in self.objects if obj["kind"] == kind]

    def feed(self, cache: ClusterCache) -> None:
        """Make the cache hold exactly these pods, namespaces and DRA objects, as a synced, static
        state. The DRA objects come first: pods resolve their claims against them."""
        # Without a file nothing is known of claims: they are not counted, rather than all refused.
        known = self is not EMPTY
        if known:
            for dra_kind, objects in self.dra_lists().items():
                cache.replace(dra_kind, objects)
        cache.replace(PODS, self.of_kind("Pod"))
        cache.replace(NAMESPACES, self.of_kind("Namespace"))
        cache.replace(NODES, self.of_kind("Node"))
        cache.mark_static(dra=known)

    def dra_lists(self) -> dict[str, list[KubeObject]]:
        """The DRA objects by resource (`resourceclaims`, ...), each as resource.k8s.io/v1 holds it
        whatever version the file wrote it in."""
        lists: dict[str, list[KubeObject]] = {resource: [] for resource in KIND_OF.values()}
        for obj in self.objects:
            resource = KIND_OF.get(obj["kind"])
            if resource is not None and _is_dra(obj):
                lists[resource].append(dict(versions.as_v1(obj)))
        return lists

    def gatekeeper(self) -> dict[str, Any]:
        """Gatekeeper's data.inventory layout; see gatekeeper_inventory()."""
        return gatekeeper_inventory(self.objects)


EMPTY = Inventory("empty")


def _is_dra(obj: KubeObject) -> bool:
    return str(obj.get("apiVersion", "")).startswith(GROUP + "/")


def load_inventory(path: Path) -> Inventory:
    try:
        if path.stat().st_size > MAX_BYTES:
            raise ConfigError(f"inventory {path} is larger than {MAX_BYTES // 2**20} MiB")
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise ConfigError(f"cannot read inventory {path}: {e}") from e
    return parse_inventory(text, str(path))


def parse_inventory(text: str, source: str) -> Inventory:
    objects: list[KubeObject] = []
    for index, document in enumerate(_documents(text, source), start=1):
        for obj in _flatten(document, f"{source}: document {index}"):
            objects.append(_checked(obj, f"{source}: document {index}"))
    return Inventory(source, tuple(objects))


def cache_from(inventory: Inventory | None, **options: Any) -> ClusterCache:
    """A synced, static cache of the inventory's pods and namespaces (empty without one)."""
    cache = ClusterCache(**options)
    (inventory or EMPTY).feed(cache)
    return cache


def gatekeeper_inventory(objects: Iterable[KubeObject]) -> dict[str, Any]:
    """namespace[ns][groupVersion][kind][name] and cluster[groupVersion][kind][name], as Gatekeeper syncs."""
    namespaced: dict[str, Any] = {}
    cluster: dict[str, Any] = {}
    for obj in objects:
        meta = obj["metadata"]
        if obj["kind"] in CLUSTER_SCOPED:
            tree = cluster
        else:
            tree = namespaced.setdefault(meta["namespace"], {})
        tree.setdefault(obj["apiVersion"], {}).setdefault(obj["kind"], {})[meta["name"]] = obj
    return {"namespace": namespaced, "cluster": cluster}


def _documents(text: str, source: str) -> Iterator[Any]:
    if text.lstrip().startswith(("{", "[")):
        try:
            yield orjson.loads(text)
            return
        except orjson.JSONDecodeError:
            pass  # YAML flow style that looks like JSON; let the YAML parser say what is wrong
    try:
        yield from yaml.safe_load_all(text)
    except yaml.YAMLError as e:
        trouble = yaml_errors.describe(e, text)
        where = f":{trouble.line}" if trouble.line else ""
        raise ConfigError(f"{source}{where}: not valid YAML: {trouble.reason}") from e


def _flatten(document: Any, where: str) -> Iterator[KubeObject]:
    if document is None:
        return
    if isinstance(document, list):
        for item in document:
            yield from _flatten(item, where)
        return
    if not isinstance(document, dict):
        raise ConfigError(f"{where}: expected a Kubernetes object, got {type(document).__name__}")
    kind = document.get("kind")
    if isinstance(kind, str) and kind.endswith("List") and isinstance(document.get("items"), list):
        item_kind = kind[: -len("List")]
        for item in document["items"]:
            if isinstance(item, dict) and item_kind and "kind" not in item:
                item = {"apiVersion": document.get("apiVersion", "v1"), "kind": item_kind, **item}
            yield from _flatten(item, where)
        return
    yield document


def _checked(obj: KubeObject, where: str) -> KubeObject:
    kind, api_version, meta = obj.get("kind"), obj.get("apiVersion"), obj.get("metadata")
    if not isinstance(kind, str) or not kind:
        raise ConfigError(f"{where}: an object without a kind")
    if not isinstance(api_version, str) or not api_version:
        raise ConfigError(f"{where}: {kind} without an apiVersion")
    if not isinstance(meta, dict) or not isinstance(meta.get("name"), str) or not meta["name"]:
        raise ConfigError(f"{where}: {kind} without metadata.name")
    if kind in CLUSTER_SCOPED or (isinstance(meta.get("namespace"), str) and meta["namespace"]):
        return obj
    placed = copy.copy(obj)
    placed["metadata"] = {**meta, "namespace": "default"}
    return placed
