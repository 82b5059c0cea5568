"""The `policy` label of gpu_webhook_admission_requests_total: what denied, with bounded cardinality."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st
from prometheus_client.parser import text_string_to_metric_families

from webhook.metrics import MAX_POLICY_LABELS, OTHER, Metrics


def _requests(metrics: Metrics) -> dict[tuple[str, str, str], float]:
    families = text_string_to_metric_families(metrics.render().decode())
    family = next(f for f in families if f.name == "gpu_webhook_admission_requests")
    return {
        (s.labels["endpoint"], s.labels["decision"], s.labels["policy"]): s.value
        for s in family.samples
        if s.name.endswith("_total")
    }


def test_each_policy_counts_apart_and_allowed_requests_carry_none() -> None:
    metrics = Metrics()
    metrics.observe("validate", "allowed", 0.001)
    metrics.observe("validate", "denied", 0.001, "gpu-no-privileged-containers")
    metrics.observe("validate", "denied", 0.001, "gpu-no-privileged-containers")
    metrics.observe("mutate", "warned", 0.001, "GPUQuota/team-a")
    assert _requests(metrics) == {
        ("validate", "allowed", ""): 1.0,
        ("validate", "denied", "gpu-no-privileged-containers"): 2.0,
        ("mutate", "warned", "GPUQuota/team-a"): 1.0,
    }


def test_names_past_the_cap_are_counted_as_other() -> None:
    metrics = Metrics()
    for index in range(MAX_POLICY_LABELS + 5):
        metrics.observe("validate", "denied", 0.001, f"policy-{index}")
    metrics.observe("validate", "denied", 0.001, "policy-0")  # a name kept stays kept
    counts = _requests(metrics)
    assert len(counts) == MAX_POLICY_LABELS + 1
    assert counts[("validate", "denied", OTHER)] == 5.0
    assert counts[("validate", "denied", "policy-0")] == 2.0


@given(st.lists(st.text(max_size=20), max_size=3 * MAX_POLICY_LABELS))
def test_the_series_stay_bounded_whatever_the_names(names: list[str]) -> None:
    metrics = Metrics()
    for name in names:
        metrics.observe("validate", "denied", 0.001, name)
    counts = _requests(metrics)
    assert len(counts) <= MAX_POLICY_LABELS + 2  # the kept names, OTHER and ""
    assert sum(counts.values()) == len(names)
