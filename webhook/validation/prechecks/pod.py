"""The pod a precheck may reason about: a Pod being created, in the shape the API server sends."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from webhook.validation.prechecks.facts import OBJECT, PodFacts, pod_facts

CONTAINER_FIELDS = ("containers", "initContainers", "ephemeralContainers")


@dataclass(frozen=True)
class PodCreate:
    spec: Mapping[str, Any]
    metadata: Mapping[str, Any]
    # Every container of every kind, as (field, container), in the order Rego iterates them.
    containers: tuple[tuple[str, Mapping[str, Any]], ...]
    # input.gpu, the webhook's GPU count of the pod (webhook.accounting.GpuCount.as_input).
    gpu: Mapping[str, Any]
    # input.review.userInfo, for rules that exempt users or groups.
    user: Mapping[str, Any]
    # What the prechecks read of the pod, read once for all of them.
    facts: PodFacts


def pod_create(review: Mapping[str, Any], gpu: Mapping[str, Any]) -> PodCreate | None:
    """The pod of a review that creates one, or None for anything else (updates, workloads, odd shapes).

    None sends every template to Rego, so this only accepts what the prechecks were written
    for: a CREATE (or gator's offline review, whose operation is ""), no old object, and an
    object whose spec, metadata and container lists hold the JSON types Kubernetes gives them.
    """
    operation = review.get("operation")
    if operation not in ("CREATE", "") or review.get("oldObject") is not None:
        return None
    obj = review.get("object")
    if not isinstance(obj, OBJECT) or obj.get("kind") != "Pod":
        return None
    spec, metadata = obj.get("spec"), obj.get("metadata", {})
    if not isinstance(spec, OBJECT) or not isinstance(metadata, OBJECT):
        return None
    containers: list[tuple[str, Mapping[str, Any]]] = []
    for field in CONTAINER_FIELDS:
        listed = spec.get(field, [])
        if not isinstance(listed, list):
            return None
        for container in listed:
            if not isinstance(container, OBJECT):
                return None
            containers.append((field, container))
    user = review.get("userInfo")
    every = tuple(containers)
    facts = pod_facts(spec, metadata, every)
    return PodCreate(spec, metadata, every, gpu, user if isinstance(user, OBJECT) else {}, facts)
