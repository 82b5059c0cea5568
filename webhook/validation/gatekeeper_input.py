"""What a Gatekeeper template sees: `input.review` and `data.inventory`, built as Gatekeeper does. Pure."""

from __future__ import annotations

import copy
from collections.abc import Iterable, Mapping
from typing import Any

from webhook.validation.constraint_match import Place, Subject

Inventory = Mapping[str, Any]
_EMPTY_GVK = {"group": "", "version": "", "kind": ""}
_EMPTY_GVR = {"group": "", "version": "", "resource": ""}


def review_of_request(request: Mapping[str, Any]) -> dict[str, Any]:
    """`input.review` for a live AdmissionRequest; on DELETE the old object stands in for the object."""
    review = dict(request)
    if review.get("operation") == "DELETE" and review.get("object") is None:
        review["object"] = review.get("oldObject")
    return review


def review_of_object(obj: Mapping[str, Any]) -> dict[str, Any]:
    """The review Gatekeeper's gator builds for a bare manifest: no operation, no user."""
    group, version = split_api_version(str(obj.get("apiVersion", "")))
    metadata = obj.get("metadata") or {}
    review: dict[str, Any] = {
        "uid": "",
        "kind": {"group": group, "version": version, "kind": str(obj.get("kind", ""))},
        "resource": dict(_EMPTY_GVR),
        "operation": "",
        "userInfo": {},
        "object": copy.deepcopy(dict(obj)),
        "oldObject": None,
    }
    for key in ("name", "namespace"):
        if metadata.get(key):
            review[key] = metadata[key]
    return review


def review_of_admission_review(doc: Mapping[str, Any]) -> dict[str, Any]:
    """The review gator builds from an AdmissionReview file: absent fields take Go's zero values."""
    request = doc.get("request")
    if not isinstance(request, Mapping):
        raise ValueError("AdmissionReview has no request")
    if request.get("object") is None and request.get("oldObject") is None:
        raise ValueError("AdmissionRequest has neither object nor oldObject")
    review: dict[str, Any] = {
        "uid": "",
        "kind": dict(_EMPTY_GVK),
        "resource": dict(_EMPTY_GVR),
        "operation": "",
        "userInfo": {},
        "object": None,
        "oldObject": None,
    }
    review.update(copy.deepcopy(dict(request)))
    return review_of_request(review)


def split_api_version(api_version: str) -> tuple[str, str]:
    group, _, version = api_version.rpartition("/")
    return group, version


def inventory_of(objects: Iterable[Any]) -> dict[str, Any]:
    """`data.inventory` in Gatekeeper's layout: cluster[gv][kind][name], namespace[ns][gv][kind][name].

    The objects may come from a policy test suite's files: one that is not an object, or has no
    name, is left out rather than failing the suite's run."""
    inventory: dict[str, Any] = {"cluster": {}, "namespace": {}}
    for obj in objects:
        if not isinstance(obj, Mapping):
            continue
        metadata = _mapping(obj.get("metadata"))
        gv, kind, name = str(obj.get("apiVersion", "")), str(obj.get("kind", "")), metadata.get("name")
        if not isinstance(name, str) or not name:
            continue
        namespace = metadata.get("namespace")
        placed = isinstance(namespace, str) and namespace
        root = inventory["namespace"].setdefault(namespace, {}) if placed else inventory["cluster"]
        root.setdefault(gv, {}).setdefault(kind, {})[name] = obj
    return inventory


def namespace_labels(inventory: Inventory | None, namespace: str) -> Mapping[str, str] | None:
    """Labels of a namespace from the inventory, or None when it is not there. Only string
    values count: a selector compares strings, and an inventory file is untrusted input."""
    cluster = _mapping(_mapping(inventory).get("cluster"))
    found = _mapping(_mapping(cluster.get("v1")).get("Namespace")).get(namespace)
    if not isinstance(found, Mapping):
        return None
    labels = _mapping(_mapping(found.get("metadata")).get("labels"))
    return {k: v for k, v in labels.items() if isinstance(k, str) and isinstance(v, str)}


def _mapping(value: Any) -> Mapping[str, Any]:
    """Untrusted JSON: a field that should hold an object may hold anything."""
    return value if isinstance(value, Mapping) else {}


def subjects(review: Mapping[str, Any], inventory: Inventory | None) -> list[Subject]:
    """What matching sees: the object and the old object, whichever are present."""
    return [subject_of(obj, place_of(obj, review), review, inventory) for obj in matched_objects(review)]


def matched_objects(review: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """The objects matching reads: the object and the old object, whichever are present."""
    return [obj for obj in (review.get("object"), review.get("oldObject")) if isinstance(obj, Mapping)]


def place_of(obj: Mapping[str, Any], review: Mapping[str, Any]) -> Place:
    """Where one of `matched_objects(review)` is, read without its labels."""
    metadata = _mapping(obj.get("metadata"))
    if "apiVersion" in obj or "kind" in obj:
        group, _ = split_api_version(str(obj.get("apiVersion", "")))
        kind = str(obj.get("kind", ""))
    else:
        requested = review.get("kind") or {}
        group, kind = str(requested.get("group", "")), str(requested.get("kind", ""))
    is_namespace = kind == "Namespace" and group == ""
    namespace = (
        _name(metadata, review)
        if is_namespace
        else str(metadata.get("namespace") or review.get("namespace") or "")
    )
    return Place(group, kind, namespace, is_namespace)


def subject_of(
    obj: Mapping[str, Any], place: Place, review: Mapping[str, Any], inventory: Inventory | None
) -> Subject:
    """All that matching reads of the object at `place` (which `place_of` gave)."""
    metadata = _mapping(obj.get("metadata"))
    namespace, is_namespace = place.namespace, place.is_namespace
    return Subject(
        group=place.group,
        kind=place.kind,
        name=_name(metadata, review),
        generate_name=str(metadata.get("generateName") or ""),
        namespace=namespace,
        labels={k: v for k, v in _mapping(metadata.get("labels")).items() if isinstance(v, str)},
        is_namespace=is_namespace,
        namespace_labels=namespace_labels(inventory, namespace) if namespace and not is_namespace else None,
    )


def _name(metadata: Mapping[str, Any], review: Mapping[str, Any]) -> str:
    return str(metadata.get("name") or review.get("name") or "")
