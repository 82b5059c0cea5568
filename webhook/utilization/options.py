"""Command-line options for reading utilization: shared by `serve` (placement hints) and `advise`."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path

from webhook.config import PodLabels, PrometheusSettings, UtilizationSettings
from webhook.errors import ConfigError
from webhook.utilization.promql import Window

Env = Callable[[str, str | None], str | None]


def _no_env(_: str, default: str | None) -> str | None:
    return default


def add_prometheus_options(parser: argparse.ArgumentParser, env: Env = _no_env) -> None:
    parser.add_argument(
        "--prometheus-url",
        default=env("prometheus-url", None),
        help="Prometheus HTTP API with DCGM exporter metrics, e.g. http://prometheus.monitoring:9090",
    )
    parser.add_argument(
        "--prometheus-token-file",
        type=Path,
        default=env("prometheus-token-file", None),
        help="file holding a bearer token, read on every query (tokens rotate)",
    )
    parser.add_argument(
        "--prometheus-ca-file", type=Path, default=env("prometheus-ca-file", None), help="CA bundle for https"
    )
    parser.add_argument(
        "--prometheus-timeout",
        type=_positive_float,
        default=env("prometheus-timeout", "5"),
        help="seconds per query (default 5)",
    )
    parser.add_argument(
        "--pod-labels",
        choices=["auto", "plain", "exported"],
        default=env("pod-labels", "auto"),
        help="where the exporter's pod mapping is: namespace/pod/container (plain) or exported_* "
        "(scraped without honor_labels); auto decides per scrape job",
    )


def add_serve_options(parser: argparse.ArgumentParser, env: Env) -> None:
    """`serve` flags: with --prometheus-url, a background cache feeds placement hints."""
    add_prometheus_options(parser, env)
    parser.add_argument(
        "--utilization-window",
        default=env("utilization-window", "10m"),
        help="how far back spare capacity is judged (default 10m)",
    )
    parser.add_argument(
        "--utilization-refresh-seconds",
        type=_positive_float,
        default=env("utilization-refresh-seconds", "60"),
        help="how often utilization is read, off the request path (default 60)",
    )
    parser.add_argument(
        "--utilization-max-age-seconds",
        type=_positive_float,
        default=env("utilization-max-age-seconds", "300"),
        help="older utilization data gives no placement hints (default 300)",
    )


def prometheus_settings(args: argparse.Namespace) -> PrometheusSettings | None:
    if not args.prometheus_url:
        return None
    return PrometheusSettings(
        url=args.prometheus_url,
        bearer_token_file=args.prometheus_token_file,
        ca_file=args.prometheus_ca_file,
        timeout_seconds=float(args.prometheus_timeout),
    )


def serve_settings(args: argparse.Namespace) -> UtilizationSettings | None:
    prometheus = prometheus_settings(args)
    if prometheus is None:
        return None
    Window.parse(args.utilization_window)
    return UtilizationSettings(
        prometheus=prometheus,
        window=args.utilization_window,
        refresh_seconds=float(args.utilization_refresh_seconds),
        max_age_seconds=float(args.utilization_max_age_seconds),
        pod_labels=pod_labels(args.pod_labels),
    )


def pod_labels(text: str) -> PodLabels:
    if text == "plain":
        return "plain"
    if text == "exported":
        return "exported"
    if text == "auto":
        return "auto"
    raise ConfigError(f"--pod-labels must be auto, plain or exported, got {text!r}")


def _positive_float(text: str) -> float:
    value = float(text)
    if not value > 0:
        raise argparse.ArgumentTypeError(f"must be more than 0, got {text}")
    return value
