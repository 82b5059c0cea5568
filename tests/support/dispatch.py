"""kube-apiserver's admission dispatch, for tests: which of our webhooks a request reaches, and
what is stored.

Follows k8s.io/apiserver/pkg/admission/plugin/webhook: a webhook is called when one of its
rules matches the operation, group, version and resource (subresources spelled `pods/x`), its
namespaceSelector matches the labels of the request's namespace (for a Namespace, its own),
its objectSelector matches the object or the old object, and every matchCondition is true.
Mutating webhooks run first, in order, each seeing the object as the one before left it;
then every validating webhook sees the final object. A condition that fails to evaluate
rejects the request under failurePolicy Fail and skips the webhook under Ignore.

The webhooks are answered by a `Caller`: review() in-process, or a real server over HTTPS.
"""

from __future__ import annotations

import base64
import contextlib
import copy
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import jsonpatch
import orjson
import yaml

from tests.support.cel import CelError, CelProcess

Caller = Callable[[str, dict[str, Any]], dict[str, Any]]
"""(path, AdmissionReview) -> the AdmissionReview's `response`."""

KINDS = {
    "pods": ("", "Pod"),
    "replicationcontrollers": ("", "ReplicationController"),
    "podtemplates": ("", "PodTemplate"),
    "namespaces": ("", "Namespace"),
    "deployments": ("apps", "Deployment"),
    "statefulsets": ("apps", "StatefulSet"),
    "daemonsets": ("apps", "DaemonSet"),
    "replicasets": ("apps", "ReplicaSet"),
    "jobs": ("batch", "Job"),
    "cronjobs": ("batch", "CronJob"),
    "resourceclaims": ("resource.k8s.io", "ResourceClaim"),
    "resourceclaimtemplates": ("resource.k8s.io", "ResourceClaimTemplate"),
}
CLUSTER_SCOPED = {"namespaces"}
# Subresources whose requests carry another kind than their resource's: a pods/binding CREATE sends
# the v1 Binding (kubernetes/kubernetes pkg/registry/core/pod/storage/storage.go, BindingREST).
SUBRESOURCE_KINDS = {("pods", "binding"): ("", "Binding")}


@dataclass(frozen=True)
class Request:
    operation: str
    object: dict[str, Any] | None
    old_object: dict[str, Any] | None = None
    resource: str = "pods"
    sub_resource: str = ""
    username: str = "alice"
    groups: tuple[str, ...] = ("system:authenticated",)
    namespace_labels: Mapping[str, str] = field(default_factory=dict)

    @property
    def namespace(self) -> str:
        source = self.object or self.old_object or {}
        metadata = source.get("metadata", {})
        if self.resource in CLUSTER_SCOPED:
            return str(metadata.get("name", ""))
        return str(metadata.get("namespace", "default"))

    def admission_request(self) -> dict[str, Any]:
        group, kind = SUBRESOURCE_KINDS.get((self.resource, self.sub_resource), KINDS[self.resource])
        version = "v1"
        gvk = {"group": group, "version": version, "kind": kind}
        gvr = {"group": KINDS[self.resource][0], "version": version, "resource": self.resource}
        source = self.object or self.old_object or {}
        request: dict[str, Any] = {
            "uid": str(uuid.uuid4()),
            "kind": gvk,
            "resource": gvr,
            "requestKind": gvk,
            "requestResource": gvr,
            "name": source.get("metadata", {}).get("name", ""),
            "namespace": self.namespace,
            "operation": self.operation,
            "userInfo": {"username": self.username, "groups": list(self.groups)},
            "object": self.object,
            "oldObject": self.old_object,
            "dryRun": False,
        }
        if self.sub_resource:
            request["subResource"] = self.sub_resource
        return request


@dataclass
class Admission:
    allowed: bool
    object: dict[str, Any] | None
    messages: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    called: list[str] = field(default_factory=list)

    @property
    def message(self) -> str:
        return "\n".join(self.messages)


class Dispatcher:
    def __init__(self, configurations: Sequence[Mapping[str, Any]], cel: CelProcess, call: Caller) -> None:
        self._mutating = _webhooks(configurations, "MutatingWebhookConfiguration")
        self._validating = _webhooks(configurations, "ValidatingWebhookConfiguration")
        self._cel = cel
        self._call = call

    def admit(self, request: Request) -> Admission:
        outcome = Admission(True, copy.deepcopy(request.object))
        for hook in self._mutating:
            current = Request(**{**request.__dict__, "object": outcome.object})
            if not self._reached(hook, current, outcome):
                continue
            response = self._ask(hook, current, outcome)
            if not outcome.allowed:
                return outcome
            if "patch" in response:
                operations = orjson.loads(base64.b64decode(response["patch"]))
                outcome.object = jsonpatch.apply_patch(outcome.object, operations, in_place=False)
        final = Request(**{**request.__dict__, "object": outcome.object})
        for hook in self._validating:
            if self._reached(hook, final, outcome):
                response = self._ask(hook, final, outcome)
                assert "patch" not in response, f"{hook['name']} returned a patch"
        return outcome

    def _reached(self, hook: Mapping[str, Any], request: Request, outcome: Admission) -> bool:
        if not any(_rule_matches(rule, request) for rule in hook.get("rules", [])):
            return False
        if not _selector_matches(hook.get("namespaceSelector"), _namespace_labels(request)):
            return False
        if not _object_selector_matches(hook.get("objectSelector"), request):
            return False
        try:
            return all(self._condition(c["expression"], request) for c in hook.get("matchConditions", []))
        except CelError as e:
            if hook.get("failurePolicy", "Fail") == "Fail":
                outcome.allowed = False
                outcome.messages.append(f"{hook['name']}: matchCondition error: {e}")
            return False

    def _condition(self, expression: str, request: Request) -> bool:
        # CEL's `request` is typed: a field the JSON omits reads as its zero value.
        admission = {"subResource": "", **request.admission_request()}
        activation = {
            "object": request.object,
            "oldObject": request.old_object,
            "request": admission,
        }
        return self._cel.evaluate(expression, activation)

    def _ask(self, hook: Mapping[str, Any], request: Request, outcome: Admission) -> dict[str, Any]:
        review = {
            "apiVersion": "admission.k8s.io/v1",
            "kind": "AdmissionReview",
            "request": request.admission_request(),
        }
        response = self._call(hook["clientConfig"]["service"]["path"], review)
        outcome.called.append(hook["name"])
        outcome.warnings += response.get("warnings", [])
        if not response["allowed"]:
            outcome.allowed = False
            outcome.messages.append(response.get("status", {}).get("message", ""))
        return response


def _webhooks(configurations: Sequence[Mapping[str, Any]], kind: str) -> list[Mapping[str, Any]]:
    return [hook for c in configurations if c.get("kind") == kind for hook in c.get("webhooks", [])]


def _rule_matches(rule: Mapping[str, Any], request: Request) -> bool:
    group, _ = KINDS[request.resource]
    wanted = f"{request.resource}/{request.sub_resource}" if request.sub_resource else request.resource
    resources = rule.get("resources", [])
    resource_ok = wanted in resources or ("*" in resources and not request.sub_resource)
    scope = rule.get("scope", "*")
    scoped = request.resource in CLUSTER_SCOPED
    scope_ok = scope == "*" or (scope == "Cluster") == scoped
    return (
        _listed(request.operation, rule.get("operations", []))
        and _listed(group, rule.get("apiGroups", []))
        and _listed("v1", rule.get("apiVersions", []))
        and resource_ok
        and scope_ok
    )


def _listed(value: str, allowed: Sequence[str]) -> bool:
    return value in allowed or "*" in allowed


def _namespace_labels(request: Request) -> dict[str, str]:
    """A Namespace's own CREATE or UPDATE is matched by the labels it is given; its subresources
    by the stored ones (k8s.io/apiserver pkg/admission/plugin/webhook/predicates/namespace/
    matcher.go, GetNamespaceLabels), which the old object stands for here."""
    if request.resource in CLUSTER_SCOPED:
        stored = request.sub_resource and request.old_object is not None
        source = (request.old_object if stored else request.object or request.old_object) or {}
        labels = dict(source.get("metadata", {}).get("labels", {}) or {})
    else:
        labels = dict(request.namespace_labels)
    labels.setdefault("kubernetes.io/metadata.name", request.namespace)
    return labels


def _object_selector_matches(selector: Mapping[str, Any] | None, request: Request) -> bool:
    if not selector:
        return True
    sources = [o for o in (request.object, request.old_object) if o is not None]
    return any(_selector_matches(selector, o.get("metadata", {}).get("labels", {}) or {}) for o in sources)


def _selector_matches(selector: Mapping[str, Any] | None, labels: Mapping[str, str]) -> bool:
    if not selector:
        return True
    if any(labels.get(k) != v for k, v in selector.get("matchLabels", {}).items()):
        return False
    return all(_expression_matches(e, labels) for e in selector.get("matchExpressions", []))


def _expression_matches(expression: Mapping[str, Any], labels: Mapping[str, str]) -> bool:
    key, operator, values = expression["key"], expression["operator"], expression.get("values", [])
    if operator == "In":
        return key in labels and labels[key] in values
    if operator == "NotIn":
        return key not in labels or labels[key] not in values
    if operator == "Exists":
        return key in labels
    if operator == "DoesNotExist":
        return key not in labels
    raise ValueError(f"unknown selector operator {operator}")


ENDPOINTS = {"/mutate": "mutate", "/validate": "validate", "/validate-advisory": "advisory"}


def in_process(deps: Any) -> Caller:
    """Answer as `gpu-webhook serve` would, through review() itself, without HTTP."""
    from webhook.admission import build_response, parse_review
    from webhook.review import review

    def call(path: str, document: dict[str, Any]) -> dict[str, Any]:
        request = parse_review(orjson.dumps(document))
        endpoint = ENDPOINTS[path]
        decision = review(request, endpoint, deps)  # type: ignore[arg-type]
        return dict(build_response(request["uid"], decision, endpoint))  # type: ignore[arg-type]

    return call


INSTALLED = [
    Path(__file__).resolve().parents[2] / "manifests" / "base" / name
    for name in ("mutatingwebhook.yaml", "validatingwebhook.yaml")
]


def installed_configurations() -> list[dict[str, Any]]:
    """The webhook configurations every install applies (manifests/base)."""
    return [yaml.safe_load(path.read_text()) for path in INSTALLED]


@contextlib.contextmanager
def installed_with_bundle() -> Iterator[Dispatcher]:
    """installed(), reviewing with the repository's bundled policies and nothing else."""
    from tests.support.policies import bundled_policies
    from webhook.review import ReviewDeps

    with installed(ReviewDeps(policies=bundled_policies())) as dispatcher:
        yield dispatcher


@contextlib.contextmanager
def installed(deps: Any) -> Iterator[Dispatcher]:
    """The installed configurations, dispatched by their own CEL, answered by review() with `deps`."""
    cel = CelProcess()
    try:
        yield Dispatcher(installed_configurations(), cel, in_process(deps))
    finally:
        cel.close()
