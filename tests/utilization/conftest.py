"""A real Prometheus scraping the synthetic fleet, shared by the tests that read real PromQL answers.

Prometheus hands new scrape targets to its scrapers about five seconds after start, so
the fleet is started as soon as collection shows a selected test needs it, and the
other tests run meanwhile; the fixture then awaits the first scrapes by asking
Prometheus, not by waiting a fixed time.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests.support.dcgm import FakeExporter
from tests.support.prometheus import BINARY, MISSING, PrometheusServer, ScrapeJob, start_prometheus
from tests.utilization.fleet import EXPORTER_TARGET, HONORED, SERIES, UNHONORED

SAMPLES = 10  # one whole value cycle of the fake exporter


@dataclass
class Fleet:
    prometheus: PrometheusServer
    exporters: tuple[FakeExporter, ...]
    directory: Path
    stopped: bool = field(default=False)

    @property
    def url(self) -> str:
        return self.prometheus.url

    def stop(self) -> None:
        if not self.stopped:
            self.stopped = True
            self.prometheus.stop()
            for exporter in self.exporters:
                exporter.stop()
            shutil.rmtree(self.directory, ignore_errors=True)


_started: list[Fleet] = []


def start_fleet() -> Fleet:
    honored, unhonored = FakeExporter(HONORED).start(), FakeExporter(UNHONORED).start()
    jobs = [
        ScrapeJob("dcgm", honored.target),
        ScrapeJob("dcgm-unhonored", unhonored.target, honor_labels=False, target_labels=EXPORTER_TARGET),
    ]
    directory = Path(tempfile.mkdtemp(prefix="gpu-webhook-prometheus-"))
    fleet = Fleet(start_prometheus(jobs, directory), (honored, unhonored), directory)
    _started.append(fleet)
    return fleet


def pytest_collection_finish(session: pytest.Session) -> None:
    if BINARY is not None and any("fleet" in getattr(item, "fixturenames", ()) for item in session.items):
        start_fleet()


def pytest_sessionfinish(session: pytest.Session) -> None:
    for fleet in _started:
        fleet.stop()


@pytest.fixture(scope="session")
def fleet() -> Iterator[Fleet]:
    if BINARY is None:
        pytest.skip(MISSING)
    found = _started[0] if _started else start_fleet()
    found.prometheus.wait_for_samples("DCGM_FI_DEV_FB_USED", SERIES, SAMPLES)
    yield found
    found.stop()
