"""`gpu-webhook advise`: idle GPU capacity per namespace and workload, with sharing policies to apply."""

from __future__ import annotations

import argparse
import os
from dataclasses import replace
from pathlib import Path

import orjson

from webhook.commands.common import read_inventory
from webhook.errors import ConfigError
from webhook.sharing_policy import SharingMode
from webhook.utilization import html, render
from webhook.utilization.advice import DEFAULT_MODES, SHAREABLE_MODES, Capabilities
from webhook.utilization.analysis import Thresholds
from webhook.utilization.options import add_prometheus_options, pod_labels, prometheus_settings
from webhook.utilization.owners import OwnerIndex
from webhook.utilization.prometheus import PrometheusClient
from webhook.utilization.promql import Window, check_selector
from webhook.utilization.report import Report, as_json, build_report
from webhook.utilization.source import read_fleet, read_timeline
from webhook.utilization.timeline import namespace_timelines
from webhook.utilization.unmeasured import unmeasured_notes


def _env(name: str, default: str | None) -> str | None:
    return os.environ.get("GPU_WEBHOOK_" + name.upper().replace("-", "_"), default)


def add_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = commands.add_parser(
        "advise", help="find idle GPUs in DCGM metrics and propose sharing policies for them"
    )
    parser.add_argument(
        "--window", default="7d", help="how far back to look (Prometheus duration; default 7d)"
    )
    add_prometheus_options(parser, _env)
    parser.add_argument(
        "--selector", default="", help='label selector added to every metric, e.g. {cluster="prod"}'
    )
    parser.add_argument(
        "--inventory", type=Path, help="cluster objects (pods, ReplicaSets, Jobs) for owners and labels"
    )
    parser.add_argument("-o", "--output", choices=["table", "json"], default="table")
    parser.add_argument("--html", type=Path, metavar="FILE", help="also write a self-contained HTML report")
    parser.add_argument(
        "--policies-out", type=Path, metavar="DIR", help="write each recommended policy to DIR"
    )
    parser.add_argument("--idle-below", type=float, default=5.0, help="mean utilization %% counted as idle")
    parser.add_argument("--busy-above", type=float, default=50.0, help="p95 utilization %% left alone")
    parser.add_argument("--headroom", type=float, default=1.25, help="factor on p95 memory and compute")
    parser.add_argument(
        "--modes",
        default=",".join(DEFAULT_MODES),
        help="sharing modes the cluster runs, in order of preference (default mig,timeslice)",
    )
    parser.add_argument("--replicas", type=int, default=4, help="time-slicing or MPS replicas per GPU")
    parser.set_defaults(command=command)


def command(args: argparse.Namespace) -> int:
    settings = prometheus_settings(args)
    if settings is None:
        raise ConfigError("advise needs --prometheus-url (or GPU_WEBHOOK_PROMETHEUS_URL)")
    client = PrometheusClient(settings)
    window, selector = Window.parse(args.window), check_selector(args.selector)
    labels, capabilities = pod_labels(args.pod_labels), Capabilities(_modes(args.modes), args.replicas)
    objects = read_inventory(args.inventory).objects
    owners, thresholds = OwnerIndex(objects), _thresholds(args)
    reading = read_fleet(client, window, pod_labels=labels, selector=selector)
    report = build_report(reading, owners, thresholds, capabilities, client.url)
    report = replace(report, notes=(*report.notes, *unmeasured_notes(objects)))
    if args.html:
        timelines = namespace_timelines(read_timeline(client, reading, selector), labels)
        args.html.write_text(html.render(report, timelines), encoding="utf-8")
    if args.policies_out:
        _write_policies(report, args.policies_out)
    print(_output(report, args.output), end="")
    return 0


def _output(report: Report, output: str) -> str:
    if output == "json":
        return orjson.dumps(as_json(report), option=orjson.OPT_INDENT_2).decode() + "\n"
    return render.table(report)


def _thresholds(args: argparse.Namespace) -> Thresholds:
    if not 0 <= args.idle_below <= args.busy_above <= 100:
        raise ConfigError("need 0 <= --idle-below <= --busy-above <= 100")
    if args.headroom < 1:
        raise ConfigError(f"--headroom must be at least 1, got {args.headroom:g}")
    return Thresholds(args.idle_below, args.busy_above, args.headroom)


def _modes(text: str) -> tuple[SharingMode, ...]:
    found: list[SharingMode] = []
    for name in (part.strip() for part in text.split(",") if part.strip()):
        mode = next((m for m in SHAREABLE_MODES if m == name), None)
        if mode is None:
            raise ConfigError(f"--modes: {name!r} is not a sharing mode (mig, hami, kai, timeslice, mps)")
        found.append(mode)
    if not found:
        raise ConfigError("--modes needs at least one sharing mode")
    return tuple(found)


def _write_policies(report: Report, directory: Path) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    for rec in report.recommendations:
        (directory / f"{rec.name}.yaml").write_text(render.recommendation_yaml(rec, report), encoding="utf-8")
