"""Whether a request falls under a policy's matchConstraints or a binding's matchResources, as
kube-apiserver decides (kubernetes/kubernetes staging/src/k8s.io/apiserver/pkg/admission/plugin/
policy/matching/matching.go and plugin/webhook/predicates/{rules,namespace,object}/)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from webhook.native.model import MatchResources, ResourceRule
from webhook.types import AdmissionRequest

NAMESPACES = ("", "namespaces")  # (group, resource) of the Namespace object


def matches(match: MatchResources, request: AdmissionRequest, namespace_labels: Mapping[str, str]) -> bool:
    """Namespace selector, object selector, then the rules: excluded first; no rules match all
    (a binding's matchResources may leave them out; a policy's may not)."""
    if not _namespace_selected(match, request, namespace_labels):
        return False
    if not _object_selected(match, request):
        return False
    if _any_rule(match.exclude_resource_rules, request, match.equivalent):
        return False
    return not match.resource_rules or _any_rule(match.resource_rules, request, match.equivalent)


def _namespace_selected(match: MatchResources, request: AdmissionRequest, labels: Mapping[str, str]) -> bool:
    selector = match.namespace_selector
    if not selector.match_labels and not selector.requirements:
        return True
    if is_namespace(request):  # a Namespace is judged by its own labels
        return selector.matches(_labels(request.get("object")) or _labels(request.get("oldObject")))
    if not request.get("namespace"):  # cluster-scoped objects are not in any namespace
        return True
    return selector.matches(labels)


def _object_selected(match: MatchResources, request: AdmissionRequest) -> bool:
    selector = match.object_selector
    if not selector.match_labels and not selector.requirements:
        return True
    return any(
        isinstance(obj, dict) and selector.matches(_labels(obj))
        for obj in (request.get("object"), request.get("oldObject"))
    )


def _labels(obj: Any) -> Mapping[str, str]:
    metadata = obj.get("metadata") if isinstance(obj, dict) else None
    labels = metadata.get("labels") if isinstance(metadata, dict) else None
    return labels if isinstance(labels, dict) else {}


def _resource(request: AdmissionRequest) -> dict[str, str]:
    resource: Any = request.get("resource")
    return {str(k): str(v) for k, v in resource.items()} if isinstance(resource, dict) else {}


def is_namespace(request: AdmissionRequest) -> bool:
    resource = _resource(request)
    return (resource.get("group", ""), resource.get("resource", "")) == NAMESPACES and not request.get(
        "subResource"
    )


def _any_rule(rules: tuple[ResourceRule, ...], request: AdmissionRequest, equivalent: bool) -> bool:
    """With matchPolicy Equivalent, a rule naming the resource in another version of its group
    matches too: the request is the same object, converted (the equivalence kube-apiserver knows
    between groups, such as extensions and apps, is not modelled: those groups are long gone)."""
    return any(_rule_matches(rule, request, exact_version=True) for rule in rules) or (
        equivalent and any(_rule_matches(rule, request, exact_version=False) for rule in rules)
    )


def _rule_matches(rule: ResourceRule, request: AdmissionRequest, *, exact_version: bool) -> bool:
    resource = _resource(request)
    version_ok = not exact_version or _listed(rule.api_versions, resource.get("version", ""))
    return (
        _listed(rule.operations, request.get("operation", ""))
        and _listed(rule.api_groups, resource.get("group", ""))
        and version_ok
        and _resource_listed(rule.resources, resource.get("resource", ""), request.get("subResource") or "")
        and _in_scope(rule.scope, request)
        and (not rule.resource_names or (request.get("name") or "") in rule.resource_names)
    )


def _listed(values: tuple[str, ...], value: str) -> bool:
    return "*" in values or value in values


def _resource_listed(resources: tuple[str, ...], resource: str, subresource: str) -> bool:
    """'pods' is the pods themselves, 'pods/status' a subresource, 'pods/*' every subresource,
    '*' every resource (not their subresources), '*/*' everything."""
    for entry in resources:
        name, _, sub = entry.partition("/")
        if (name == "*" or name == resource) and (sub == "*" or sub == subresource):
            return True
    return False


def _in_scope(scope: str, request: AdmissionRequest) -> bool:
    if scope == "*":
        return True
    cluster = is_namespace(request) or not request.get("namespace")
    return cluster if scope == "Cluster" else not cluster
