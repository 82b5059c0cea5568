"""check_quota(): decisions and messages against a plain list of existing pods. No API."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from fractions import Fraction
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.support.pods import gpu_pod, make_pod, quota, res
from tests.support.reviews import make_review
from webhook.accounting.demand import QuotaSettings, pod_demand
from webhook.accounting.tally import Tally
from webhook.accounting.usage import Usage, total
from webhook.quota.check import check_quota
from webhook.quota.policy import GPUQuota
from webhook.types import AdmissionRequest

GPU = "nvidia.com/gpu"
MIG_1G = "nvidia.com/mig-1g.10gb"


class PodsView:
    """The simplest QuotaView: sum the demand of the given pods."""

    def __init__(self, pods: Sequence[dict[str, Any]], labels: Mapping[str, Mapping[str, str]] | None = None):
        self.pods = pods
        self.labels = labels or {}

    def namespace_labels(self, namespace: str) -> Mapping[str, str]:
        return self.labels.get(namespace, {})

    def usage(self, namespace: str, settings: QuotaSettings) -> Usage:
        return total(pod_demand(p, settings) for p in self.pods if p["metadata"]["namespace"] == namespace)

    def tally(self, namespace: str, settings: QuotaSettings) -> Tally:
        return Tally.of(self.usage(namespace, settings))

    def dra(self) -> None:
        return None

    def claims_in_use(self, namespace: str) -> frozenset[str]:
        return frozenset()


def request(pod: dict[str, Any], **options: Any) -> AdmissionRequest:
    review: AdmissionRequest = make_review(pod, **options)["request"]
    return review


ML_TEAM = quota("ml-team", {"gpus": 8}, match={"namespaces": ["ml-team"]})
SEVEN_IN_USE = [gpu_pod(f"old-{i}", gpus=1) for i in range(7)]


def test_the_denial_says_where_the_user_stands() -> None:
    outcome = check_quota(request(gpu_pod("new", gpus=2)), [ML_TEAM], PodsView(SEVEN_IN_USE))
    decision = outcome.decision()
    assert not decision.allowed
    assert decision.code == 403
    assert decision.message == (
        'GPU quota "ml-team" exceeded in namespace ml-team: this pod needs 2 GPUs, 7 of 8 are in use '
        "(limits: gpus used 7, asked 2, limit 8)"
    )
    assert outcome.reserve_key is None


def test_a_pod_that_fits_is_allowed_and_reserved() -> None:
    outcome = check_quota(request(gpu_pod("new", gpus=1)), [ML_TEAM], PodsView(SEVEN_IN_USE))
    assert outcome.decision().allowed
    assert outcome.reserve_key == "ml-team/new"
    assert (outcome.checks[0].before.gpus, outcome.checks[0].after.gpus) == (Fraction(7), Fraction(8))


def test_finished_pods_use_nothing() -> None:
    finished = [gpu_pod(f"done-{i}", gpus=4, phase="Succeeded") for i in range(4)]
    assert check_quota(request(gpu_pod("new", gpus=8)), [ML_TEAM], PodsView(finished)).allowed


def test_namespaces_without_a_quota_are_not_checked() -> None:
    pod = gpu_pod("new", namespace="other", gpus=100)
    outcome = check_quota(request(pod), [ML_TEAM], PodsView([]))
    assert not outcome.applies
    assert outcome.decision().allowed
    assert outcome.reserve_key is None


def test_other_namespaces_do_not_count() -> None:
    busy = [gpu_pod(f"x-{i}", namespace="other", gpus=8) for i in range(3)]
    assert check_quota(request(gpu_pod("new", gpus=8)), [ML_TEAM], PodsView(busy)).allowed


def test_each_matching_namespace_gets_its_own_budget() -> None:
    per_team = quota("per-team", {"gpus": 4}, match={"namespaces": ["team-*"]})
    pods = [gpu_pod("a", namespace="team-a", gpus=4)]
    view = PodsView(pods)
    assert not check_quota(request(gpu_pod("n", namespace="team-a")), [per_team], view).allowed
    assert check_quota(request(gpu_pod("n", namespace="team-b", gpus=4)), [per_team], view).allowed


def test_namespace_selector_uses_namespace_labels() -> None:
    selected = quota("labelled", {"gpus": 1}, match={"namespaceSelector": {"matchLabels": {"gpu": "capped"}}})
    view = PodsView([], labels={"capped": {"gpu": "capped"}})
    assert not check_quota(request(gpu_pod("n", namespace="capped", gpus=2)), [selected], view).allowed
    assert check_quota(request(gpu_pod("n", namespace="free", gpus=2)), [selected], view).allowed


def test_per_profile_mig_counts() -> None:
    mig = quota("mig", {"resources": {MIG_1G: 14}}, match={"namespaces": ["ml-team"]})
    existing = [make_pod("old", containers=[res("a", {MIG_1G: 13})])]
    asking_two = make_pod("new", containers=[res("a", {MIG_1G: 2})])
    decision = check_quota(request(asking_two), [mig], PodsView(existing)).decision()
    assert not decision.allowed
    assert "this pod needs 2 nvidia.com/mig-1g.10gb, 13 of 14 are in use" in decision.message
    other_profile = make_pod("new", containers=[res("a", {"nvidia.com/mig-2g.20gb": 3})])
    assert check_quota(request(other_profile), [mig], PodsView(existing)).allowed


def test_hami_memory_times_count_against_gpu_memory() -> None:
    capped = quota("mem", {"gpuMemory": "90Gi"}, match={"namespaces": ["ml-team"]})
    existing = [make_pod("old", containers=[res("a", {GPU: 2, "nvidia.com/gpumem": 20 * 1024})])]
    asking = make_pod("new", containers=[res("a", {GPU: 3, "nvidia.com/gpumem": 20 * 1024})])
    decision = check_quota(request(asking), [capped], PodsView(existing)).decision()
    assert not decision.allowed
    assert "this pod needs 60Gi of GPU memory, 40Gi of 90Gi are in use" in decision.message


def test_every_relevant_limit_is_listed_with_used_and_asked() -> None:
    both = quota("both", {"gpus": 8, "gpuMemory": "320Gi"}, match={"namespaces": ["ml-team"]})
    settings = QuotaSettings(card_memory_mib=80 * 1024)
    outcome = check_quota(request(gpu_pod("new", gpus=2)), [both], PodsView(SEVEN_IN_USE), settings)
    message = outcome.decision().message
    assert "this pod needs 2 GPUs, 7 of 8 are in use" in message
    assert "gpus used 7, asked 2, limit 8" in message
    assert "gpuMemory used 560Gi, asked 160Gi, limit 320Gi" in message


def test_a_quota_with_its_own_accounting() -> None:
    hami = quota(
        "hami",
        {"gpus": 1},
        match={"namespaces": ["ml-team"]},
        accounting={"gpuModel": "A100-80GB"},
    )
    half = make_pod("new", containers=[res("a", {GPU: 1, "nvidia.com/gpumem": 40 * 1024})])
    view = PodsView([make_pod("old", containers=[res("a", {GPU: 1, "nvidia.com/gpumem": 40 * 1024})])])
    assert check_quota(request(half), [hami], view).allowed
    assert not check_quota(request(half), [hami], PodsView([*view.pods, *view.pods])).allowed


@pytest.mark.parametrize(
    ("action", "allowed", "warned"), [("deny", False, True), ("warn", True, True), ("dryrun", True, False)]
)
def test_enforcement_actions(action: str, allowed: bool, warned: bool) -> None:
    capped = quota("cap", {"gpus": 8}, match={"namespaces": ["ml-team"]}, enforcementAction=action)
    decision = check_quota(request(gpu_pod("new", gpus=2)), [capped], PodsView(SEVEN_IN_USE)).decision()
    assert decision.allowed is allowed
    if allowed:
        assert bool(decision.warnings) is warned
        assert all(len(w) < 120 for w in decision.warnings)
    assert [f.policy for f in decision.findings] == ["GPUQuota/cap"]
    assert decision.findings[0].action == action


def test_warned_pods_are_still_reserved() -> None:
    capped = quota("cap", {"gpus": 8}, match={"namespaces": ["ml-team"]}, enforcementAction="warn")
    assert check_quota(request(gpu_pod("new", gpus=2)), [capped], PodsView(SEVEN_IN_USE)).reserve_key


def test_dry_run_consumes_nothing() -> None:
    outcome = check_quota(request(gpu_pod("new"), dry_run=True), [ML_TEAM], PodsView([]))
    assert outcome.allowed and outcome.reserve_key is None


def test_invalid_quantities_are_a_clear_denial_never_an_exception() -> None:
    bad = make_pod("new", containers=[res("trainer", {GPU: "many"})])
    decision = check_quota(request(bad), [ML_TEAM], PodsView([])).decision()
    assert not decision.allowed and decision.code == 422
    assert "container 'trainer'" in decision.message
    assert "'many' is not a valid quantity" in decision.message


@pytest.mark.parametrize(
    "options",
    [
        {"operation": "UPDATE", "old": gpu_pod("new", gpus=1)},
        {"operation": "DELETE", "old": gpu_pod("new", gpus=1)},
    ],
)
def test_only_pod_creation_is_counted(options: dict[str, Any]) -> None:
    pod = gpu_pod("new", gpus=9) if options["operation"] == "UPDATE" else None
    outcome = check_quota(request(pod, **options) if pod else _delete(options), [ML_TEAM], PodsView([]))
    assert not outcome.applies


def _delete(options: dict[str, Any]) -> AdmissionRequest:
    review: AdmissionRequest = make_review(None, **options)["request"]
    return review


def test_workloads_are_not_counted() -> None:
    deployment = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "d", "namespace": "ml-team"},
        "spec": {"template": gpu_pod("t", gpus=9)},
    }
    assert not check_quota(request(deployment), [ML_TEAM], PodsView([])).applies


def test_limits_a_pod_does_not_touch_are_not_checked() -> None:
    over = [make_pod("old", containers=[res("a", {MIG_1G: 20})])]
    mig = quota("mig", {"resources": {MIG_1G: 14}, "gpus": 100}, match={"namespaces": ["ml-team"]})
    outcome = check_quota(request(gpu_pod("new", gpus=1)), [mig], PodsView(over))
    assert outcome.allowed
    assert [limit.dimension for limit in outcome.checks[0].limits] == ["gpus"]


def test_the_audit_record_has_usage_before_and_after() -> None:
    audit = check_quota(request(gpu_pod("new", gpus=1)), [ML_TEAM], PodsView(SEVEN_IN_USE)).audit()
    assert audit["pod"] == "ml-team/new"
    assert audit["demand"]["gpus"] == "1"
    check = audit["checks"][0]
    assert (check["before"]["gpus"], check["after"]["gpus"]) == ("7", "8")
    assert check["limits"]["gpus"] == {"limit": "8", "used": "7", "asked": "1"}


def test_quotas_match_in_order_and_all_apply() -> None:
    loose = quota("loose", {"gpus": 100}, match={"namespaces": ["ml-*"]})
    quotas: list[GPUQuota] = [loose, ML_TEAM]
    outcome = check_quota(request(gpu_pod("new", gpus=2)), quotas, PodsView(SEVEN_IN_USE))
    assert [c.quota for c in outcome.checks] == ["loose", "ml-team"]
    assert [c.exceeded for c in outcome.checks] == [False, True]


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3),
    max_leaves=12,
)
pod_parts = st.fixed_dictionaries(
    {},
    optional={
        "metadata": json_values
        | st.fixed_dictionaries({}, optional={"namespace": json_values, "annotations": json_values}),
        "spec": json_values
        | st.fixed_dictionaries(
            {},
            optional={
                "containers": json_values | st.lists(st.fixed_dictionaries({"resources": json_values})),
                "initContainers": json_values,
            },
        ),
        "status": json_values,
    },
)


@given(pod=pod_parts, namespace=st.sampled_from(["ml-team", ""]))
def test_no_pod_makes_the_check_raise(pod: dict[str, Any], namespace: str) -> None:
    review = make_review(gpu_pod("p"), namespace=namespace)
    review["request"]["object"] = {"apiVersion": "v1", "kind": "Pod", **pod}
    outcome = check_quota(review["request"], [ML_TEAM, quota("all", {"gpus": 1})], PodsView([]))
    outcome.decision()
    outcome.audit()
