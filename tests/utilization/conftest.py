"""A real Prometheus scraping the synthetic fleet, shared by the tests that read real PromQL answers."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import pytest

from tests.support.dcgm import FakeExporter
from tests.support.prometheus import BINARY, MISSING, PrometheusServer, ScrapeJob, start_prometheus
from tests.utilization.fleet import EXPORTER_TARGET, HONORED, SERIES, UNHONORED

SAMPLES = 10  # one whole value cycle of the fake exporter


@dataclass(frozen=True)
class Fleet:
    prometheus: PrometheusServer

    @property
    def url(self) -> str:
        return self.prometheus.url


@pytest.fixture(scope="session")
def fleet(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Fleet]:
    if BINARY is None:
        pytest.skip(MISSING)
    honored, unhonored = FakeExporter(HONORED).start(), FakeExporter(UNHONORED).start()
    jobs = [
        ScrapeJob("dcgm", honored.target),
        ScrapeJob("dcgm-unhonored", unhonored.target, honor_labels=False, target_labels=EXPORTER_TARGET),
    ]
    prometheus = start_prometheus(jobs, tmp_path_factory.mktemp("prometheus"))
    try:
        prometheus.wait_for_samples("DCGM_FI_DEV_FB_USED", SERIES, SAMPLES)
        yield Fleet(prometheus)
    finally:
        prometheus.stop()
        honored.stop()
        unhonored.stop()
