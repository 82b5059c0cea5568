"""The bindings of a policy that act on a request, each with the params it selects. Pure.

Both kinds of policy walk their bindings the same way (kubernetes/kubernetes
staging/src/k8s.io/apiserver/pkg/admission/plugin/policy/generic/policy_dispatcher.go): a
binding whose matchResources leaves the request out is passed over, and a binding whose params
cannot be collected is a configuration failure that the policy's failurePolicy decides.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping

from webhook.native.model import Binding, Bound
from webhook.native.params import ParamError, ParamSource, collect
from webhook.native.rules import matches
from webhook.types import AdmissionRequest, KubeObject

Selected = tuple[KubeObject | None, ...] | ParamError


def in_force(
    bound: Bound, request: AdmissionRequest, labels: Mapping[str, str], params: ParamSource | None
) -> Iterator[tuple[Binding, Selected]]:
    """Each binding that matches the request, with its params or why they could not be found."""
    namespace = request.get("namespace") or ""
    for binding in bound.bindings:
        if binding.match is not None and not matches(binding.match, request, labels):
            continue
        try:
            yield binding, collect(bound.policy, binding, namespace, params)
        except ParamError as e:
            yield binding, e
