"""A small kube-apiserver over HTTP, following the real wire format, for the real `kubernetes` client.

Covers what gpu-webhook uses: Pods, Namespaces, Nodes and the workload kinds the scan reads
(ReplicationControllers, apps/v1 Deployments, StatefulSets, DaemonSets, ReplicaSets,
batch/v1 Jobs and CronJobs): list with resourceVersion and limit/continue paging, and
watch streaming JSON lines with ADDED, MODIFIED, DELETED, BOOKMARK and an ERROR
carrying a 410 Status. resource.k8s.io (ResourceClaims, ResourceClaimTemplates, DeviceClasses,
ResourceSlices) is served in one version, v1 unless the fake is started with v1beta2 or v1beta1
(or None: not at all), as a cluster that has only that one: the other versions' paths are 404
and discovery (`/apis/resource.k8s.io`) lists only it; objects are stored and served in it.
Events are created and merge-patched, with the API server's check that a legacy Event's
involvedObject.namespace is its own (pkg/apis/core/validation/events.go).
ConfigMaps, coordination.k8s.io/v1 Leases, ResourceClaimTemplates and the policy report
resources (wgpolicyk8s.io/v1alpha2 and openreports.io/v1alpha1): get, create (409
AlreadyExists; 404 in a namespace that does not exist, for templates), and update with 409
Conflict on a stale resourceVersion; a Lease whose spec does not follow the API's types
(MicroTime, int32), and a template update that changes the spec or whose requests do not follow
the served version's layout, are refused with 422 as the API server would. Templates can be
deleted, with a resourceVersion precondition (409 when it is stale). One resourceVersion counter
spans every resource, as etcd's revision does.

Test controls: create/update/delete objects, pause watch delivery, expire watches
(history compacted, so resuming needs a relist), send bookmarks, an outage (every
request 503, open watches cut), resources refused with 403 as RBAC would, and a request log
to await what the client did.
"""

from __future__ import annotations

import base64
import contextlib
import copy
import re
import socket
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import orjson

from tests.support.patience import PATIENCE
from tests.support.quiethttp import QuietHandler, QuietHTTPServer

TOKEN = "fake-token"
DRA_GROUP = "resource.k8s.io"
# resource -> (group/version, kind), resource.k8s.io at v1; see FakeKube(dra_version=...).
RESOURCES = {
    "pods": ("v1", "Pod"),
    "namespaces": ("v1", "Namespace"),
    "nodes": ("v1", "Node"),
    "configmaps": ("v1", "ConfigMap"),
    "replicationcontrollers": ("v1", "ReplicationController"),
    "deployments": ("apps/v1", "Deployment"),
    "statefulsets": ("apps/v1", "StatefulSet"),
    "daemonsets": ("apps/v1", "DaemonSet"),
    "replicasets": ("apps/v1", "ReplicaSet"),
    "jobs": ("batch/v1", "Job"),
    "cronjobs": ("batch/v1", "CronJob"),
    "leases": ("coordination.k8s.io/v1", "Lease"),
    "events": ("v1", "Event"),
    "resourceclaims": ("resource.k8s.io/v1", "ResourceClaim"),
    "resourceclaimtemplates": ("resource.k8s.io/v1", "ResourceClaimTemplate"),
    "deviceclasses": ("resource.k8s.io/v1", "DeviceClass"),
    "resourceslices": ("resource.k8s.io/v1", "ResourceSlice"),
    # The policy report CRDs, as a cluster with wgpolicyk8s.io and openreports.io installed.
    "policyreports": ("wgpolicyk8s.io/v1alpha2", "PolicyReport"),
    "clusterpolicyreports": ("wgpolicyk8s.io/v1alpha2", "ClusterPolicyReport"),
    "reports": ("openreports.io/v1alpha1", "Report"),
    "clusterreports": ("openreports.io/v1alpha1", "ClusterReport"),
}
KINDS = {resource: kind for resource, (_, kind) in RESOURCES.items()}
CLUSTER_SCOPED = {
    "namespaces",
    "nodes",
    "deviceclasses",
    "resourceslices",
    "clusterpolicyreports",
    "clusterreports",
}
NAMESPACED = set(RESOURCES) - CLUSTER_SCOPED
REPORTS = {"policyreports", "clusterpolicyreports", "reports", "clusterreports"}
DRA_VERSIONS = ("v1", "v1beta2", "v1beta1")
WRITABLE = {"configmaps", "leases", "resourceclaimtemplates", "events", *REPORTS}
PATCHABLE = {"events"}  # by JSON merge patch (RFC 7386), as --emit-denial-events raises counts
DELETABLE = {"resourceclaimtemplates"}
IMMUTABLE_SPEC = {"resourceclaimtemplates"}  # resource.k8s.io/v1: a template's spec cannot change
_ROUTE = re.compile(
    r"^/(?:api/(?P<core>v1)|apis/(?P<group>[a-z0-9.-]+)/(?P<version>v[0-9a-z]+))"
    r"(?:/namespaces/(?P<ns>[^/]+))?/(?P<resource>[a-z]+)(?:/(?P<name>[^/]+))?$"
)
_NAMESPACE_ITEM = re.compile(r"^/api/v1/namespaces/(?P<name>[^/]+)$")
# metav1.MicroTime on the wire: RFC 3339 with exactly six fractional digits.
_MICRO_TIME = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{6}(Z|[+-]\d{2}:\d{2})$")
Key = tuple[str, str, str]  # (resource, namespace, name)


@dataclass(frozen=True)
class Event:
    rv: int
    resource: str
    type: str
    obj: dict[str, Any]


@dataclass
class _Cursor:
    """Where one watch stream stands."""

    since: int
    deadline: float
    bookmarks: bool
    generation: int
    seen_bookmarks: int

    def remaining(self) -> float:
        return max(0.0, self.deadline - time.monotonic())


def served_resources(dra_version: str | None) -> dict[str, tuple[str, str]]:
    """RESOURCES with resource.k8s.io at `dra_version`, or without it (None)."""
    if dra_version is not None and dra_version not in DRA_VERSIONS:
        raise ValueError(f"resource.k8s.io/{dra_version} is not a version the fake serves")
    served: dict[str, tuple[str, str]] = {}
    for resource, (group_version, kind) in RESOURCES.items():
        if not group_version.startswith(DRA_GROUP + "/"):
            served[resource] = (group_version, kind)
        elif dra_version is not None:
            served[resource] = (f"{DRA_GROUP}/{dra_version}", kind)
    return served


class FakeKube:
    def __init__(self, dra_version: str | None = "v1") -> None:
        self.dra_version = dra_version
        self.resources = served_resources(dra_version)
        self._cond = threading.Condition()
        self._rv = 0
        self._objects: dict[Key, dict[str, Any]] = {}
        self._history: list[Event] = []
        self._compacted_at = 0
        self._snapshots: dict[str, tuple[int, list[dict[str, Any]]]] = {}
        self._watch_generation = 0
        self._paused = False
        self._down = False
        self._closing = False
        self._bookmarks = 0
        self._open_watches = 0
        self._expire_next_continue = False
        self._lists_open = threading.Event()
        self._lists_open.set()
        self.requests: list[str] = []
        self.forbidden: set[str] = set()  # resources our service account may not read (403), as RBAC
        self.conflicts = 0
        self._server = QuietHTTPServer(("127.0.0.1", 0), _handler(self))
        self._thread = threading.Thread(target=self._server.serve_forever, args=(0.02,), daemon=True)

    # Lifecycle ---------------------------------------------------------------------------

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def start(self) -> FakeKube:
        self._thread.start()
        return self

    def stop(self) -> None:
        with self._cond:
            self._closing = True
            self._cond.notify_all()
        self._server.shutdown()
        self._server.server_close()

    def write_kubeconfig(self, path: Path, token: str = TOKEN) -> Path:
        path.write_text(
            orjson.dumps(
                {
                    "apiVersion": "v1",
                    "kind": "Config",
                    "clusters": [{"name": "fake", "cluster": {"server": self.url}}],
                    "users": [{"name": "tester", "user": {"token": token}}],
                    "contexts": [{"name": "fake", "context": {"cluster": "fake", "user": "tester"}}],
                    "current-context": "fake",
                }
            ).decode()
        )
        return path

    # Objects -----------------------------------------------------------------------------

    def create(self, resource: str, obj: dict[str, Any]) -> dict[str, Any]:
        with self._cond:
            key = _key(resource, obj)
            if key in self._objects:
                raise KeyError(f"{key} exists")
            stored = copy.deepcopy(obj)
            stored.setdefault("metadata", {}).setdefault("uid", str(uuid.uuid4()))
            stored["metadata"].setdefault("creationTimestamp", time.strftime("%Y-%m-%dT%H:%M:%SZ"))
            return self._commit(resource, "ADDED", key, stored)

    def update(self, resource: str, obj: dict[str, Any]) -> dict[str, Any]:
        with self._cond:
            key = _key(resource, obj)
            if key not in self._objects:
                raise KeyError(f"{key} not found")
            stored = copy.deepcopy(obj)
            stored["metadata"]["uid"] = self._objects[key]["metadata"]["uid"]
            return self._commit(resource, "MODIFIED", key, stored)

    def delete(self, resource: str, namespace: str, name: str) -> None:
        with self._cond:
            key = (resource, namespace if resource in NAMESPACED else "", name)
            self._commit(resource, "DELETED", key, self._objects[key])

    def get(self, resource: str, namespace: str, name: str) -> dict[str, Any] | None:
        with self._cond:
            found = self._objects.get((resource, namespace if resource in NAMESPACED else "", name))
            return copy.deepcopy(found) if found else None

    def _commit(self, resource: str, kind: str, key: Key, obj: dict[str, Any]) -> dict[str, Any]:
        self._rv += 1
        obj = {"apiVersion": self.resources[resource][0], "kind": KINDS[resource], **obj}
        obj["metadata"] = {**obj["metadata"], "resourceVersion": str(self._rv)}
        if kind == "DELETED":
            self._objects.pop(key)
        else:
            self._objects[key] = obj
        self._history.append(Event(self._rv, resource, kind, obj))
        self._cond.notify_all()
        return copy.deepcopy(obj)

    # Test controls -----------------------------------------------------------------------

    @contextlib.contextmanager
    def watches_paused(self) -> Iterator[None]:
        """Hold back watch delivery, as a watch that fell behind does."""
        with self._cond:
            self._paused = True
        try:
            yield
        finally:
            with self._cond:
                self._paused = False
                self._cond.notify_all()

    def expire_watches(self) -> None:
        """Compact the history and end every open watch with ERROR 410 Expired."""
        with self._cond:
            self._compacted_at = self._rv
            self._history.clear()
            self._watch_generation += 1
            self._paused = False
            self._cond.notify_all()

    @contextlib.contextmanager
    def lists_held(self) -> Iterator[None]:
        """Pod and Namespace lists wait until the block ends: a cache that cannot sync yet."""
        self._lists_open.clear()
        try:
            yield
        finally:
            self._lists_open.set()

    def wait_lists_open(self) -> None:
        self._lists_open.wait(timeout=60)

    def expire_next_continue(self) -> None:
        """The next paged list request finds its continue token expired (410), as after etcd compaction."""
        with self._cond:
            self._expire_next_continue = True

    def bookmark(self) -> None:
        with self._cond:
            self._bookmarks += 1
            self._cond.notify_all()

    @contextlib.contextmanager
    def outage(self) -> Iterator[None]:
        """Every request fails with 503 and open watches are cut mid-stream, until the block ends."""
        with self._cond:
            self._down = True
            self._cond.notify_all()
        try:
            yield
        finally:
            with self._cond:
                self._down = False
                self._cond.notify_all()

    def wait_for_requests(self, predicate: Callable[[list[str]], bool], timeout: float = PATIENCE) -> None:
        with self._cond:
            if not self._cond.wait_for(lambda: predicate(self.requests), timeout):
                raise AssertionError(
                    "the client never made the awaited requests:\n" + "\n".join(self.requests)
                )

    def wait_for_watches(self, count: int, timeout: float = PATIENCE) -> None:
        """Until `count` watch streams are open and waiting for events."""
        with self._cond:
            if not self._cond.wait_for(lambda: self._open_watches >= count, timeout):
                raise AssertionError(f"only {self._open_watches} watches open, expected {count}")

    def count(self, pattern: str) -> int:
        with self._cond:
            return sum(1 for line in self.requests if re.search(pattern, line))

    # Serving (called from handler threads) -------------------------------------------------

    def log_request(self, line: str) -> None:
        with self._cond:
            self.requests.append(line)
            self._cond.notify_all()

    @property
    def down(self) -> bool:
        with self._cond:
            return self._down

    def list_objects(
        self, resource: str, namespace: str, query: dict[str, str]
    ) -> tuple[int, dict[str, Any]]:
        with self._cond:
            token = query.get("continue")
            if token and self._expire_next_continue:
                self._expire_next_continue = False
                self._snapshots.pop(token, None)
            if token:
                if token not in self._snapshots:
                    return 410, _status(410, "Expired", "The provided continue parameter is too old")
                rv, items = self._snapshots.pop(token)
                if rv < self._compacted_at:
                    return 410, _status(410, "Expired", "The provided continue parameter is too old")
            else:
                rv, items = self._rv, self._items(resource, namespace)
        limit = int(query.get("limit") or 0)
        page, rest = (items[:limit], items[limit:]) if limit else (items, [])
        metadata: dict[str, Any] = {"resourceVersion": str(rv)}
        if rest:
            next_token = base64.b64encode(uuid.uuid4().bytes).decode()
            with self._cond:
                self._snapshots[next_token] = (rv, rest)
            metadata["continue"] = next_token
        items_out = [{k: v for k, v in item.items() if k not in ("kind", "apiVersion")} for item in page]
        group_version, kind = self.resources[resource]
        return 200, {
            "kind": kind + "List",
            "apiVersion": group_version,
            "metadata": metadata,
            "items": items_out,
        }

    def _items(self, resource: str, namespace: str) -> list[dict[str, Any]]:
        return [
            copy.deepcopy(obj)
            for (r, ns, _), obj in sorted(self._objects.items())
            if r == resource and (not namespace or ns == namespace)
        ]

    def watch(self, resource: str, namespace: str, query: dict[str, str]) -> Iterator[dict[str, Any] | None]:
        """Watch events as dicts; None means the stream must be cut without a clean end.

        Decisions are made under the lock; events are yielded outside it, so a slow
        client never holds up the rest of the fake.
        """
        with self._cond:
            cursor = _Cursor(
                since=int(query.get("resourceVersion") or 0),
                deadline=time.monotonic() + float(query.get("timeoutSeconds") or 60),
                bookmarks=query.get("allowWatchBookmarks") == "true",
                generation=self._watch_generation,
                seen_bookmarks=self._bookmarks,
            )
            expired = cursor.since < self._compacted_at
            initial: list[dict[str, Any]] = []
            if not expired and not cursor.since:
                cursor.since = self._rv
                initial = [{"type": "ADDED", "object": item} for item in self._items(resource, namespace)]
            if not expired:
                self._open_watches += 1
                self._cond.notify_all()
        if expired:
            yield _expired(cursor.since, self._compacted_at)
            return
        try:
            yield from initial
            yield from self._follow(resource, namespace, cursor)
        finally:
            with self._cond:
                self._open_watches -= 1

    def _follow(self, resource: str, namespace: str, cursor: _Cursor) -> Iterator[dict[str, Any] | None]:
        while True:
            with self._cond:
                self._cond.wait_for(lambda: self._wakes(cursor), timeout=cursor.remaining())
                if self._closing or cursor.remaining() <= 0:
                    return
                ending: dict[str, Any] | None = None
                cut = self._down
                if not cut and cursor.generation != self._watch_generation:
                    ending = _expired(cursor.since, self._compacted_at)
                events = [] if self._paused or cut else [e for e in self._history if e.rv > cursor.since]
                marks = []
                if cursor.bookmarks and cursor.seen_bookmarks != self._bookmarks:
                    cursor.seen_bookmarks = self._bookmarks
                    marks = [_bookmark(self.resources[resource], self._rv)]
            if cut:
                yield None
                return
            if ending is not None:
                yield ending
                return
            for event in events:
                cursor.since = event.rv
                if event.resource == resource and _in(event.obj, namespace):
                    yield {"type": event.type, "object": copy.deepcopy(event.obj)}
            yield from marks

    def _wakes(self, cursor: _Cursor) -> bool:
        return (
            self._closing
            or self._down
            or cursor.generation != self._watch_generation
            or (cursor.bookmarks and cursor.seen_bookmarks != self._bookmarks)
            or (not self._paused and bool(self._history) and self._history[-1].rv > cursor.since)
            or cursor.remaining() <= 0
        )

    def read(self, resource: str, namespace: str, name: str) -> tuple[int, dict[str, Any]]:
        found = self.get(resource, namespace, name)
        if found is None:
            return 404, _status(404, "NotFound", f'{resource} "{name}" not found')
        return 200, found

    def write(
        self, method: str, resource: str, namespace: str, name: str, body: dict[str, Any]
    ) -> tuple[int, dict[str, Any]]:
        metadata = body.setdefault("metadata", {})
        if resource in NAMESPACED:
            metadata["namespace"] = namespace
        invalid = _invalid(self.resources, resource, body)
        if invalid:
            return 422, _status(422, "Invalid", f'{KINDS[resource]} "{name}" is invalid: {invalid}')
        with self._cond:
            key = _key(resource, body)
            if resource in DELETABLE and ("namespaces", "", namespace) not in self._objects:
                return 404, _status(404, "NotFound", f'namespaces "{namespace}" not found')
            if method == "POST":
                if key in self._objects:
                    self.conflicts += 1
                    return 409, _status(409, "AlreadyExists", f'{resource} "{key[2]}" already exists')
                body["metadata"].pop("resourceVersion", None)
                return 201, self.create(resource, body)
            current = self._objects.get(key)
            if current is None or key[2] != name:
                return 404, _status(404, "NotFound", f'{resource} "{name}" not found')
            expected = body["metadata"].get("resourceVersion")
            if expected and expected != current["metadata"]["resourceVersion"]:
                self.conflicts += 1
                message = (
                    f'Operation cannot be fulfilled on {resource} "{name}": the object has been modified; '
                    "please apply your changes to the latest version and try again"
                )
                return 409, _status(409, "Conflict", message)
            if resource in IMMUTABLE_SPEC and body.get("spec") != current.get("spec"):
                return 422, _status(
                    422, "Invalid", f'{KINDS[resource]} "{name}" is invalid: spec: field is immutable'
                )
            return 200, self.update(resource, body)

    def merge_patch(self, resource: str, namespace: str, name: str, patch: Any) -> tuple[int, dict[str, Any]]:
        with self._cond:
            current = self.get(resource, namespace, name)
            if current is None:
                return 404, _status(404, "NotFound", f'{resource} "{name}" not found')
            merged = _merged(current, patch)
            invalid = _invalid(self.resources, resource, merged)
            if invalid:
                return 422, _status(422, "Invalid", f'{KINDS[resource]} "{name}" is invalid: {invalid}')
            return 200, self.update(resource, merged)

    def remove(
        self, resource: str, namespace: str, name: str, body: dict[str, Any] | None
    ) -> tuple[int, dict[str, Any]]:
        """DELETE, honouring DeleteOptions' resourceVersion precondition."""
        with self._cond:
            current = self.get(resource, namespace, name)
            if current is None:
                return 404, _status(404, "NotFound", f'{resource} "{name}" not found')
            expected = ((body or {}).get("preconditions") or {}).get("resourceVersion")
            if expected and expected != current["metadata"]["resourceVersion"]:
                self.conflicts += 1
                message = (
                    f'Operation cannot be fulfilled on {resource} "{name}": Precondition failed: '
                    f"ResourceVersion in precondition: {expected}, "
                    f"ResourceVersion in object meta: {current['metadata']['resourceVersion']}"
                )
                return 409, _status(409, "Conflict", message)
            self.delete(resource, namespace, name)
            return 200, {**_status(200, "Success", "deleted"), "status": "Success"}


def _merged(target: Any, patch: Any) -> Any:
    """RFC 7386: a mapping merges key by key, null removes, anything else replaces."""
    if not isinstance(patch, dict):
        return patch
    merged = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            merged.pop(key, None)
        else:
            merged[key] = _merged(merged.get(key), value)
    return merged


def _key(resource: str, obj: dict[str, Any]) -> Key:
    meta = obj.get("metadata") or {}
    namespace = meta.get("namespace", "") if resource in NAMESPACED else ""
    return (resource, namespace, meta["name"])


def _status(code: int, reason: str, message: str) -> dict[str, Any]:
    return {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": reason,
        "code": code,
    }


def _served(resources: dict[str, tuple[str, str]], route: re.Match[str]) -> bool:
    """The path names a resource at its own group/version, namespaced only when it is namespaced."""
    resource = route["resource"]
    if resource not in resources:
        return False
    group_version = route["core"] or f"{route['group']}/{route['version']}"
    if route["ns"] and resource not in NAMESPACED:
        return False
    return resources[resource][0] == group_version


def _api_group(dra_version: str) -> dict[str, Any]:
    """GET /apis/resource.k8s.io: an APIGroup (apimachinery pkg/apis/meta/v1 types.go) of one version."""
    version = {"groupVersion": f"{DRA_GROUP}/{dra_version}", "version": dra_version}
    return {
        "kind": "APIGroup",
        "apiVersion": "v1",
        "name": DRA_GROUP,
        "versions": [version],
        "preferredVersion": version,
    }


def _invalid(resources: dict[str, tuple[str, str]], resource: str, body: dict[str, Any]) -> str | None:
    """What the API server's validation would refuse in a written object (Leases: the spec's types;
    templates: their requests' layout)."""
    group_version, kind = resources[resource]
    if body.get("apiVersion", group_version) != group_version or body.get("kind", kind) != kind:
        return f"expected apiVersion {group_version} and kind {kind}"
    if resource == "resourceclaimtemplates":
        return _invalid_requests(group_version, body)
    if resource == "events":
        return _invalid_event(body)
    if resource != "leases":
        return None
    spec = body.get("spec")
    if not isinstance(spec, dict):
        return "spec: Required value"
    checks: dict[str, Callable[[Any], bool]] = {
        "holderIdentity": lambda v: isinstance(v, str),
        "leaseDurationSeconds": lambda v: type(v) is int and 0 < v < 2**31,
        "leaseTransitions": lambda v: type(v) is int and 0 <= v < 2**31,
        "acquireTime": lambda v: isinstance(v, str) and bool(_MICRO_TIME.match(v)),
        "renewTime": lambda v: isinstance(v, str) and bool(_MICRO_TIME.match(v)),
    }
    for field, valid in checks.items():
        if spec.get(field) is not None and not valid(spec[field]):
            return f"spec.{field}: Invalid value: {spec[field]!r}"
    return None


def _invalid_event(body: dict[str, Any]) -> str | None:
    """k8s pkg/apis/core/validation/events.go legacyValidateEvent: without eventTime, the involved
    object's namespace must be the Event's ("" or default for a cluster-scoped one)."""
    involved = (body.get("involvedObject") or {}).get("namespace") or ""
    namespace = body["metadata"].get("namespace") or ""
    if body.get("eventTime"):
        return None
    if involved != namespace and not (involved == "" and namespace in ("", "default")):
        return f"involvedObject.namespace: Invalid value: {involved!r}: does not match event.namespace"
    return None


def _invalid_requests(group_version: str, body: dict[str, Any]) -> str | None:
    """k8s.io/api resource/v1beta1 types.go DeviceRequest holds deviceClassName (or firstAvailable)
    itself; v1beta2 and v1 hold it in `exactly`. A field of the other layout is unknown to the
    decoder, which drops it, and the request then lacks what it needs."""
    devices = _field(_field(_field(body, "spec"), "spec"), "devices")
    flat = group_version == f"{DRA_GROUP}/v1beta1"
    for index, request in enumerate(devices.get("requests") or []):
        where = f"spec.spec.devices.requests[{index}]"
        if not isinstance(request, dict):
            return f"{where}: Invalid value"
        if flat and "exactly" in request:
            return f'{where}: unknown field "exactly"'
        if not flat and "deviceClassName" in request:
            return f'{where}: unknown field "deviceClassName"'
        held = (
            request.get("deviceClassName") if flat else (request.get("exactly") or {}).get("deviceClassName")
        )
        if not held and not request.get("firstAvailable"):
            return f"{where}: Required value: exactly one of exactly or firstAvailable is required"
    return None


def _field(obj: dict[str, Any], name: str) -> dict[str, Any]:
    value = obj.get(name)
    return value if isinstance(value, dict) else {}


def _in(obj: dict[str, Any], namespace: str) -> bool:
    return not namespace or obj["metadata"].get("namespace") == namespace


def _bookmark(served: tuple[str, str], rv: int) -> dict[str, Any]:
    group_version, kind = served
    mark = {"kind": kind, "apiVersion": group_version, "metadata": {"resourceVersion": str(rv)}}
    return {"type": "BOOKMARK", "object": mark}


def _expired(since: int, oldest: int) -> dict[str, Any]:
    return {
        "type": "ERROR",
        "object": _status(410, "Expired", f"too old resource version: {since} ({oldest})"),
    }


def _handler(api: FakeKube) -> type[QuietHandler]:
    class Handler(QuietHandler):
        protocol_version = "HTTP/1.1"

        def setup(self) -> None:
            super().setup()
            # Headers and body go out in separate writes; without this, Nagle's algorithm and
            # delayed ACKs add 40 ms to every request.
            self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

        def do_GET(self) -> None:
            self._serve("GET")

        def do_POST(self) -> None:
            self._serve("POST")

        def do_PUT(self) -> None:
            self._serve("PUT")

        def do_DELETE(self) -> None:
            self._serve("DELETE")

        def do_PATCH(self) -> None:
            self._serve("PATCH")

        def _serve(self, method: str) -> None:
            parts = urlsplit(self.path)
            query = {k: v[-1] for k, v in parse_qs(parts.query).items()}
            body = self._body()
            api.log_request(f"{method} {self.path}")
            if self.headers.get("Authorization") != f"Bearer {TOKEN}":
                return self._json(401, _status(401, "Unauthorized", "Unauthorized"))
            if api.down:
                return self._json(
                    503, _status(503, "ServiceUnavailable", "the server is currently unavailable")
                )
            item = _NAMESPACE_ITEM.match(parts.path)
            if item is not None:
                return self._json(*api.read("namespaces", "", item["name"]))
            if parts.path.rstrip("/") == f"/apis/{DRA_GROUP}" and method == "GET" and api.dra_version:
                return self._json(200, _api_group(api.dra_version))
            route = _ROUTE.match(parts.path)
            if route is None or not _served(api.resources, route):
                return self._json(404, _status(404, "NotFound", "the server could not find the resource"))
            resource, namespace, name = route["resource"], route["ns"] or "", route["name"]
            if resource in api.forbidden:
                return self._json(403, _status(403, "Forbidden", f"{resource} is forbidden"))
            if method == "GET" and name:
                return self._json(*api.read(resource, namespace, name))
            if method == "GET" and query.get("watch") in ("true", "1"):
                return self._stream(api.watch(resource, namespace, query))
            if method == "GET":
                if resource in ("pods", "namespaces"):
                    api.wait_lists_open()
                return self._json(*api.list_objects(resource, namespace, query))
            if method == "PATCH" and resource in PATCHABLE and name:
                if self.headers.get("Content-Type") != "application/merge-patch+json":
                    return self._json(415, _status(415, "UnsupportedMediaType", "not a merge patch"))
                return self._json(*api.merge_patch(resource, namespace, name, body))
            if method == "DELETE" and resource in DELETABLE and name:
                return self._json(*api.remove(resource, namespace, name, body))
            if resource not in WRITABLE or not isinstance(body, dict):
                return self._json(405, _status(405, "MethodNotAllowed", "not supported by the fake"))
            return self._json(*api.write(method, resource, namespace, name or "", body))

        def _body(self) -> Any:
            length = int(self.headers.get("Content-Length") or 0)
            return orjson.loads(self.rfile.read(length)) if length else None

        def _json(self, status: int, document: dict[str, Any]) -> None:
            self.send_body(status, orjson.dumps(document))

        def _stream(self, events: Iterator[dict[str, Any] | None]) -> None:
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            try:
                for event in events:
                    if event is None:
                        self.close_connection = True
                        return
                    line = orjson.dumps(event) + b"\n"
                    self.wfile.write(b"%x\r\n%s\r\n" % (len(line), line))
                    self.wfile.flush()
                self.wfile.write(b"0\r\n\r\n")
            except (BrokenPipeError, ConnectionResetError):
                self.close_connection = True

    return Handler
