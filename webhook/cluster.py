"""The only importer of `kubernetes`: connect, list and watch for the caches and the scan,
ConfigMaps for the ledger, Leases, the ResourceClaimTemplates that mode dra needs, the
Events of --emit-denial-events, and the policy reports the scan publishes.

DRA objects are read through the newest resource.k8s.io version the API serves (v1, else
v1beta2, else v1beta1), asked of discovery once per connection, and reach the caller as v1
whatever version they were read in: the cache, the index and the keeper know only v1.

Responses are read raw (`_preload_content=False`) and parsed with orjson: the
client's model objects would cost far more memory and CPU than the few fields the
cache keeps. Errors become our own: 410 ResourceExpired, 409 Conflict, anything else
ClusterError, each with a one-line reason and never a response body.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import os
import threading
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson
import urllib3
from kubernetes import client, config
from kubernetes.client.exceptions import ApiException
from kubernetes.config.config_exception import ConfigException
from kubernetes.watch.watch import iter_resp_lines

from webhook import lease
from webhook.cache import NAMESPACES, NODES, PODS
from webhook.dra import versions
from webhook.dra.index import CLAIMS, CLASSES, DRA_KINDS, GROUP, KIND_OF, SLICES, TEMPLATES
from webhook.errors import ClusterError, ConfigError, Conflict, ResourceExpired
from webhook.informer import Page
from webhook.quota.ledger import StoredLedger

DEFAULT_KUBECONFIG = Path("~/.kube/config")
CONNECT_SECONDS = 5.0
REQUEST_SECONDS = 30.0
WATCH_SLACK_SECONDS = 30.0
PAGE_SIZE = 500
LEDGER_LABELS = {"app.kubernetes.io/managed-by": "gpu-webhook", "gpuwebhook.io/ledger": "quota"}
# resource.k8s.io versions we can read, newest first: the first one the API serves is used.
DRA_VERSIONS = ("v1", "v1beta2", "v1beta1")
_DRA_APIS: dict[str, Callable[[Any], Any]] = {
    "v1": client.ResourceV1Api,
    "v1beta2": client.ResourceV1beta2Api,
    "v1beta1": client.ResourceV1beta1Api,
}
_DRA_KIND = {resource: kind for kind, resource in KIND_OF.items()}
_CHANGES = frozenset({"ADDED", "MODIFIED", "DELETED"})

log = logging.getLogger(__name__)


class Discovery:
    """What one connection learnt of the API once: the resource.k8s.io version it uses."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.dra_version: str | None = None


@dataclass(frozen=True)
class Connection:
    api_client: Any
    description: str
    discovery: Discovery = field(default_factory=Discovery, compare=False, repr=False)


def connect(kubeconfig: Path | None = None) -> Connection | None:
    """In-cluster service account first, then a kubeconfig; None when there is neither.

    A kubeconfig named explicitly must work; one found by default may be absent.
    """
    configuration = client.Configuration()
    try:
        config.load_incluster_config(client_configuration=configuration)  # type: ignore[no-untyped-call]
        return Connection(client.ApiClient(configuration), "in-cluster service account")
    except ConfigException:
        pass
    path = _kubeconfig_path(kubeconfig)
    if path is None:
        return None
    try:
        config.load_kube_config(  # type: ignore[no-untyped-call]
            config_file=str(path), client_configuration=configuration
        )
    except (ConfigException, OSError, ValueError, TypeError) as e:
        raise ConfigError(f"cannot use kubeconfig {path}: {_line(e)}") from e
    return Connection(client.ApiClient(configuration), f"kubeconfig {path}")


def server_version(connection: Connection) -> str | None:
    """The API server's gitVersion (e.g. v1.29.3), asked once at start-up; None if it will not say."""
    try:
        info = client.VersionApi(connection.api_client).get_code()
    except (ApiException, OSError, ValueError) as e:
        log.warning("cannot read the Kubernetes version: %s", _line(e))
        return None
    return str(info.git_version) if getattr(info, "git_version", None) else None


def _kubeconfig_path(explicit: Path | None) -> Path | None:
    if explicit is not None:
        if not explicit.is_file():
            raise ConfigError(f"kubeconfig {explicit} does not exist")
        return explicit
    candidates = [Path(p) for p in os.environ.get("KUBECONFIG", "").split(os.pathsep) if p]
    candidates.append(DEFAULT_KUBECONFIG.expanduser())
    return next((p for p in candidates if p.is_file()), None)


def dra_version(connection: Connection) -> str:
    """The resource.k8s.io version this connection reads and writes DRA objects in: the newest of
    DRA_VERSIONS that discovery lists, asked once (v1 when the group is not served at all: its
    lists then fail, as before 1.32). Raises ClusterError if discovery cannot be read: the next
    call asks again."""
    found = connection.discovery
    with found.lock:
        if found.dra_version is None:
            found.dra_version = _discover_dra(connection)
        return found.dra_version


def _discover_dra(connection: Connection) -> str:
    api = client.ResourceApi(connection.api_client)
    try:
        document = _document(f"discover {GROUP}", api.get_api_group)
    except _NotFound:
        log.info(
            f"{GROUP} is not served: DRA objects cannot be listed", extra={"via": connection.description}
        )
        return DRA_VERSIONS[0]
    listed = document.get("versions")
    served = (
        {str(v.get("version")) for v in listed if isinstance(v, dict)} if isinstance(listed, list) else set()
    )
    version = next((v for v in DRA_VERSIONS if v in served), DRA_VERSIONS[0])
    log.info(
        f"DRA objects are read and written through {GROUP}/{version}",
        extra={"served": sorted(served)[:10], "via": connection.description},
    )
    return version


def _dra_listers(api_client: Any, version: str) -> dict[str, Callable[..., Any]]:
    """Cluster-wide list (and watch) of each DRA resource, through one served version."""
    dra = _DRA_APIS[version](api_client)
    return {
        CLAIMS: dra.list_resource_claim_for_all_namespaces,
        TEMPLATES: dra.list_resource_claim_template_for_all_namespaces,
        CLASSES: dra.list_device_class,
        SLICES: dra.list_resource_slice,
    }


def _listers(api_client: Any) -> dict[str, Callable[..., Any]]:
    """Cluster-wide list (and watch) of each other resource we read, by its plural name."""
    core, apps = client.CoreV1Api(api_client), client.AppsV1Api(api_client)
    batch = client.BatchV1Api(api_client)
    return {
        PODS: core.list_pod_for_all_namespaces,
        NAMESPACES: core.list_namespace,
        NODES: core.list_node,
        "replicationcontrollers": core.list_replication_controller_for_all_namespaces,
        "deployments": apps.list_deployment_for_all_namespaces,
        "statefulsets": apps.list_stateful_set_for_all_namespaces,
        "daemonsets": apps.list_daemon_set_for_all_namespaces,
        "replicasets": apps.list_replica_set_for_all_namespaces,
        "jobs": batch.list_job_for_all_namespaces,
        "cronjobs": batch.list_cron_job_for_all_namespaces,
    }


class KubeSource:
    """One resource (pods, namespaces, a workload kind, a DRA kind), cluster-wide, as an informer
    Source. DRA objects come out as v1, from list pages and watch events alike."""

    def __init__(self, connection: Connection, kind: str, page_size: int = PAGE_SIZE) -> None:
        self.kind = kind
        self._connection = connection
        # A DRA kind's lister waits for discovery, which the first list asks (in the informer's thread).
        self._list: Callable[..., Any] | None = (
            None if kind in DRA_KINDS else _listers(connection.api_client)[kind]
        )
        self._version = ""
        self._page_size = page_size
        self._lock = threading.Lock()
        self._response: Any = None

    def list_pages(self) -> Iterator[Page]:
        token: str | None = None
        while True:
            document = _json(_call(f"list {self.kind}", functools.partial(self._page, token)))
            metadata = document.get("metadata") or {}
            items = document.get("items") or []
            objects = [self._as_v1(i) for i in items if isinstance(i, dict)]
            yield Page(objects, str(metadata.get("resourceVersion", "")))
            token = metadata.get("continue") or None
            if not token:
                return

    def _lister(self) -> Callable[..., Any]:
        if self._list is None:
            self._version = dra_version(self._connection)
            self._list = _dra_listers(self._connection.api_client, self._version)[self.kind]
        return self._list

    def _as_v1(self, obj: dict[str, Any]) -> dict[str, Any]:
        """A DRA object as v1 holds it; list items come without apiVersion and kind, so they are
        given those of the version read first."""
        if self.kind not in DRA_KINDS:
            return obj
        typed = {"apiVersion": f"{GROUP}/{self._version}", "kind": _DRA_KIND[self.kind], **obj}
        return dict(versions.as_v1(typed))

    def _page(self, token: str | None) -> Any:
        return self._lister()(
            limit=self._page_size,
            _continue=token,
            _preload_content=False,
            _request_timeout=(CONNECT_SECONDS, REQUEST_SECONDS),
        )

    def watch(self, resource_version: str, timeout_seconds: int) -> Iterator[dict[str, Any]]:
        """Open the watch now, so a refusal raises here; the events follow lazily."""
        response = _call(
            f"watch {self.kind}",
            lambda: self._lister()(
                watch=True,
                resource_version=resource_version or None,
                timeout_seconds=timeout_seconds,
                allow_watch_bookmarks=True,
                _preload_content=False,
                _request_timeout=(CONNECT_SECONDS, timeout_seconds + WATCH_SLACK_SECONDS),
            ),
        )
        with self._lock:
            self._response = response
        return self._events(response)

    def _events(self, response: Any) -> Iterator[dict[str, Any]]:
        complete = False
        try:
            for line in iter_resp_lines(response):  # type: ignore[no-untyped-call]
                if line:
                    yield self._converted(_event(line))
            complete = True
        except (urllib3.exceptions.HTTPError, OSError) as e:
            raise ClusterError(f"watch {self.kind} broke off: {_line(e)}") from e
        finally:
            with self._lock:
                self._response = None
            # A stream left half-read must not go back to the pool: the next request would read its rest.
            response.release_conn() if complete else response.close()

    def _converted(self, event: dict[str, Any]) -> dict[str, Any]:
        obj = event.get("object")
        if self.kind in DRA_KINDS and event.get("type") in _CHANGES and isinstance(obj, dict):
            return {**event, "object": self._as_v1(obj)}
        return event

    def interrupt(self) -> None:
        with self._lock:
            response = self._response
        if response is not None:
            with contextlib.suppress(Exception):  # the stream may be closing already
                response.shutdown()


class ConfigMapStore:
    """Ledger records as ConfigMaps in our own namespace (strict quota consistency)."""

    def __init__(self, connection: Connection, namespace: str) -> None:
        self._core = client.CoreV1Api(connection.api_client)
        self.namespace = namespace

    def read(self, name: str) -> StoredLedger | None:
        try:
            document = _document(
                f"read configmap {name}", self._core.read_namespaced_config_map, name, self.namespace
            )
        except _NotFound:
            return None
        data = document.get("data") or {}
        version = str((document.get("metadata") or {}).get("resourceVersion", ""))
        return StoredLedger({str(k): str(v) for k, v in data.items()}, version)

    def create(self, name: str, data: Mapping[str, str]) -> None:
        body = self._body(name, data, None)
        _document(f"create configmap {name}", self._core.create_namespaced_config_map, self.namespace, body)

    def replace(self, name: str, data: Mapping[str, str], resource_version: str) -> None:
        body = self._body(name, data, resource_version)
        _document(
            f"update configmap {name}", self._core.replace_namespaced_config_map, name, self.namespace, body
        )

    def _body(self, name: str, data: Mapping[str, str], resource_version: str | None) -> Any:
        metadata = client.V1ObjectMeta(
            name=name,
            namespace=self.namespace,
            labels=dict(LEDGER_LABELS),
            resource_version=resource_version or None,
        )
        return client.V1ConfigMap(api_version="v1", kind="ConfigMap", metadata=metadata, data=dict(data))


def lister(connection: Connection, page_size: int = PAGE_SIZE) -> Callable[[str], Iterator[Page]]:
    """Paged lists of any resource KubeSource knows: what the scan reads, one page at a time."""
    return lambda resource: KubeSource(connection, resource, page_size).list_pages()


class LeaseStore:
    """coordination.k8s.io/v1 Leases in our own namespace: the scan's leader election."""

    def __init__(self, connection: Connection, namespace: str) -> None:
        self._api = client.CoordinationV1Api(connection.api_client)
        self.namespace = namespace

    def read(self, name: str) -> lease.StoredLease | None:
        try:
            document = _document(f"read lease {name}", self._api.read_namespaced_lease, name, self.namespace)
        except _NotFound:
            return None
        return lease.from_wire(document)

    def create(self, name: str, spec: lease.LeaseSpec) -> lease.StoredLease:
        body: Any = lease.to_wire(name, self.namespace, spec, None)  # a dict: MicroTime as the API parses it
        return lease.from_wire(
            _document(f"create lease {name}", self._api.create_namespaced_lease, self.namespace, body)
        )

    def replace(self, name: str, spec: lease.LeaseSpec, resource_version: str) -> lease.StoredLease:
        body: Any = lease.to_wire(name, self.namespace, spec, resource_version)
        return lease.from_wire(
            _document(f"update lease {name}", self._api.replace_namespaced_lease, name, self.namespace, body)
        )


class EventStore:
    """core/v1 Events in our own namespace (--emit-denial-events): created, then their count patched."""

    def __init__(self, connection: Connection, namespace: str) -> None:
        self._core = client.CoreV1Api(connection.api_client)
        self.namespace = namespace

    def create(self, body: Mapping[str, Any]) -> None:
        name = str((body.get("metadata") or {}).get("name", ""))
        _document(f"create event {name}", self._core.create_namespaced_event, self.namespace, dict(body))

    def patch(self, name: str, body: Mapping[str, Any]) -> None:
        method = functools.partial(
            self._core.patch_namespaced_event, _content_type="application/merge-patch+json"
        )
        _document(f"patch event {name}", method, name, self.namespace, dict(body))


class TemplateStore:
    """The ResourceClaimTemplates mode dra needs, in any namespace: the keeper's writes, through the
    resource.k8s.io version the API serves (`api_version`); a body must already be in it."""

    def __init__(self, connection: Connection) -> None:
        self._connection = connection

    def api_version(self) -> str:
        """e.g. resource.k8s.io/v1beta1; asks discovery the first time (ClusterError if it cannot)."""
        return f"{GROUP}/{dra_version(self._connection)}"

    def _api(self) -> Any:
        return _DRA_APIS[dra_version(self._connection)](self._connection.api_client)

    def create(self, body: Mapping[str, Any]) -> None:
        self._write("create", "create_namespaced_resource_claim_template", body, by_name=False)

    def replace(self, body: Mapping[str, Any]) -> None:
        self._write("update", "replace_namespaced_resource_claim_template", body, by_name=True)

    def _write(self, verb: str, method: str, body: Mapping[str, Any], *, by_name: bool) -> None:
        meta = body.get("metadata") or {}
        name, namespace = str(meta.get("name") or ""), str(meta.get("namespace") or "")
        what = f"{verb} resourceclaimtemplate {namespace}/{name}"
        served = self.api_version()
        if body.get("apiVersion") != served:  # the API would read it as the wrong version
            raise ClusterError(
                f"{what}: the body is {str(body.get('apiVersion'))[:60]}, the API serves {served}"
            )
        where = (name, namespace) if by_name else (namespace,)
        _document(what, getattr(self._api(), method), *where, dict(body))

    def delete(self, namespace: str, name: str, resource_version: str) -> None:
        """Only the version the decision was made on: a template changed since is left for the next pass."""
        options = client.V1DeleteOptions(
            preconditions=client.V1Preconditions(resource_version=resource_version or None)
        )
        method = functools.partial(self._api().delete_namespaced_resource_claim_template, body=options)
        with contextlib.suppress(_NotFound):  # gone already: what we wanted
            _document(f"delete resourceclaimtemplate {namespace}/{name}", method, name, namespace)


class CustomObjectStore:
    """Custom objects (the scan's policy reports) by apiVersion and plural, in a namespace or ("")
    cluster-scoped: read, create, replace. An API without the CRD answers 404: ClusterError."""

    def __init__(self, connection: Connection) -> None:
        self._api = client.CustomObjectsApi(connection.api_client)

    def read(self, api_version: str, plural: str, namespace: str, name: str) -> dict[str, Any] | None:
        group, version = api_version.split("/", 1)
        where = (group, version, namespace, plural, name) if namespace else (group, version, plural, name)
        method = self._api.get_namespaced_custom_object if namespace else self._api.get_cluster_custom_object
        try:
            return _document(f"read {plural} {namespace}/{name}", method, *where)
        except _NotFound:
            return None

    def create(self, api_version: str, plural: str, namespace: str, body: Mapping[str, Any]) -> None:
        group, version = api_version.split("/", 1)
        where = (group, version, namespace, plural) if namespace else (group, version, plural)
        method = (
            self._api.create_namespaced_custom_object if namespace else self._api.create_cluster_custom_object
        )
        _document(f"create {plural} {namespace}", method, *where, dict(body))

    def replace(self, api_version: str, plural: str, namespace: str, body: Mapping[str, Any]) -> None:
        group, version = api_version.split("/", 1)
        name = str(body["metadata"]["name"])
        where = (group, version, namespace, plural, name) if namespace else (group, version, plural, name)
        method = (
            self._api.replace_namespaced_custom_object
            if namespace
            else self._api.replace_cluster_custom_object
        )
        _document(f"update {plural} {namespace}/{name}", method, *where, dict(body))


_TIMEOUTS = (CONNECT_SECONDS, REQUEST_SECONDS)


class _NotFound(ClusterError):
    pass


def _call(what: str, request: Callable[[], Any]) -> Any:
    """Run one API request; translate its failure into our error tree."""
    try:
        return request()
    except ApiException as e:
        status = int(e.status or 0)
        reason = f"{what}: HTTP {status} {e.reason or ''}".strip()
        if status == 410:
            raise ResourceExpired(reason) from e
        if status == 409:
            raise Conflict(reason) from e
        if status == 404:
            raise _NotFound(reason) from e
        raise ClusterError(reason) from e
    except (urllib3.exceptions.HTTPError, OSError) as e:
        raise ClusterError(f"{what}: {_line(e)}") from e


def _document(what: str, method: Callable[..., Any], *args: Any) -> dict[str, Any]:
    """One request for one object, read raw and parsed by `_json`."""
    return _json(_call(what, lambda: method(*args, _preload_content=False, _request_timeout=_TIMEOUTS)))


def _json(response: Any) -> dict[str, Any]:
    try:
        document = orjson.loads(response.data)
    except (orjson.JSONDecodeError, urllib3.exceptions.HTTPError, OSError) as e:
        raise ClusterError(f"unreadable API response: {_line(e)}") from e
    finally:
        response.release_conn()
    if not isinstance(document, dict):
        raise ClusterError("API response is not a JSON object")
    return document


def _event(line: str) -> dict[str, Any]:
    try:
        event = orjson.loads(line)
    except orjson.JSONDecodeError as e:
        raise ClusterError(f"unreadable watch event: {e}") from e
    if not isinstance(event, dict):
        raise ClusterError("watch event is not a JSON object")
    return event


def _line(error: Exception) -> str:
    text = str(error).splitlines()[0] if str(error) else type(error).__name__
    return text[:200]
