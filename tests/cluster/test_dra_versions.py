"""A cluster whose newest resource.k8s.io is v1beta2 or v1beta1 (k8s.io/api resource/v1beta2 and
v1beta1 types.go), through the real kubernetes client against the fake kube-apiserver serving
only that version: DRA objects reach the cache as v1, from lists and watch events alike, the
keeper writes its templates in the served version, and ResourceSlices the API refuses leave
serving and claim resolution alone."""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st

from tests.cluster.conftest import WAIT, Watching
from tests.cluster.dra_wire import (
    DRIVER,
    GROUP,
    OLDER,
    Recording,
    as_read,
    claim,
    device_class,
    gpu,
    request,
    resource_slice,
    template,
)
from tests.dra.objects import NS, WHOLE_DRA, WHOLE_DRA_FILE, pod
from tests.support.fakekube import FakeKube
from tests.support.pods import namespace
from tests.support.policies import sharing_policy
from tests.support.server import LogEntry, ServerProcess, start_server
from webhook.accounting.demand import DEFAULT_SETTINGS
from webhook.cache import KINDS, ClusterCache
from webhook.cluster import PAGE_SIZE, Connection, TemplateStore, connect, dra_version, lister
from webhook.clusterstate import CONSERVATIVE, ClusterState
from webhook.dra import sync, templates
from webhook.dra.index import CLAIMS, CLASSES, DRA_KINDS, SLICES, TEMPLATES
from webhook.dra.versions import as_v1
from webhook.errors import ClusterError
from webhook.inventory import cache_from, load_inventory
from webhook.keeper.loop import TemplateKeeper
from webhook.keeper.setup import world_of
from webhook.keeper.versions import VersionedWriter, in_version
from webhook.policy.model import PolicySet
from webhook.quota.gate import LocalGate
from webhook.scan.sources import from_cluster, from_inventory

REFUSED = f"ResourceSlices not listed (ClusterError: list resourceslices: HTTP 403 Forbidden): {CONSERVATIVE}"
# Another dra policy for the same namespaces: its templates have other names.
SINGLE = sharing_policy(
    "match: {namespaces: [team-*]}\nsharing: {mode: dra, maxGpusPerPod: 1}", name="single"
)


@pytest.fixture(params=OLDER)
def fake(request: pytest.FixtureRequest) -> Iterator[FakeKube]:
    """The fake kube-apiserver of a cluster whose newest resource.k8s.io is this version."""
    api = FakeKube(dra_version=request.param).start()
    yield api
    api.stop()


def publish(fake: FakeKube) -> None:
    """A claim of 4 GPUs, a template of 1, NVIDIA's GPU class and one node's slice, in the served version."""
    version = fake.dra_version
    assert version is not None
    fake.create("resourceclaims", claim(version, "four", request(version, 4)))
    fake.create("resourceclaimtemplates", template(version, "one", request(version)))
    fake.create("deviceclasses", device_class(version))
    fake.create(
        "resourceslices", resource_slice(version, "node-a", gpu(version, "gpu-0"), gpu(version, "gpu-1"))
    )


def lists_of(fake: FakeKube, resource: str) -> int:
    return fake.count(rf"^GET /apis/{GROUP}/{fake.dra_version}/{resource}\?limit=")


def test_lists_reach_the_cache_as_v1_and_claims_resolve(fake: FakeKube, watching: Watching) -> None:
    publish(fake)
    cache = Recording()
    watching(cache, kinds=(*DRA_KINDS, *KINDS), page_size=PAGE_SIZE)
    assert cache.wait_until(lambda c: c.synced and c.dra_synced and c.slices_known, WAIT)

    four, one = claim("v1", "four", request("v1", 4)), template("v1", "one", request("v1"))
    assert cache.dra().claim_devices(NS, "four") == (True, four["spec"]["devices"])
    assert cache.dra().template_devices(NS, "one") == (True, one["spec"]["spec"]["devices"])
    assert DRIVER in cache.dra().classes
    assert [as_read(t) for t in cache.dra_templates()] == [one]
    expected = {
        (CLAIMS, NS, "four"): four,
        (TEMPLATES, NS, "one"): one,
        (CLASSES, "default", DRIVER): device_class("v1"),
        (SLICES, "default", f"node-a-{DRIVER}"): resource_slice(
            "v1", "node-a", gpu("v1", "gpu-0"), gpu("v1", "gpu-1")
        ),
    }
    for (kind, ns, name), want in expected.items():
        got = cache.got(kind, name, ns)
        assert got is not None and as_read(got) == want, kind

    fake.create("pods", pod("a", claim_name="four"))
    fake.create("pods", pod("b", template_name="one"))
    assert cache.wait_until(lambda c: c.usage(NS, DEFAULT_SETTINGS).gpus == 5, WAIT)
    assert fake.count(rf"^GET /apis/{GROUP}/v1/") == 0  # only the served version is asked
    assert fake.count(rf"^GET /apis/{GROUP}/?$") == 1  # discovery once, for four kinds


def test_watch_events_arrive_as_v1_and_a_410_relists(fake: FakeKube, watching: Watching) -> None:
    version = fake.dra_version
    assert version is not None
    cache = Recording()
    watching(cache, kinds=DRA_KINDS)
    assert cache.wait_until(lambda c: c.dra_synced and c.slices_listed, WAIT)
    fake.wait_for_watches(len(DRA_KINDS))

    fake.create("resourceclaims", claim(version, "two", request(version, 2)))
    fake.create("resourceslices", resource_slice(version, "node-a", gpu(version, "gpu-0")))
    fake.update(
        "resourceslices", resource_slice(version, "node-a", gpu(version, "gpu-0", "40Gi"), generation=2)
    )
    want_claim = claim("v1", "two", request("v1", 2))
    want_slice = resource_slice("v1", "node-a", gpu("v1", "gpu-0", "40Gi"), generation=2)

    def arrived(c: ClusterCache, kind: str, name: str, ns: str, want: dict[str, Any]) -> bool:
        got = cache.got(kind, name, ns)
        return got is not None and as_read(got) == want

    assert cache.wait_until(lambda c: arrived(c, CLAIMS, "two", NS, want_claim), WAIT)
    assert cache.wait_until(lambda c: arrived(c, SLICES, f"node-a-{DRIVER}", "default", want_slice), WAIT)
    assert cache.dra().claim_devices(NS, "two") == (True, want_claim["spec"]["devices"])
    fake.delete("resourceclaims", NS, "two")
    assert cache.wait_until(lambda c: not c.dra().claim_devices(NS, "two")[0], WAIT)

    before = lists_of(fake, "resourceclaims")
    fake.expire_watches()  # history compacted: every watch ends with ERROR 410 and lists again
    fake.create("resourceclaims", claim(version, "three", request(version, 3)))
    fake.wait_for_requests(lambda _: lists_of(fake, "resourceclaims") > before)
    want_three = claim("v1", "three", request("v1", 3))
    assert cache.wait_until(lambda c: arrived(c, CLAIMS, "three", NS, want_three), WAIT)
    assert fake.count(rf"^GET /apis/{GROUP}/?$") == 1  # the version stays decided across relists


def test_refused_slices_leave_serving_and_resolving_alone_and_readyz_says_so(
    fake: FakeKube, watching: Watching
) -> None:
    """An install whose ClusterRole predates the resourceslices rule: list and watch get 403."""
    version = fake.dra_version
    assert version is not None
    fake.forbidden.add(SLICES)
    fake.create("resourceclaims", claim(version, "four", request(version, 4)))
    fake.create("deviceclasses", device_class(version))
    cache = ClusterCache()
    informers = watching(cache, kinds=(*KINDS, *DRA_KINDS))
    state = ClusterState(cache, LocalGate(cache), "cluster (test)", informers)
    assert cache.wait_until(lambda c: c.synced and c.dra_synced, WAIT)
    fake.wait_for_requests(lambda log: sum(f"/{SLICES}?" in line for line in log) >= 2)  # refused, retried

    ready, text = state.readiness()
    assert ready
    assert REFUSED in text
    assert "DRA claims not listed" not in text
    assert not cache.slices_known and not cache.slices_listed
    assert state.stale_reason() is None  # quota keeps trusting the cache
    fake.create("pods", pod("a", claim_name="four"))
    assert cache.wait_until(lambda c: c.usage(NS, DEFAULT_SETTINGS).gpus == 4, WAIT)

    fake.forbidden.discard(SLICES)  # the ClusterRole is updated: no restart needed
    assert cache.wait_until(lambda c: c.slices_listed, WAIT)
    assert f"no ResourceSlices published: {CONSERVATIVE}" in state.readiness()[1]
    fake.create("resourceslices", resource_slice(version, "node-a", gpu(version, "gpu-0")))
    assert cache.wait_until(lambda c: c.slices_known, WAIT)
    assert "ResourceSlices" not in state.readiness()[1]


def test_a_scan_lists_older_versions_as_v1_and_does_without_refused_slices(
    fake: FakeKube, connection: Connection
) -> None:
    publish(fake)
    fake.forbidden.add(SLICES)
    snapshot = from_cluster(lister(connection, page_size=2), "fake")
    assert snapshot.dra is not None
    assert snapshot.dra.claim_devices(NS, "four") == (
        True,
        claim("v1", "four", request("v1", 4))["spec"]["devices"],
    )
    assert DRIVER in snapshot.dra.classes


def test_discovery_is_asked_again_after_it_failed(fake: FakeKube, connection: Connection) -> None:
    with fake.outage(), pytest.raises(ClusterError, match=r"discover resource\.k8s\.io: HTTP 503"):
        dra_version(connection)
    assert dra_version(connection) == fake.dra_version
    assert dra_version(connection) == fake.dra_version
    assert fake.count(rf"^GET /apis/{GROUP}/?$") == 2  # the failure, then the answer kept


def test_a_cluster_without_resource_k8s_io_is_scanned_without_claims(tmp_path: Path) -> None:
    api = FakeKube(dra_version=None).start()
    try:
        found = connect(api.write_kubeconfig(tmp_path / "kubeconfig"))
        assert found is not None
        assert dra_version(found) == "v1"  # nothing to read: lists are tried at v1, and 404
        assert from_cluster(lister(found), "fake").dra is None
        assert api.count(rf"^GET /apis/{GROUP}/v1/resourceclaims\?limit=") == 1
    finally:
        api.stop()


# The keeper -----------------------------------------------------------------------------------


def test_the_keeper_writes_in_the_served_version_and_finds_its_own_unchanged(
    fake: FakeKube, connection: Connection, watching: Watching
) -> None:
    """The fake refuses a template whose requests have the other version's layout, and an update
    that changes a template's spec (immutable): every write must succeed."""
    fake.create("namespaces", namespace("team-a"))
    cache = ClusterCache()
    state = ClusterState(cache, LocalGate(cache), "fake", watching(cache, kinds=(*KINDS, *DRA_KINDS)))
    assert cache.wait_until(lambda c: c.synced and c.dra_synced, WAIT)
    policies = PolicySet(version="1", sharing=(WHOLE_DRA,))
    current = [policies]
    keeper = TemplateKeeper(
        lambda: world_of(state, current[0], ()), VersionedWriter(TemplateStore(connection)), grace_seconds=0.0
    )
    wanted = {t["metadata"]["name"]: t for t in templates.templates_for(WHOLE_DRA, "team-a")}

    first = keeper.run_once()
    assert first is not None and first.written == {"create/ok": len(wanted)}
    assert cache.wait_until(lambda c: len(c.dra_templates()) == len(wanted), WAIT)
    for name, want in wanted.items():
        stored = fake.get("resourceclaimtemplates", "team-a", name)
        assert stored is not None and stored["apiVersion"] == f"{GROUP}/{fake.dra_version}"
        assert as_v1(stored)["spec"] == want["spec"]
    assert {o["metadata"]["name"]: o["spec"] for o in cache.dra_templates()} == {
        name: t["spec"] for name, t in wanted.items()
    }
    again = keeper.run_once()
    assert again is not None and again.written == {}  # read back as v1, its own spec is unchanged

    current[0] = PolicySet(version="2", sharing=(SINGLE,))
    retiring = keeper.run_once()  # new templates created, the old ones marked: updates in the served version
    assert retiring is not None
    assert retiring.written == {"create/ok": 1, "update/ok": len(wanted)}

    def marked(c: ClusterCache) -> bool:
        return len(c.dra_templates()) == len(wanted) + 1 and all(
            sync.UNWANTED_SINCE in o["metadata"].get("annotations", {})
            for o in c.dra_templates()
            if o["metadata"]["name"] in wanted
        )

    assert cache.wait_until(marked, WAIT)
    gone = keeper.run_once()
    assert gone is not None and gone.written == {"delete/ok": len(wanted)}


def test_a_template_store_refuses_a_body_of_another_version(fake: FakeKube, connection: Connection) -> None:
    fake.create("namespaces", namespace("team-a"))
    (body, *_) = templates.templates_for(WHOLE_DRA, "team-a")
    served = f"{GROUP}/{fake.dra_version}"
    with pytest.raises(ClusterError, match=re.escape(f"the body is {GROUP}/v1, the API serves {served}")):
        TemplateStore(connection).create(body)
    assert fake.count(r"^POST ") == 0


V1_TEMPLATE = template("v1", "t", request("v1", 2))
FIRST_AVAILABLE = {
    "name": "gpu",
    "firstAvailable": [{"name": "big", "deviceClassName": DRIVER, "count": 2}],
}


@pytest.mark.parametrize(
    ("body", "version", "expected"),
    [
        pytest.param(V1_TEMPLATE, f"{GROUP}/v1", V1_TEMPLATE, id="v1-as-it-stands"),
        pytest.param(
            V1_TEMPLATE,
            f"{GROUP}/v1beta2",
            template("v1beta2", "t", request("v1beta2", 2)),
            id="v1beta2-apiVersion-only",
        ),
        pytest.param(
            V1_TEMPLATE,
            f"{GROUP}/v1beta1",
            template("v1beta1", "t", request("v1beta1", 2)),
            id="v1beta1-exactly-flattened",
        ),
        pytest.param(
            template("v1", "t", FIRST_AVAILABLE),
            f"{GROUP}/v1beta1",
            template("v1beta1", "t", FIRST_AVAILABLE),
            id="v1beta1-firstAvailable-stays",
        ),
        pytest.param(
            template("v1beta2", "t", request("v1beta2")),
            f"{GROUP}/v1beta1",
            template("v1beta2", "t", request("v1beta2")),
            id="not-v1-left-alone",
        ),
    ],
)
def test_a_v1_template_in_each_served_version(
    body: dict[str, Any], version: str, expected: dict[str, Any]
) -> None:
    """k8s.io/dynamic-resource-allocation api/v1beta1/conversion.go,
    Convert_v1_DeviceRequest_To_v1beta1_DeviceRequest."""
    assert in_version(body, version) == expected


_SELECTORS = st.lists(
    st.builds(lambda e: {"cel": {"expression": e}}, st.text(min_size=1, max_size=20)), min_size=1, max_size=2
)
_EXACT = st.fixed_dictionaries(
    {"deviceClassName": st.text(min_size=1, max_size=20)},
    optional={
        "allocationMode": st.sampled_from(["ExactCount", "All"]),
        "count": st.integers(1, 64),
        "selectors": _SELECTORS,
        "adminAccess": st.booleans(),
    },
)
_REQUESTS = st.lists(
    st.builds(lambda name, exact: {"name": name, "exactly": exact}, st.text(max_size=8), _EXACT), max_size=3
)


@given(_REQUESTS, st.sampled_from([f"{GROUP}/v1beta1", f"{GROUP}/v1beta2"]))
def test_what_the_keeper_writes_reads_back_as_itself(requests: list[dict[str, Any]], version: str) -> None:
    """as_v1 (the watch's reading) undoes in_version (the keeper's writing): the keeper never sees
    its own templates as changed, and never deletes and recreates them in a loop."""
    body = template("v1", "t", *requests)
    assert as_v1(in_version(body, version)) == body


def _written(template: str) -> Callable[[LogEntry], bool]:
    return lambda e: e.get("msg") == "ResourceClaimTemplate written" and e.get("template") == template


def _logged(server: ServerProcess, predicate: Callable[[LogEntry], bool]) -> LogEntry:
    """The server logged it: before start_server returned, or from now on."""
    for line in server.seen:
        entry = json.loads(line) if line.startswith("{") else None
        if isinstance(entry, dict) and predicate(entry):
            return entry
    return server.wait_for_log(predicate)


@pytest.mark.slow
def test_serve_on_an_older_cluster_whose_role_lacks_slices(
    fake: FakeKube, cert_dir: Path, tmp_path: Path
) -> None:
    """`gpu-webhook serve` as installed: it names the version it uses, the keeper writes mode dra's
    templates in it, and /readyz is ready and says slices are not listed."""
    fake.forbidden.add(SLICES)
    fake.create("namespaces", namespace("team-a"))
    policies = tmp_path / "policies"
    policies.mkdir()
    (policies / "whole.yaml").write_text(WHOLE_DRA_FILE)
    home = tmp_path / "home"
    home.mkdir()
    kubeconfig = fake.write_kubeconfig(tmp_path / "kubeconfig")
    server = start_server(
        [*("--cert-dir", str(cert_dir), "--policies", str(policies)), *("--kubeconfig", str(kubeconfig))],
        ca_file=cert_dir / "ca.crt",
        env={"HOME": str(home), "KUBECONFIG": ""},
    )
    served = f"{GROUP}/{fake.dra_version}"
    try:
        _logged(server, lambda e: e.get("msg") == f"DRA objects are read and written through {served}")
        wanted = {t["metadata"]["name"] for t in templates.templates_for(WHOLE_DRA, "team-a")}
        for name in wanted:  # logged once the API answered
            _logged(server, _written(f"team-a/{name}"))
        for name in wanted:
            stored = fake.get("resourceclaimtemplates", "team-a", name)
            assert stored is not None and stored["apiVersion"] == served
        fake.wait_for_requests(lambda log: sum(f"/{SLICES}?" in line for line in log) >= 2)
        reply = server.client().request("GET", "/readyz")
        assert reply.status == 200
        body = reply.json()
        checks = body.get("checks") if isinstance(body, dict) else None
        assert isinstance(checks, dict)
        cluster_line = str(checks["cluster"])
        assert REFUSED in cluster_line
        assert fake.count(r"^(POST|PUT) .*/resourceclaimtemplates") == 2  # no write refused and retried
    finally:
        server.stop()


# Offline inventories ------------------------------------------------------------------------


def _kubectl_list(version: str) -> dict[str, Any]:
    items = [
        claim(version, "four", request(version, 4)),
        template(version, "one", request(version)),
        device_class(version),
        resource_slice(version, "node-a", gpu(version, "gpu-0")),
        pod("a", claim_name="four"),
        pod("b", template_name="one"),
    ]
    return {"apiVersion": "v1", "kind": "List", "items": items}


def _typed_lists(version: str) -> list[dict[str, Any]]:
    """As the API answers a list: items without apiVersion and kind."""

    def typed(kind: str, obj: dict[str, Any]) -> dict[str, Any]:
        item = {k: v for k, v in obj.items() if k not in ("apiVersion", "kind")}
        return {"apiVersion": f"{GROUP}/{version}", "kind": f"{kind}List", "items": [item]}

    return [
        typed("ResourceClaim", claim(version, "four", request(version, 4))),
        typed("ResourceClaimTemplate", template(version, "one", request(version))),
        typed("DeviceClass", device_class(version)),
        typed("ResourceSlice", resource_slice(version, "node-a", gpu(version, "gpu-0"))),
        {
            "apiVersion": "v1",
            "kind": "List",
            "items": [pod("a", claim_name="four"), pod("b", template_name="one")],
        },
    ]


@pytest.mark.parametrize(
    ("version", "documents"),
    [
        pytest.param("v1beta1", lambda v: [_kubectl_list(v)], id="v1beta1-kubectl-get-o-yaml-List"),
        pytest.param("v1beta1", _typed_lists, id="v1beta1-typed-lists"),
        pytest.param("v1beta2", lambda v: [_kubectl_list(v)], id="v1beta2-kubectl-get-o-yaml-List"),
    ],
)
def test_an_inventory_of_older_dra_objects_is_read_as_v1(
    version: str, documents: Any, tmp_path: Path
) -> None:
    path = tmp_path / "inventory.yaml"
    path.write_text(yaml.safe_dump_all(documents(version)))
    inventory = load_inventory(path)
    four = claim("v1", "four", request("v1", 4))["spec"]["devices"]

    cache = cache_from(inventory)
    assert cache.dra().claim_devices(NS, "four") == (True, four)
    assert cache.dra().template_devices(NS, "one") == (
        True,
        template("v1", "one", request("v1"))["spec"]["spec"]["devices"],
    )
    assert cache.slices_known
    assert cache.usage(NS, DEFAULT_SETTINGS).gpus == 5
    assert inventory.dra_lists()[SLICES] == [resource_slice("v1", "node-a", gpu("v1", "gpu-0"))]

    snapshot = from_inventory(inventory)
    assert snapshot.dra is not None and snapshot.dra.claim_devices(NS, "four") == (True, four)
    # Gatekeeper's data.inventory holds the objects as written, as its sync would.
    held = snapshot.gatekeeper_inventory["namespace"][NS][f"{GROUP}/{version}"]["ResourceClaim"]
    assert set(held) == {"four"}
