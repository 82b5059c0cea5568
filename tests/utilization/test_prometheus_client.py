"""The Prometheus client against a real Prometheus (plain and TLS), and against transport faults."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.patience import PATIENCE
from tests.support.prometheus import BINARY, MISSING, Tls, free_port, start_prometheus
from tests.support.stubhttp import Recorded, StubServer
from tests.utilization.conftest import Fleet
from webhook import certs
from webhook.config import PrometheusSettings
from webhook.utilization.prometheus import PrometheusClient, PrometheusError


def client(url: str, **options: object) -> PrometheusClient:
    """Patient unless told otherwise: a busy machine slows Prometheus, and only a hang should fail."""
    options = {"timeout_seconds": PATIENCE, **options}
    return PrometheusClient(PrometheusSettings(url, **options))  # type: ignore[arg-type]


def test_instant_query_returns_labels_without_the_metric_name(fleet: Fleet) -> None:
    samples = client(fleet.url).query('DCGM_FI_DEV_FB_USED{Hostname="node-a",gpu="2"}')
    assert len(samples) == 1
    labels = samples[0].labels
    assert "__name__" not in labels
    assert (labels["namespace"], labels["pod"], labels["UUID"]) == (
        "training",
        "trainer-0",
        "GPU-node-a-0002",
    )
    assert 30000 <= samples[0].value <= 36000


def test_range_query_returns_points_in_time_order(fleet: Fleet) -> None:
    now = client(fleet.url).query("vector(time())")[0].value
    series = client(fleet.url).query_range('DCGM_FI_DEV_GPU_UTIL{Hostname="node-b"}', now - 5, now, 0.1)
    assert len(series) == 5
    for found in series:
        times = [at for at, _ in found.points]
        assert times == sorted(times) and len(times) >= 2


def test_a_refused_query_names_prometheus_reason(fleet: Fleet) -> None:
    with pytest.raises(PrometheusError, match=r"HTTP 400: .*parse error"):
        client(fleet.url).query("avg_over_time(DCGM_FI_DEV_GPU_UTIL[")


def test_nothing_listening_is_a_prometheus_error() -> None:
    with pytest.raises(PrometheusError, match="cannot reach Prometheus"):
        client(f"http://127.0.0.1:{free_port()}", timeout_seconds=2).query("vector(1)")


@pytest.mark.parametrize("url", ["file:///etc/passwd", "prometheus:9090", "ftp://x", ""])
def test_only_http_urls_are_accepted(url: str) -> None:
    with pytest.raises(PrometheusError, match="must be an http"):
        client(url)


def test_credentials_in_the_url_never_reach_messages() -> None:
    found = client(f"http://user:secret@127.0.0.1:{free_port()}", timeout_seconds=2)
    assert "secret" not in found.url
    with pytest.raises(PrometheusError) as error:
        found.query("vector(1)")
    assert "secret" not in str(error.value)


@pytest.fixture
def tls_prometheus(cert_dir: Path, tmp_path: Path) -> Iterator[str]:
    if BINARY is None:
        pytest.skip(MISSING)
    tls = Tls(cert_dir / certs.TLS_CERT, cert_dir / certs.TLS_KEY, cert_dir / certs.CA_CERT)
    server = start_prometheus([], tmp_path, tls=tls)
    yield server.url
    server.stop()


def test_https_with_our_ca_file(tls_prometheus: str, cert_dir: Path) -> None:
    samples = client(tls_prometheus, ca_file=cert_dir / certs.CA_CERT).query("vector(7)")
    assert [s.value for s in samples] == [7.0]


def test_https_without_the_ca_fails_verification(tls_prometheus: str) -> None:
    with pytest.raises(PrometheusError, match="CERTIFICATE_VERIFY_FAILED"):
        client(tls_prometheus).query("vector(7)")


def test_a_missing_ca_file_is_named(tmp_path: Path) -> None:
    with pytest.raises(PrometheusError, match="CA file"):
        client("https://127.0.0.1:1", ca_file=tmp_path / "nope.crt")


def _vector(*values: str) -> bytes:
    result = [{"metric": {"__name__": "m", "i": str(i)}, "value": [1.0, v]} for i, v in enumerate(values)]
    return json.dumps({"status": "success", "data": {"resultType": "vector", "result": result}}).encode()


def test_the_bearer_token_is_read_from_its_file_on_every_query(tmp_path: Path) -> None:
    stub = StubServer(lambda _: (200, _vector("1")))
    token = tmp_path / "token"
    try:
        found = client(stub.url, bearer_token_file=token)
        for value in ("first-token", "rotated-token\n"):
            token.write_text(value)
            found.query("up")
            recorded = stub.requests.get(timeout=5)
            assert recorded.headers["Authorization"] == f"Bearer {value.strip()}"
            assert recorded.path == "/api/v1/query" and recorded.form["query"] == ["up"]
    finally:
        stub.stop()


def test_an_unreadable_token_file_is_an_error_that_does_not_query(tmp_path: Path) -> None:
    stub = StubServer(lambda _: (200, _vector("1")))
    try:
        with pytest.raises(PrometheusError, match="bearer token file"):
            client(stub.url, bearer_token_file=tmp_path / "missing").query("up")
        assert stub.requests.empty()
    finally:
        stub.stop()


def test_a_path_prefix_in_the_url_is_kept() -> None:
    stub = StubServer(lambda _: (200, _vector("1")))
    try:
        client(stub.url + "/prometheus/").query("up")
        assert stub.requests.get(timeout=5).path == "/prometheus/api/v1/query"
    finally:
        stub.stop()


def _answer_with(body: bytes, status: int = 200) -> StubServer:
    def answer(_: Recorded) -> tuple[int, bytes]:
        return status, body

    return StubServer(answer)


@pytest.mark.parametrize(
    ("status", "body", "message"),
    [
        (200, b"<html>proxy</html>", "not JSON"),
        (200, b'{"status": "error", "error": "too many samples"}', "too many samples"),
        (200, b'{"status": "success"}', "no data"),
        (200, b'{"status": "success", "data": {"resultType": "matrix", "result": []}}', "instant vector"),
        (200, b'{"status": "success", "data": {"resultType": "vector"}}', "no result"),
        (503, b'{"status": "error", "error": "overloaded"}', "HTTP 503: overloaded"),
        (502, b"bad gateway", "HTTP 502$"),
    ],
)
def test_unusable_answers_are_prometheus_errors(status: int, body: bytes, message: str) -> None:
    stub = _answer_with(body, status)
    try:
        with pytest.raises(PrometheusError, match=message):
            client(stub.url).query("up")
    finally:
        stub.stop()


def test_non_finite_values_and_malformed_samples_are_skipped() -> None:
    body = json.loads(_vector("2.5", "NaN", "+Inf", "x"))
    body["data"]["result"] += [{"metric": {}, "value": "junk"}, "not-a-sample"]
    stub = _answer_with(json.dumps(body).encode())
    try:
        assert [s.value for s in client(stub.url).query("up")] == [2.5]
    finally:
        stub.stop()


def test_a_hanging_prometheus_times_out() -> None:
    stub = StubServer(lambda _: (200, _vector("1")), hold=True)
    try:
        with pytest.raises(PrometheusError, match="timed out"):
            client(stub.url, timeout_seconds=0.2).query("up")
    finally:
        stub.stop()
