"""Run a policy's mutators over a copy of the object to a bounded fixed point; the diff is the patch.

As in Gatekeeper's mutation system, each mutator is small and idempotent; running
them until nothing changes (at most len(mutators) + 1 rounds) makes reinvocation
safe and turns a mutator that fights another into an error instead of a loop.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import orjson

from webhook.errors import EvaluationError
from webhook.mutation import hints, inject
from webhook.mutation.checkpoint import checkpoint
from webhook.mutation.context import MutationContext
from webhook.mutation.diff import diff
from webhook.mutation.fields import mapping
from webhook.mutation.needs import APPLIED, read_needs
from webhook.mutation.shape import check_pod_shape
from webhook.mutation.sharing import REWRITES
from webhook.mutation.target import PodTarget, pod_target
from webhook.policy.model import SharingPolicy
from webhook.types import KubeObject, PatchOperation
from webhook.utilization.capacity import CapacityView

Mutator = Callable[[PodTarget, MutationContext], bool]
PLACEMENT: tuple[Mutator, ...] = (
    inject.scheduler,
    inject.tolerations,
    inject.required_affinity,
    inject.preferred_affinity,
    hints.prefer_underutilized,
    inject.priority_class,
    inject.runtime_class,
    inject.add_labels,
    inject.add_annotations,
    checkpoint,
)


@dataclass(frozen=True)
class MutationResult:
    object: KubeObject
    patch: tuple[PatchOperation, ...]
    warnings: tuple[str, ...]
    mode: str


def select_policy(
    policies: Sequence[SharingPolicy],
    namespace: str,
    namespace_labels: Mapping[str, str],
    labels: Mapping[str, str],
) -> SharingPolicy | None:
    """The first matching policy; policies arrive sorted by precedence."""
    return next((p for p in policies if p.match.matches(namespace, namespace_labels, labels)), None)


def mutate_object(
    obj: KubeObject,
    policy: SharingPolicy,
    shared_names: tuple[str, ...] = (),
    placement: CapacityView | None = None,
    *,
    shape_checked: bool = False,
) -> MutationResult:
    """Apply `policy` to the pod in `obj`; AdmissionDenied or ShapeError if it cannot be admitted.

    `shape_checked`: the caller has already run check_pod_shape on `obj` (review() has).
    """
    mutated = clone(obj)
    target = pod_target(mutated)
    assert target is not None, "callers pass objects that hold a pod"
    if not shape_checked:
        check_pod_shape(target)
    needs = read_needs(target)
    opted_out = needs.opt_out and policy.sharing.allow_opt_out
    mode = "exclusive" if opted_out else policy.sharing.mode
    context = MutationContext(policy, needs, mode, shared_names, placement=placement)
    if needs.opt_out and not opted_out:
        context.warn(f"policy {policy.name} does not allow opting out of GPU sharing; sharing applied")
    run_to_fixed_point(target, _mutators(mode), context)
    patch = tuple(diff(obj, mutated))
    return MutationResult(mutated, patch, tuple(context.warnings), mode)


def _mutators(mode: str) -> tuple[Mutator, ...]:
    rewrite = REWRITES.get(mode)
    return (*((rewrite,) if rewrite else ()), *PLACEMENT, _stamp)


def _stamp(target: PodTarget, context: MutationContext) -> bool:
    """Record what was applied, for traceability (and so operators can see it with kubectl)."""
    value = f"{context.policy.stamp} mode={context.mode}"
    annotations = mapping(target.metadata, "annotations")
    if annotations.get(APPLIED) == value:
        return False
    annotations[APPLIED] = value
    return True


def run_to_fixed_point(target: PodTarget, mutators: Sequence[Mutator], context: MutationContext) -> int:
    """Rounds until no mutator changes anything; at most len(mutators) + 1."""
    for round_number in range(1, len(mutators) + 2):
        changes = [mutator(target, context) for mutator in mutators]
        if not any(changes):
            return round_number
    raise EvaluationError(f"mutation by policy {context.policy.name} did not converge")


def clone(obj: Any) -> Any:
    """A deep copy; the JSON round trip is several times faster than copy.deepcopy on pods."""
    try:
        return orjson.loads(orjson.dumps(obj))
    except TypeError:
        return copy.deepcopy(obj)
