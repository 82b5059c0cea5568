"""The pure analysis and advice: tables for the cases that matter, properties for the rest."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.support.pods import gpu_pod
from tests.utilization.rows import A100_40, A100_80, H100_80, T4, row
from webhook.mutation.engine import mutate_object
from webhook.policy.loader import load_directory
from webhook.sharing_policy import SharingMode
from webhook.utilization import analysis
from webhook.utilization.advice import Capabilities, fit
from webhook.utilization.analysis import Thresholds
from webhook.utilization.owners import OwnerIndex, Workload
from webhook.utilization.promql import Window
from webhook.utilization.report import as_json, build_report
from webhook.utilization.usage import DeviceUsage, FleetReading

THRESHOLDS = Thresholds()
ALL_MODES: tuple[SharingMode, ...] = ("mig", "hami", "kai", "timeslice", "mps")


def usages(*rows: DeviceUsage, index: OwnerIndex | None = None) -> list[analysis.WorkloadUsage]:
    return analysis.workloads(rows, index or OwnerIndex(), THRESHOLDS)


def only(*rows: DeviceUsage) -> analysis.WorkloadUsage:
    found = usages(*rows)
    assert len(found) == 1
    return found[0]


def test_reservations_count_whole_gpus_mig_instances_and_shared_gpus() -> None:
    found = usages(
        row(index=0, pod="a-0"),
        row(index=1, pod="a-1"),
        row(index=2, pod="gone-0", present=False),  # held earlier in the window, not now
        row(index=3, pod="s-bcdfg", namespace="t"),
        row(index=3, pod="s-hjklm", namespace="t"),  # two pods of one workload time-slice a GPU
        row(index=4, pod="s-bcdfg", namespace="t"),
        row(index=4, pod="other", namespace="t"),  # and share another with someone else
        row("m", 0, pod="mig-0", model=A100_80, mig=("3g.40gb", 1)),
        row("m", 0, pod="mig-1", model=A100_80, mig=("1g.10gb", 2)),
    )
    reserved = {u.workload.describe(): (u.gpus_reserved, u.current) for u in found}
    assert reserved == {
        "StatefulSet/a": (2.0, "exclusive"),
        # A slice is its compute slices over the card's seven, as GPUQuota counts it: 3/7 + 1/7.
        "StatefulSet/mig": (3 / 7 + 1 / 7, "mig 1g.10gb,3g.40gb"),
        "Job/s": (1.5, "shared"),
        "Pod/other": (0.5, "shared"),
    }


@pytest.mark.parametrize(
    ("util", "state"),
    [
        ((1.0, 3.0), "idle"),
        ((4.9, 60.0), "idle"),
        ((10.0, 40.0), "underused"),
        ((30.0, 50.0), "busy"),
        (None, "no data"),
    ],
)
def test_states(util: tuple[float, float] | None, state: str) -> None:
    assert only(row(pod="w-0", util=util)).state == state


def test_unallocated_gpus_are_those_reporting_now_that_no_pod_holds() -> None:
    rows = [row(index=0), row(index=1, pod="p"), row(index=1), row(index=2, present=False)]
    assert [d.index for d in analysis.unallocated(rows)] == ["0"]


FITS = [
    # (model, util p95, memory p95 MiB, modes, fit)
    (A100_40, 3.0, 2600, ("mig", "timeslice"), "mig 1g.5gb"),
    (H100_80, 19.5, 12000, ("mig", "timeslice"), "mig 2g.20gb"),
    (H100_80, 19.5, 12000, ("timeslice",), "timeslice"),  # 15Gi fits a quarter of 80GB; 25% compute
    (H100_80, 30.0, 12000, ("timeslice",), None),  # 38% compute is more than a quarter
    (T4, 3.0, 2000, ("mig", "timeslice"), "timeslice"),  # no MIG on a T4
    (T4, 3.0, 2000, ("mig",), None),
    (T4, 3.0, 5000, ("timeslice",), None),  # 7Gi is more than a quarter of 15GB
    (A100_40, 10.0, 2600, ("hami",), "hami 4Gi 13%"),
    (A100_40, 10.0, 2600, ("kai",), "kai 4Gi"),
    (A100_40, 40.0, 30000, ("mig",), None),  # 37.5Gi needs the whole card: nothing freed
    (A100_40, 60.0, 2000, ALL_MODES, None),  # busy
]


@pytest.mark.parametrize(("model", "p95", "memory", "modes", "expected"), FITS)
def test_fits(
    model: str, p95: float, memory: float, modes: tuple[SharingMode, ...], expected: str | None
) -> None:
    usage = only(row(pod="w-0", model=model, util=(p95 / 2, p95), memory=(memory, memory)))
    found = fit(usage, THRESHOLDS, Capabilities(modes))
    assert (found.describe() if found else None) == expected


def test_a_mig_instance_is_right_sized_with_its_utilization_scaled_to_the_card() -> None:
    # 50% of a 3g instance is 21% of the card (27% with headroom): 2g.20gb holds it, 1g would not.
    usage = only(row(pod="w-0", model=A100_80, util=(20.0, 24.0), memory=(3000, 3000), mig=("3g.40gb", 1)))
    found = fit(usage, Thresholds(busy_percent=80), Capabilities(("mig",)))
    assert found is not None and found.describe() == "mig 1g.10gb"
    usage = only(row(pod="w-0", model=A100_80, util=(40.0, 50.0), memory=(3000, 3000), mig=("3g.40gb", 1)))
    found = fit(usage, Thresholds(busy_percent=80), Capabilities(("mig",)))
    assert found is not None and found.describe() == "mig 2g.20gb"


def test_gpus_already_shared_get_no_advice() -> None:
    usage = only(row(pod="s-bcdfg"), row(pod="s-hjklm"))
    assert usage.current == "shared" and fit(usage, THRESHOLDS, Capabilities(ALL_MODES)) is None


def _reading(*rows: DeviceUsage) -> FleetReading:
    return FleetReading(1_800_000_000.0, Window.parse("7d"), tuple(rows))


def _report(
    *rows: DeviceUsage, index: OwnerIndex | None = None, modes: tuple[SharingMode, ...] = ("mig",)
) -> Any:
    return build_report(_reading(*rows), index or OwnerIndex(), THRESHOLDS, Capabilities(modes), "test")


BUSY = (90.0, 99.0)


def test_a_namespace_of_candidates_gets_one_policy_for_the_namespace() -> None:
    report = _report(
        row(index=0, pod="nb-0", namespace="lab"),
        row(index=1, pod="api-bcdfghj-klmnp", namespace="lab", util=(10.0, 20.0), memory=(9000, 9500)),
    )
    [rec] = report.recommendations
    assert rec.namespace == "lab" and rec.selector is None and len(rec.workloads) == 2
    assert rec.policy["spec"]["match"] == {"namespaces": ["lab"]}
    assert rec.fit.describe() == "mig 3g.20gb"  # the larger need: 12Gi and 25% of the card
    assert report.idle_namespaces == ()  # 10% mean on one of two GPUs: not idle


def test_busy_neighbours_keep_candidates_out_without_labels_and_get_a_selector_with_them() -> None:
    rows = (
        row(index=0, pod="trainer-0", namespace="ml", util=BUSY),
        row(index=1, pod="debug", namespace="ml"),
    )
    report = _report(*rows)
    assert report.recommendations == ()
    assert report.notes and "ml/Pod/debug" in report.notes[0] and "--inventory" in report.notes[0]
    pods = [
        {"kind": "Pod", "metadata": {"name": "debug", "namespace": "ml", "labels": {"app": "debug"}}},
        {"kind": "Pod", "metadata": {"name": "trainer-0", "namespace": "ml", "labels": {"app": "trainer"}}},
    ]
    report = _report(*rows, index=OwnerIndex(pods))
    [rec] = report.recommendations
    assert rec.workloads == (Workload("ml", "Pod", "debug"),)
    assert rec.policy["spec"]["match"] == {
        "namespaces": ["ml"],
        "podSelector": {"matchLabels": {"app": "debug"}},
    }
    assert rec.policy["spec"]["priority"] > 10


@pytest.mark.parametrize(
    ("namespace", "pod"),
    [
        ("team-*", "nb-0"),
        ("ml", "x\nspec: {}"),
        ("ML", "nb-0"),
        ("ml", "../../etc-0"),
        ("a" * 64, "nb-0"),
        ("ml\n", "nb-0"),
        ("ml", "nb\n-0"),
    ],
)
def test_names_kubernetes_would_refuse_get_no_policy(namespace: str, pod: str) -> None:
    report = _report(row(pod=pod, namespace=namespace))
    assert report.recommendations == ()
    assert report.notes and "invalid names" in report.notes[0]


def test_the_report_orders_idle_namespaces_first_and_totals_what_it_frees() -> None:
    report = _report(
        row(index=0, pod="t-0", namespace="busy", util=BUSY),
        row(index=1, pod="n-0", namespace="zz-idle"),
        row(index=2, pod="n-1", namespace="zz-idle"),
    )
    assert [n.namespace for n in report.namespaces] == ["zz-idle", "busy"]
    assert report.idle_namespaces == ("zz-idle",)
    assert report.gpus_freed == pytest.approx(2 - 2 / 7)
    document = as_json(report)
    assert document["idleNamespaces"] == ["zz-idle"]
    assert document["namespaces"][1]["workloads"][0]["fits"] is None


def _check_policies(report: Any, directory: Path) -> None:
    directory.mkdir()
    for rec in report.recommendations:
        (directory / f"{rec.name}.yaml").write_text(yaml.safe_dump(rec.policy))
    policies = load_directory(directory)
    assert sorted(p.name for p in policies.sharing) == sorted(r.name for r in report.recommendations)


MODELS = st.sampled_from([A100_40, A100_80, H100_80, T4])
MODE_ORDERS = st.permutations(ALL_MODES).flatmap(lambda modes: st.integers(1, 5).map(lambda n: modes[:n]))


@st.composite
def fleets(draw: st.DrawFn) -> list[DeviceUsage]:
    rows = []
    for index in range(draw(st.integers(1, 8))):
        model = draw(MODELS)
        total = {A100_40: 40536.0, A100_80: 81251.0, H100_80: 81559.0, T4: 15360.0}[model]
        p95 = draw(st.one_of(st.floats(0, 10), st.floats(0, 100)))  # mostly light: advice to check
        memory = draw(st.one_of(st.floats(0, total / 6), st.floats(0, total)))
        rows.append(
            row(
                f"n{index % 3}",
                index,
                draw(st.sampled_from([None, f"w{index % 4}-0", f"w{index % 4}-1", "solo"])),
                draw(st.sampled_from(["a", "b", "c"])),
                model=model,
                util=draw(st.sampled_from([None, (p95 * draw(st.floats(0, 1)), p95)])),
                memory=(memory, memory),
            )
        )
    return rows


PROPERTY = settings(
    max_examples=150,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],  # the profile's, too
)


@PROPERTY
@given(rows=fleets(), modes=MODE_ORDERS)
def test_every_recommended_policy_compiles_frees_something_and_spares_busy_work(
    rows: list[DeviceUsage], modes: tuple[SharingMode, ...], tmp_path_factory: pytest.TempPathFactory
) -> None:
    report = _report(*rows, modes=modes)
    busy = {u.workload for n in report.namespaces for u in n.workloads if u.state in ("busy", "no data")}
    for rec in report.recommendations:
        assert rec.gpus_freed > 0 and 0 < rec.fit.share < 1 and rec.fit.mode in modes
        assert not busy & set(rec.workloads)
        covered = {w for n in report.namespaces if n.namespace == rec.namespace for w in n.workloads}
        if rec.selector is None:  # a namespace policy: nothing busy may live there
            assert all(u.state not in ("busy", "no data") for u in covered)
    _check_policies(report, tmp_path_factory.mktemp("policies") / "p")


@PROPERTY
@given(rows=fleets())
def test_the_webhook_gives_a_pod_the_mig_profile_the_advice_names(rows: list[DeviceUsage]) -> None:
    report = _report(*rows, modes=("mig",))
    policies = {r.name: r for r in report.recommendations}
    from tests.support.policies import sharing_policy

    for name, rec in policies.items():
        policy = sharing_policy(yaml.safe_dump(rec.policy["spec"]), name)
        limits = mutate_object(gpu_pod("p", rec.namespace), policy).object["spec"]["containers"][0][
            "resources"
        ]
        assert limits["limits"] == {f"nvidia.com/mig-{rec.fit.profile}": "1"}
