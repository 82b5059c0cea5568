from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

import pytest

from tests.support.fakekube import FakeKube
from tests.support.patience import PATIENCE
from webhook.cache import KINDS, ClusterCache
from webhook.cluster import Connection, KubeSource, connect
from webhook.informer import Backoff, Informer

FAST_BACKOFF = Backoff(initial=0.01, maximum=0.08)
WAIT = PATIENCE


@pytest.fixture
def fake() -> Iterator[FakeKube]:
    api = FakeKube().start()
    yield api
    api.stop()


@pytest.fixture
def connection(fake: FakeKube, tmp_path: Path) -> Connection:
    found = connect(fake.write_kubeconfig(tmp_path / "kubeconfig"))
    assert found is not None
    return found


Watching = Callable[..., list[Informer]]


@pytest.fixture
def watching(connection: Connection) -> Iterator[Watching]:
    """Start informers feeding a cache, with the real kubernetes client: pods and namespaces unless
    told which kinds; stopped when the test ends."""
    started: list[Informer] = []

    def start(
        cache: ClusterCache, *, kinds: Sequence[str] = KINDS, page_size: int = 50, watch_seconds: int = 30
    ) -> list[Informer]:
        informers = [
            Informer(
                KubeSource(connection, kind, page_size=page_size),
                cache,
                backoff=FAST_BACKOFF,
                watch_seconds=watch_seconds,
            )
            for kind in kinds
        ]
        for informer in informers:
            informer.start()
        started.extend(informers)
        return informers

    yield start
    for informer in started:
        informer.stop()
