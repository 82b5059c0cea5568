"""The benchmark's policies load: a benchmark of a policy set the server refuses measures nothing."""

from __future__ import annotations

from pathlib import Path

from webhook.policy.loader import load_directory

BENCH_POLICIES = Path(__file__).resolve().parents[2] / "bench" / "policies"


def test_the_benchmark_policies_load_with_a_policy_for_every_mode() -> None:
    policies = load_directory(BENCH_POLICIES)
    modes = {p.sharing.mode for p in policies.sharing}
    assert modes >= {"exclusive", "timeslice", "mps", "mig", "hami", "kai", "dra"}
