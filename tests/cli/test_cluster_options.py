"""The cluster and quota flags of `serve`: each from the command line or GPU_WEBHOOK_*."""

from __future__ import annotations

from pathlib import Path

import pytest

from webhook.cli import build_parser

FLAGS = [
    # (flag, env name, value, attribute, parsed)
    ("--inventory", "INVENTORY", "/tmp/inv.yaml", "inventory", Path("/tmp/inv.yaml")),
    ("--quota-consistency", "QUOTA_CONSISTENCY", "strict", "quota_consistency", "strict"),
    ("--kubeconfig", "KUBECONFIG", "/etc/kube/config", "kubeconfig", Path("/etc/kube/config")),
    ("--namespace", "NAMESPACE", "gpu-admission", "namespace", "gpu-admission"),
    ("--reservation-ttl", "RESERVATION_TTL", "45", "reservation_ttl", 45.0),
    ("--max-staleness", "MAX_STALENESS", "2.5", "max_staleness", 2.5),
]


@pytest.mark.parametrize(("flag", "env", "value", "attribute", "parsed"), FLAGS)
def test_flag_and_environment_agree(
    monkeypatch: pytest.MonkeyPatch, flag: str, env: str, value: str, attribute: str, parsed: object
) -> None:
    assert getattr(build_parser().parse_args(["serve", flag, value]), attribute) == parsed
    monkeypatch.setenv(f"GPU_WEBHOOK_{env}", value)
    assert getattr(build_parser().parse_args(["serve"]), attribute) == parsed


def test_defaults() -> None:
    args = build_parser().parse_args(["serve"])
    assert (args.inventory, args.quota_consistency, args.kubeconfig, args.namespace) == (
        None,
        "per-replica",
        None,
        None,
    )
    assert (args.reservation_ttl, args.max_staleness) == (30.0, 60.0)


@pytest.mark.parametrize(
    "argv",
    [
        ["serve", "--quota-consistency", "eventual"],
        ["serve", "--reservation-ttl", "0"],
        ["serve", "--max-staleness", "-1"],
        ["serve", "--reservation-ttl", "soon"],
    ],
)
def test_bad_values_are_usage_errors(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        build_parser().parse_args(argv)
    assert info.value.code == 2
    assert "usage:" in capsys.readouterr().err
