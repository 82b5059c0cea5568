"""DRA objects listed and watched through the real kubernetes client against the fake kube-apiserver:
a pod's claims resolve against what the watches keep."""

from __future__ import annotations

from tests.cluster.conftest import WAIT, Watching
from tests.dra.objects import NS, claim, device_class, pod, request, template
from tests.support.fakekube import FakeKube
from webhook.accounting.demand import DEFAULT_SETTINGS
from webhook.cache import KINDS, ClusterCache
from webhook.cluster import PAGE_SIZE
from webhook.dra.index import DRA_KINDS


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
