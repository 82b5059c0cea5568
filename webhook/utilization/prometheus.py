"""A small client for the Prometheus HTTP API (`/api/v1/query`, `/api/v1/query_range`).

The standard library is enough: two form POSTs and a JSON body. Everything in an
answer is untrusted, so its shape is checked and every failure, from a refused
connection to a malformed body, becomes one PrometheusError that names the cause.
The bearer token is read from its file on every call (projected service account
tokens rotate) and never logged.
"""

from __future__ import annotations

import json
import math
import ssl
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from webhook.config import PrometheusSettings
from webhook.errors import WebhookError

MAX_BODY_BYTES = 64 * 1024 * 1024
USER_AGENT = "gpu-webhook"


class PrometheusError(WebhookError):
    """Prometheus could not be reached, refused the query, or answered with something unusable."""


@dataclass(frozen=True)
class Sample:
    """One series of an instant vector: its labels (without __name__) and its value."""

    labels: Mapping[str, str]
    value: float


@dataclass(frozen=True)
class Series:
    """One series of a range query: its labels and (unix seconds, value) points."""

    labels: Mapping[str, str]
    points: tuple[tuple[float, float], ...]


class PrometheusClient:
    def __init__(self, settings: PrometheusSettings) -> None:
        self._base = _checked_url(settings.url)
        self._settings = settings
        self._context = _tls_context(settings) if self._base.startswith("https:") else None

    @property
    def url(self) -> str:
        """The base URL without any user:password part, fit for logs and reports."""
        parts = urllib.parse.urlsplit(self._base)
        return parts._replace(netloc=parts.netloc.rpartition("@")[2]).geturl()

    def query(self, promql: str, at: float | None = None) -> list[Sample]:
        params = {"query": promql} | ({"time": _timestamp(at)} if at is not None else {})
        data = self._call("query", params)
        if data.get("resultType") != "vector":
            raise PrometheusError(f"expected an instant vector, got {data.get('resultType')!r}")
        return [s for s in (_sample(item) for item in _result(data)) if s is not None]

    def query_range(self, promql: str, start: float, end: float, step: float) -> list[Series]:
        params = {"query": promql, "start": _timestamp(start), "end": _timestamp(end), "step": f"{step:g}"}
        data = self._call("query_range", params)
        if data.get("resultType") != "matrix":
            raise PrometheusError(f"expected a range vector, got {data.get('resultType')!r}")
        return [_series(item) for item in _result(data)]

    def _call(self, endpoint: str, params: Mapping[str, str]) -> Mapping[str, Any]:
        request = urllib.request.Request(  # noqa: S310 (the scheme was checked in _checked_url)
            f"{self._base}/api/v1/{endpoint}",
            data=urllib.parse.urlencode(params).encode(),
            headers=self._headers(),
            method="POST",
        )
        body = self._fetch(request)
        return _data(body)

    def _headers(self) -> dict[str, str]:
        headers = {"Content-Type": "application/x-www-form-urlencoded", "User-Agent": USER_AGENT}
        token_file = self._settings.bearer_token_file
        if token_file is not None:
            try:
                token = token_file.read_text(encoding="utf-8").strip()
            except OSError as e:
                raise PrometheusError(f"cannot read the bearer token file {token_file}: {e.strerror}") from e
            headers["Authorization"] = f"Bearer {token}"
        return headers

    def _fetch(self, request: urllib.request.Request) -> bytes:
        timeout = self._settings.timeout_seconds
        try:
            with urllib.request.urlopen(request, timeout=timeout, context=self._context) as response:  # noqa: S310
                return _bounded(response.read(MAX_BODY_BYTES + 1))
        except urllib.error.HTTPError as e:
            # Prometheus explains a refused query in a JSON body with 400, 422 or 503.
            raise PrometheusError(_http_error(e)) from e
        except (urllib.error.URLError, TimeoutError, OSError) as e:
            reason = getattr(e, "reason", e)
            raise PrometheusError(f"cannot reach Prometheus at {self.url}: {reason}") from e


def _checked_url(url: str) -> str:
    parts = urllib.parse.urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise PrometheusError(f"--prometheus-url must be an http(s) URL, got {url!r}")
    return url.rstrip("/")


def _tls_context(settings: PrometheusSettings) -> ssl.SSLContext:
    ca_file = settings.ca_file
    try:
        return ssl.create_default_context(cafile=str(ca_file) if ca_file else None)
    except (OSError, ssl.SSLError) as e:
        raise PrometheusError(f"cannot load the Prometheus CA file {ca_file}: {e}") from e


def _timestamp(seconds: float) -> str:
    return f"{seconds:.3f}"


def _bounded(body: bytes) -> bytes:
    if len(body) > MAX_BODY_BYTES:
        raise PrometheusError(f"Prometheus answered with more than {MAX_BODY_BYTES} bytes; narrow the query")
    return body


def _http_error(error: urllib.error.HTTPError) -> str:
    try:
        detail = json.loads(error.read(64 * 1024)).get("error")
    except (ValueError, AttributeError, OSError):
        detail = None
    return f"Prometheus answered HTTP {error.code}" + (f": {str(detail)[:300]}" if detail else "")


def _data(body: bytes) -> Mapping[str, Any]:
    try:
        answer = json.loads(body)
    except ValueError as e:
        raise PrometheusError("Prometheus answered with something that is not JSON") from e
    if not isinstance(answer, dict) or answer.get("status") != "success":
        error = answer.get("error") if isinstance(answer, dict) else None
        raise PrometheusError(f"Prometheus query failed: {str(error)[:300] if error else 'no status'}")
    data = answer.get("data")
    if not isinstance(data, dict):
        raise PrometheusError("Prometheus answer has no data")
    return data


def _result(data: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    result = data.get("result")
    if not isinstance(result, list):
        raise PrometheusError("Prometheus answer has no result list")
    return [item for item in result if isinstance(item, dict)]


def _labels(item: Mapping[str, Any]) -> dict[str, str]:
    metric = item.get("metric")
    if not isinstance(metric, dict):
        return {}
    return {str(k): str(v) for k, v in metric.items() if k != "__name__"}


def _number(pair: Any) -> tuple[float, float] | None:
    """A (time, value) pair; None for NaN and infinities, which no statistic here can use."""
    if not (isinstance(pair, list) and len(pair) == 2):
        return None
    try:
        at, value = float(pair[0]), float(pair[1])
    except (TypeError, ValueError):
        return None
    return (at, value) if math.isfinite(value) else None


def _sample(item: Mapping[str, Any]) -> Sample | None:
    point = _number(item.get("value"))
    return Sample(_labels(item), point[1]) if point else None


def _series(item: Mapping[str, Any]) -> Series:
    values = item.get("values")
    points = [_number(p) for p in values] if isinstance(values, list) else []
    return Series(_labels(item), tuple(p for p in points if p is not None))
