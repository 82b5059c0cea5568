"""The cluster and quota flags of `serve`: defaults and bad values (their GPU_WEBHOOK_* forms are
checked with every other flag in test_serve_options.py)."""

from __future__ import annotations

import pytest

from webhook.cli import build_parser


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
