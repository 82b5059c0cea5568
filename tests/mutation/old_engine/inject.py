"""Placement injection: scheduler, tolerations, node affinity, priority and runtime class, labels.

The user's choices win unless the policy says `force`; merges never drop what the user wrote.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from tests.mutation.old_engine.sharing import MODE_SCHEDULERS
from webhook import gpu
from webhook.accounting.target import PodTarget
from webhook.fields import mapping, sequence
from webhook.mutation.context import MutationContext

REQUIRED = "requiredDuringSchedulingIgnoredDuringExecution"
PREFERRED = "preferredDuringSchedulingIgnoredDuringExecution"
_TOLERATION_FIELDS = ("key", "operator", "value", "effect", "tolerationSeconds")


def scheduler(target: PodTarget, context: MutationContext) -> bool:
    inject = context.policy.inject
    wanted = inject.scheduler_name or MODE_SCHEDULERS.get(context.mode)
    current = target.spec.get("schedulerName")
    if wanted is None or current == wanted:
        return False
    if current not in (None, "", gpu.DEFAULT_SCHEDULER) and not inject.force:
        context.warn(f"schedulerName {current!r} kept; policy {context.policy.name} would set {wanted!r}")
        return False
    target.spec["schedulerName"] = wanted
    return True


def tolerations(target: PodTarget, context: MutationContext) -> bool:
    existing: list[dict[str, Any]] = target.spec.get("tolerations") or []
    added = [dict(t) for t in context.policy.inject.tolerations if not any(_covers(e, t) for e in existing)]
    if added:
        target.spec["tolerations"] = existing + added
    return bool(added)


def _covers(existing: Mapping[str, Any], wanted: Mapping[str, Any]) -> bool:
    """Whether `existing` already tolerates everything `wanted` would."""
    have, want = _normal(existing), _normal(wanted)
    if have == want:
        return True
    same_key = have["key"] == want["key"] or (have["key"] == "" and have["operator"] == "Exists")
    same_value = have["operator"] == "Exists" or (
        want["operator"] == "Equal" and have["value"] == want["value"]
    )
    same_effect = have["effect"] == "" or have["effect"] == want["effect"]
    forever = have["tolerationSeconds"] is None
    return same_key and same_value and same_effect and forever


def _normal(toleration: Mapping[str, Any]) -> dict[str, Any]:
    normal = {k: toleration.get(k) for k in _TOLERATION_FIELDS}
    normal["operator"] = normal["operator"] or "Equal"
    normal["key"], normal["value"], normal["effect"] = (normal[k] or "" for k in ("key", "value", "effect"))
    return normal


def required_affinity(target: PodTarget, context: MutationContext) -> bool:
    """AND the policy's requirements into every nodeSelectorTerm; never replace the user's terms."""
    wanted = [dict(r) for r in (*context.policy.inject.required, *context.required)]
    if not wanted:
        return False
    node = mapping(mapping(target.spec, "affinity"), "nodeAffinity")
    terms: list[dict[str, Any]] = sequence(mapping(node, REQUIRED), "nodeSelectorTerms")
    if not terms:
        terms.append({})
    changed = False
    for term in terms:
        expressions = sequence(term, "matchExpressions")
        missing = [r for r in wanted if r not in expressions]
        expressions.extend(missing)
        changed |= bool(missing)
    return changed


def preferred_affinity(target: PodTarget, context: MutationContext) -> bool:
    wanted = [
        {"weight": p.weight, "preference": {"matchExpressions": [dict(p.requirement)]}}
        for p in context.policy.inject.preferred
    ]
    if not wanted:
        return False
    node = mapping(mapping(target.spec, "affinity"), "nodeAffinity")
    existing: list[dict[str, Any]] = sequence(node, PREFERRED)
    missing = [w for w in wanted if w not in existing]
    existing.extend(missing)
    return bool(missing)


def priority_class(target: PodTarget, context: MutationContext) -> bool:
    # The Priority plugin resolved spec.priority before webhooks ran; clearing it lets the
    # plugin resolve the new class when the apiserver reinvokes admission.
    return _set_class(
        target,
        context,
        "priorityClassName",
        context.policy.inject.priority_class_name,
        derived=("priority", "preemptionPolicy"),
    )


def runtime_class(target: PodTarget, context: MutationContext) -> bool:
    # Likewise the RuntimeClass plugin derives spec.overhead from the class.
    return _set_class(
        target, context, "runtimeClassName", context.policy.inject.runtime_class_name, derived=("overhead",)
    )


def _set_class(
    target: PodTarget, context: MutationContext, field: str, wanted: str | None, derived: tuple[str, ...]
) -> bool:
    current = target.spec.get(field)
    if wanted is None or current == wanted or (current and not context.policy.inject.force):
        return False
    target.spec[field] = wanted
    for key in derived:
        target.spec.pop(key, None)
    return True


def add_labels(target: PodTarget, context: MutationContext) -> bool:
    return _merge(target.metadata, "labels", context.policy.inject.labels, context.policy.inject.force)


def add_annotations(target: PodTarget, context: MutationContext) -> bool:
    return _merge(
        target.metadata, "annotations", context.policy.inject.annotations, context.policy.inject.force
    )


def _merge(metadata: dict[str, Any], key: str, wanted: Mapping[str, str], force: bool) -> bool:
    if not wanted:
        return False
    current: dict[str, str] = mapping(metadata, key)
    changes = {k: v for k, v in wanted.items() if (k not in current) or (force and current[k] != v)}
    current.update(changes)
    return bool(changes)
