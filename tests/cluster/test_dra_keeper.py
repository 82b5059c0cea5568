"""The ResourceClaimTemplate keeper against the fake kube-apiserver, through the real kubernetes
client: what it reads comes from the watch caches, what it writes goes through the API and comes
back through the watch. Two replicas share one Lease, so each template is created once."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.cluster.conftest import WAIT, Watching
from tests.dra.objects import WHOLE_DRA, WHOLE_DRA_FILE, request, template
from tests.support.fakekube import FakeKube
from tests.support.pods import namespace
from tests.support.policies import sharing_policy
from tests.support.schema import assert_valid
from tests.support.server import start_server
from webhook.accounting.demand import DEFAULT_SETTINGS
from webhook.cache import KINDS, ClusterCache
from webhook.cluster import PAGE_SIZE, Connection, LeaseStore, TemplateStore
from webhook.clusterstate import ClusterState
from webhook.dra import sync, templates
from webhook.dra.index import DRA_KINDS
from webhook.keeper.loop import LEASE_NAME, KeeperLoop, TemplateKeeper
from webhook.keeper.setup import fingerprint_of, world_of
from webhook.leader import LeaseElector, Timing
from webhook.policy.model import PolicySet
from webhook.quota.gate import LocalGate

EXEMPT = ("kube-system",)
SLICED = sharing_policy(
    "match: {namespaces: [team-*]}\nsharing: {mode: dra, strategy: TimeSlicing, maxGpusPerPod: 1,"
    " driverFeatureGates: {TimeSlicingSettings: true}}",
    name="sliced",
)
# Real time: no pause of a busy machine outlasts the renew deadline, so the replica that takes the
# lease keeps it, and the other never writes a template the first has written.
LIVE_LEASE = Timing(lease_seconds=3600, renew_deadline=1800, retry_seconds=0.05)


@dataclass
class Policies:
    current: PolicySet

    def __call__(self) -> PolicySet:
        return self.current


@pytest.fixture
def cluster(fake: FakeKube, watching: Watching) -> ClusterState:
    for name in ("team-a", "team-b", "other", "kube-system"):
        fake.create("namespaces", namespace(name))
    cache = ClusterCache()
    informers = watching(cache, kinds=(*KINDS, *DRA_KINDS), page_size=PAGE_SIZE)
    assert cache.wait_until(lambda c: c.synced and c.dra_synced, WAIT)
    return ClusterState(cache, LocalGate(cache, DEFAULT_SETTINGS), "fake", informers)


def _keeper(connection: Connection, cluster: ClusterState, policies: Policies) -> TemplateKeeper:
    world = lambda: world_of(cluster, policies(), EXEMPT)  # noqa: E731
    return TemplateKeeper(world, TemplateStore(connection), grace_seconds=0.0)


def _loop(
    connection: Connection, cluster: ClusterState, policies: Policies, elector: LeaseElector | None = None
) -> KeeperLoop:
    keeper = _keeper(connection, cluster, policies)
    return KeeperLoop(keeper, lambda: fingerprint_of(cluster, policies()), 60.0, elector=elector, tick=0.02)


def _key(obj: dict[str, Any]) -> str:
    return f"{obj['metadata']['namespace']}/{obj['metadata']['name']}"


def _names(cache: ClusterCache) -> set[str]:
    return {_key(o) for o in cache.dra_templates()}


def _wanted(policy: PolicySet, *namespaces: str) -> set[str]:
    return {
        f"{ns}/{t['metadata']['name']}"
        for p in policy.sharing
        for ns in namespaces
        for t in templates.templates_for(p, ns)
    }


def _until(cache: ClusterCache, holds: Callable[[set[str]], bool]) -> None:
    assert cache.wait_until(lambda c: holds(_names(c)), WAIT), sorted(_names(cache))


def test_the_lease_holder_alone_creates_the_templates_of_every_matched_namespace(
    fake: FakeKube, connection: Connection, cluster: ClusterState
) -> None:
    policies = Policies(PolicySet(version="1", sharing=(WHOLE_DRA,)))
    replicas = [
        _loop(
            connection,
            cluster,
            policies,
            LeaseElector(LeaseStore(connection, "gpu-system"), name, name=LEASE_NAME, timing=LIVE_LEASE),
        )
        for name in ("replica-1", "replica-2")
    ]
    for loop in replicas:
        loop.start()
    try:
        wanted = _wanted(policies.current, "team-a", "team-b")
        _until(cluster.cache, lambda names: names == wanted)
        fake.create("namespaces", namespace("team-c"))  # a new namespace gets its own at once
        wanted |= _wanted(policies.current, "team-c")
        _until(cluster.cache, lambda names: names == wanted)
    finally:
        for loop in replicas:
            loop.stop()
    assert fake.count(r"^POST .*/resourceclaimtemplates") == len(wanted)  # once each, by one replica
    for key in wanted:
        ns, name = key.split("/")
        stored = fake.get("resourceclaimtemplates", ns, name)
        assert stored is not None and sync.ours(stored)
        assert_valid(stored)


def test_a_changed_policy_gets_new_templates_and_the_old_ones_go_after_the_grace(
    connection: Connection, cluster: ClusterState
) -> None:
    policies = Policies(PolicySet(version="1", sharing=(WHOLE_DRA,)))
    loop = _loop(connection, cluster, policies)
    old = _wanted(policies.current, "team-a", "team-b")
    loop.step()
    _until(cluster.cache, lambda names: names == old)
    policies.current = PolicySet(version="2", sharing=(SLICED,))
    new = _wanted(policies.current, "team-a", "team-b")
    loop.step()  # creates the new ones and marks the old

    def marked(cache: ClusterCache) -> bool:
        found = {
            _key(o): sync.UNWANTED_SINCE in o["metadata"].get("annotations", {})
            for o in cache.dra_templates()
        }
        return found == {key: key in old for key in old | new}

    assert cluster.cache.wait_until(marked, WAIT)
    loop.step()  # the grace (0 s here) is over
    _until(cluster.cache, lambda names: names == new)


def test_a_name_held_by_someone_else_is_reported_and_left_alone(
    fake: FakeKube, connection: Connection, cluster: ClusterState
) -> None:
    policies = Policies(PolicySet(version="1", sharing=(WHOLE_DRA,)))
    first, second = sorted(_wanted(policies.current, "team-a"))
    squatter = template(first.split("/")[1], request(count=8), namespace="team-a")
    fake.create("resourceclaimtemplates", squatter)
    _until(cluster.cache, lambda names: first in names)
    loop = _loop(connection, cluster, policies)
    result = loop.step()
    assert result is not None and result.conflicts == (first,)
    assert loop.keeper.conflicts == (first,)
    _until(cluster.cache, lambda names: second in names)
    held = fake.get("resourceclaimtemplates", "team-a", first.split("/")[1])
    assert held is not None and held["spec"] == squatter["spec"]  # never overwritten


@pytest.mark.slow
def test_serve_keeps_the_templates_and_counts_its_writes(
    fake: FakeKube, cert_dir: Path, tmp_path: Path
) -> None:
    """The keeper as `gpu-webhook serve` wires it: on by default with a cluster, on the Lease."""
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
    try:
        wanted = _wanted(PolicySet(sharing=(WHOLE_DRA,)), "team-a")
        server.wait_for_log(
            lambda e: e.get("msg") == "ResourceClaimTemplate written" and e.get("template") in wanted
        )
        fake.wait_for_requests(
            lambda log: sum("POST" in line and "resourceclaimtemplates" in line for line in log) == 2
        )
        assert fake.get("leases", "gpu-system", LEASE_NAME) is not None
        metrics = server.client().request("GET", "/metrics").body.decode()
        assert 'gpu_webhook_dra_template_writes_total{action="create",result="ok"}' in metrics
        assert "gpu_webhook_dra_template_conflicts 0.0" in metrics
    finally:
        server.stop()
