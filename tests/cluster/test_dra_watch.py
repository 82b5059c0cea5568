"""DRA objects listed and watched through the real kubernetes client against the fake kube-apiserver:
a pod's claims resolve against what the watches keep, and ResourceSlices say whether devices are
published."""

from __future__ import annotations

from tests.cluster import dra_wire
from tests.cluster.conftest import WAIT, Watching
from tests.cluster.dra_wire import DRIVER, Recording, as_read, gpu, resource_slice
from tests.dra.objects import NS, claim, device_class, pod, request, template
from tests.support.fakekube import FakeKube
from webhook.accounting.demand import DEFAULT_SETTINGS
from webhook.cache import KINDS, ClusterCache
from webhook.cluster import PAGE_SIZE
from webhook.clusterstate import CONSERVATIVE, ClusterState
from webhook.dra.index import DRA_KINDS, SLICES
from webhook.quota.gate import LocalGate


def test_claims_templates_and_classes_are_listed_then_watched(fake: FakeKube, watching: Watching) -> None:
    fake.create("resourceclaims", claim("four", request(count=4)))
    fake.create("resourceclaimtemplates", template("one"))
    fake.create("deviceclasses", device_class("gpu.nvidia.com", "device.driver == 'gpu.nvidia.com'"))
    cache = ClusterCache()
    watching(cache, kinds=(*DRA_KINDS, *KINDS), page_size=PAGE_SIZE)
    assert cache.wait_until(lambda c: c.synced and c.dra_synced, WAIT)
    assert cache.dra().synced and "gpu.nvidia.com" in cache.dra().classes

    fake.create("pods", pod("a", claim_name="four"))
    fake.create("pods", pod("b", template_name="one"))
    assert cache.wait_until(lambda c: c.usage(NS, DEFAULT_SETTINGS).gpus == 5, WAIT)

    # A claim created later resolves for pods that come after it.
    fake.create("resourceclaims", claim("two", request(count=2)))
    assert cache.wait_until(lambda c: c.dra().claim_devices(NS, "two")[0], WAIT)
    fake.create("pods", pod("c", claim_name="two"))
    assert cache.wait_until(lambda c: c.usage(NS, DEFAULT_SETTINGS).gpus == 7, WAIT)

    fake.delete("resourceclaims", NS, "two")
    assert cache.wait_until(lambda c: not c.dra().claim_devices(NS, "two")[0], WAIT)


def test_slices_are_listed_then_watched_and_say_whether_devices_are_published(
    fake: FakeKube, watching: Watching
) -> None:
    fake.create("resourceslices", resource_slice("v1", "node-a", gpu("v1", "gpu-0")))
    fake.create("deviceclasses", dra_wire.device_class("v1"))
    cache = Recording()
    state = ClusterState(
        cache, LocalGate(cache), "fake", watching(cache, kinds=(*DRA_KINDS, *KINDS), page_size=2)
    )
    assert cache.wait_until(lambda c: c.synced and c.dra_synced and c.slices_known, WAIT)
    node_a, node_b = f"node-a-{DRIVER}", f"node-b-{DRIVER}"

    def holds(name: str, want: dict[str, object]) -> bool:
        got = cache.got(SLICES, name)
        return got is not None and as_read(got) == want

    # List items come without apiVersion and kind: the cache gets them typed all the same.
    assert holds(node_a, resource_slice("v1", "node-a", gpu("v1", "gpu-0")))
    assert "ResourceSlices" not in state.readiness()[1]

    grown = resource_slice("v1", "node-a", gpu("v1", "gpu-0"), gpu("v1", "gpu-1"), generation=2)
    fake.update("resourceslices", grown)
    fake.create("resourceslices", resource_slice("v1", "node-b", gpu("v1", "gpu-0", "40Gi")))
    assert cache.wait_until(lambda c: holds(node_a, grown), WAIT)
    assert cache.wait_until(
        lambda c: holds(node_b, resource_slice("v1", "node-b", gpu("v1", "gpu-0", "40Gi"))), WAIT
    )

    fake.delete("resourceslices", "", node_a)
    assert cache.wait_until(lambda c: cache.got(SLICES, node_a) is None, WAIT)
    assert cache.slices_known  # node-b's remains
    fake.delete("resourceslices", "", node_b)
    assert cache.wait_until(lambda c: not c.slices_known, WAIT)
    assert cache.slices_listed
    ready, text = state.readiness()
    assert ready and f"no ResourceSlices published: {CONSERVATIVE}" in text
