"""The param objects a binding's paramRef selects, as kube-apiserver collects them
(kubernetes/kubernetes staging/src/k8s.io/apiserver/pkg/admission/plugin/policy/generic/
policy_dispatcher.go, CollectParams)."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from webhook.native.model import Binding, Policy
from webhook.types import KubeObject

# Every stored object of one apiVersion and kind (an inventory file offline, the watch cache
# when serving); None: that kind is not known here.
ParamSource = Callable[[str, str], Sequence[KubeObject] | None]
NO_PARAM: tuple[KubeObject | None, ...] = (None,)


class ParamError(Exception):
    """The binding is misconfigured for this request: the policy's failurePolicy decides."""


def collect(
    policy: Policy, binding: Binding, namespace: str, source: ParamSource | None
) -> tuple[KubeObject | None, ...]:
    """The params to evaluate the policy with, once each; (None,) when it takes none; () when
    none is found and the binding allows that."""
    kind, ref = policy.param_kind, binding.param_ref
    if (
        kind is None or ref is None
    ):  # a policy with a paramKind and a binding without paramRef: params is null
        return NO_PARAM
    stored = source(kind.api_version, kind.kind) if source is not None else None
    if stored is None:
        raise ParamError(f"paramKind kind `{kind.api_version}, Kind={kind.kind}` not known")
    namespaced = bool(ref.namespace) or any(_namespace(obj) for obj in stored)
    where = ref.namespace or namespace
    if namespaced and not where:
        raise ParamError(
            "cannot use namespaced paramRef in policy binding that matches cluster-scoped resources"
        )
    found = [obj for obj in stored if not namespaced or _namespace(obj) == where]
    if ref.name:
        found = [obj for obj in found if _name(obj) == ref.name]
    elif ref.selector is not None:
        found = [obj for obj in found if ref.selector.matches(_labels(obj))]
    if not found and ref.deny_when_missing:
        raise ParamError("no params found for policy binding with `Deny` parameterNotFoundAction")
    return tuple(sorted(found, key=_name))


def _metadata(obj: KubeObject) -> dict[str, Any]:
    metadata = obj.get("metadata")
    return metadata if isinstance(metadata, dict) else {}


def _namespace(obj: KubeObject) -> str:
    return str(_metadata(obj).get("namespace") or "")


def _name(obj: KubeObject) -> str:
    return str(_metadata(obj).get("name") or "")


def _labels(obj: KubeObject) -> dict[str, str]:
    labels = _metadata(obj).get("labels")
    return labels if isinstance(labels, dict) else {}


def from_objects(objects: Sequence[KubeObject]) -> ParamSource:
    """A source over a fixed set of objects (an inventory): a kind it holds none of has none."""
    by_kind: dict[tuple[str, str], list[KubeObject]] = {}
    for obj in objects:
        by_kind.setdefault((str(obj.get("apiVersion")), str(obj.get("kind"))), []).append(obj)

    def lookup(api_version: str, kind: str) -> Sequence[KubeObject] | None:
        return by_kind.get((api_version, kind), [])

    return lookup


def from_layout(layout: Callable[[], Mapping[str, Any]]) -> ParamSource:
    """A source over Gatekeeper's data.inventory layout (namespace[ns][apiVersion][kind][name],
    cluster[apiVersion][kind][name]), read when a param is first needed."""

    def lookup(api_version: str, kind: str) -> Sequence[KubeObject] | None:
        tree = layout()
        found: list[KubeObject] = list(tree.get("cluster", {}).get(api_version, {}).get(kind, {}).values())
        for namespaced in tree.get("namespace", {}).values():
            found += namespaced.get(api_version, {}).get(kind, {}).values()
        return found

    return lookup
