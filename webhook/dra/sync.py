"""What to write so that the ResourceClaimTemplates `mode: dra` needs exist. Pure: plans, writes nothing.

`wanted` comes from templates.needed() for every namespace we manage; `existing` is every
template the watch cache holds. A template's spec is immutable in resource.k8s.io/v1, so:
- a wanted template that is absent is created;
- one of ours (label app.kubernetes.io/managed-by=gpu-webhook) with the wanted spec whose labels
  or annotations drifted gets them back;
- one of ours under a wanted name with another spec is deleted, to be created afresh next pass;
- one under a wanted name that is not ours and asks for something else is left alone and reported
  as a conflict: someone else holds the name, and pods pointed at it get what it says;
- one of ours that no policy wants any more is first marked with the time it became unwanted, and
  deleted once that is GRACE_SECONDS old, so that a pod admitted just before a policy change still
  gets its claim made from it. A marked template that is wanted again is unmarked.
Namespaces we do not manage (the exempt ones) are never touched.

Specs are compared exactly: the API server defaults only `allocationMode` (ExactCount) and
`count` (1) in a device request (pkg/apis/resource/v1 defaults), and ours sets both.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from webhook.dra.index import Key
from webhook.dra.templates import MANAGED_BY, OURS
from webhook.types import KubeObject

UNWANTED_SINCE = "gpuwebhook.io/unwanted-since"
GRACE_SECONDS = 600.0

Action = Literal["create", "update", "delete"]


@dataclass(frozen=True)
class Write:
    action: Action
    namespace: str
    name: str
    reason: str
    body: dict[str, Any] | None = None  # create and update
    resource_version: str = ""  # update and delete: the version the plan was made from

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"


@dataclass(frozen=True)
class Plan:
    writes: tuple[Write, ...]
    conflicts: tuple[str, ...]  # namespace/name of wanted names held by someone else's template


def plan(
    wanted: Mapping[Key, dict[str, Any]],
    existing: Mapping[Key, KubeObject],
    managed: Callable[[str], bool],
    now: dt.datetime,
    grace_seconds: float = GRACE_SECONDS,
) -> Plan:
    writes: list[Write] = []
    conflicts: list[str] = []
    for key, want in sorted(wanted.items()):
        have = existing.get(key)
        if have is None:
            writes.append(Write("create", *key, "needed by a dra policy", body=want))
        elif not ours(have):
            if have.get("spec") != want["spec"]:
                conflicts.append(f"{key[0]}/{key[1]}")
        elif have.get("spec") != want["spec"]:
            writes.append(Write("delete", *key, "spec differs from the policy's", None, _version(have)))
        elif _drifted(have, want):
            writes.append(Write("update", *key, "labels or annotations restored", _restored(have, want)))
    for key, have in sorted(existing.items()):
        if key in wanted or not ours(have) or not managed(key[0]):
            continue
        writes.extend(_retire(key, have, now, grace_seconds))
    return Plan(tuple(writes), tuple(conflicts))


def ours(obj: KubeObject) -> bool:
    return _meta(obj, "labels").get(MANAGED_BY) == OURS


def _retire(key: Key, have: KubeObject, now: dt.datetime, grace_seconds: float) -> list[Write]:
    since = _parse_time(_meta(have, "annotations").get(UNWANTED_SINCE))
    if since is None:
        marked = _with_annotations(have, {UNWANTED_SINCE: _format_time(now)})
        return [Write("update", *key, "no policy needs it: marked for deletion", marked)]
    if (now - since).total_seconds() >= grace_seconds:
        return [Write("delete", *key, "no policy has needed it for the grace period", None, _version(have))]
    return []


def _drifted(have: KubeObject, want: dict[str, Any]) -> bool:
    labels, annotations = _meta(have, "labels"), _meta(have, "annotations")
    if UNWANTED_SINCE in annotations:
        return True
    return any(labels.get(k) != v for k, v in want["metadata"]["labels"].items()) or any(
        annotations.get(k) != v for k, v in want["metadata"]["annotations"].items()
    )


def _restored(have: KubeObject, want: dict[str, Any]) -> dict[str, Any]:
    """`have` with our labels and annotations put back and the unwanted mark dropped; other keys kept."""
    restored = _with_annotations(have, want["metadata"]["annotations"])
    meta = restored["metadata"]
    meta["labels"] = {**_meta(have, "labels"), **want["metadata"]["labels"]}
    meta["annotations"].pop(UNWANTED_SINCE, None)
    return restored


def _with_annotations(have: KubeObject, added: Mapping[str, str]) -> dict[str, Any]:
    """An update body: `have`'s identity, resourceVersion and spec, its metadata with `added`."""
    meta = have.get("metadata")
    meta = meta if isinstance(meta, dict) else {}
    body_meta = {k: meta[k] for k in ("name", "namespace", "resourceVersion") if k in meta}
    body_meta["labels"] = dict(_meta(have, "labels"))
    body_meta["annotations"] = {**_meta(have, "annotations"), **added}
    return {
        "apiVersion": have.get("apiVersion"),
        "kind": have.get("kind"),
        "metadata": body_meta,
        "spec": have.get("spec"),
    }


def _meta(obj: KubeObject, field: str) -> Mapping[str, Any]:
    meta = obj.get("metadata")
    value = meta.get(field) if isinstance(meta, dict) else None
    return value if isinstance(value, dict) else {}


def _version(obj: KubeObject) -> str:
    meta = obj.get("metadata")
    return str(meta.get("resourceVersion") or "") if isinstance(meta, dict) else ""


def _format_time(when: dt.datetime) -> str:
    return when.astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _parse_time(text: object) -> dt.datetime | None:
    if not isinstance(text, str):
        return None
    try:
        parsed = dt.datetime.strptime(text, "%Y-%m-%dT%H:%M:%SZ")
    except ValueError:
        return None
    return parsed.replace(tzinfo=dt.UTC)
