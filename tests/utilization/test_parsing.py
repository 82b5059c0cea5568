"""Pure readings of DCGM labels, card names, pod names and PromQL windows."""

from __future__ import annotations

import pytest

from webhook.errors import ConfigError
from webhook.utilization import cards
from webhook.utilization.labels import PodRef, device_of, pod_reader
from webhook.utilization.owners import OwnerIndex, Workload, owner_from_name
from webhook.utilization.promql import Window, check_selector, timeline_queries, window_queries


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("7d", 604800), ("30m", 1800), ("1h30m", 5400), ("90s", 90), ("500ms", 0.5), ("2w", 1209600)],
)
def test_windows_are_prometheus_durations(text: str, seconds: float) -> None:
    assert Window.parse(text).seconds == seconds


@pytest.mark.parametrize("text", ["", "7", "d", "7 d", "-1h", "1.5h", "7d]", "0s", "1h; drop", "7d\n"])
def test_anything_else_is_refused_before_it_reaches_promql(text: str) -> None:
    with pytest.raises(ConfigError, match="window"):
        Window.parse(text)


@pytest.mark.parametrize(
    ("selector", "ok"),
    [
        ("", True),
        ('{cluster="prod"}', True),
        ('{cluster="prod", Hostname=~"gpu-.*"}', True),
        ('{a!="b",c!~"d"}', True),
        ("{cluster=prod}", False),
        ('{cluster="prod"} or up', False),
        ('cluster="prod"', False),
        ('{cluster="prod"}\n', False),
    ],
)
def test_selectors_are_label_matchers_only(selector: str, ok: bool) -> None:
    if ok:
        assert check_selector(selector) == selector
    else:
        with pytest.raises(ConfigError):
            check_selector(selector)


def test_window_queries_use_the_window_the_selector_and_both_utilization_metrics() -> None:
    queries = window_queries(Window.parse("7d"), '{cluster="a"}')
    assert queries["util_p95"] == 'quantile_over_time(0.95, DCGM_FI_DEV_GPU_UTIL{cluster="a"}[7d])'
    assert queries["active_mean"] == 'avg_over_time(DCGM_FI_PROF_GR_ENGINE_ACTIVE{cluster="a"}[7d]) * 100'
    assert queries["memory_total"] == 'DCGM_FI_DEV_FB_USED{cluster="a"} + DCGM_FI_DEV_FB_FREE{cluster="a"}'


@pytest.mark.parametrize(
    ("model", "total", "card"),
    [
        ("NVIDIA A100-SXM4-40GB", 40536, "A100-40GB"),
        ("NVIDIA A100-PCIE-40GB", 40960, "A100-40GB"),
        ("NVIDIA A100 80GB PCIe", 81251, "A100-80GB"),
        ("NVIDIA A100-SXM4-80GB", 81920, "A100-80GB"),
        ("NVIDIA H100 80GB HBM3", 81559, "H100-80GB"),
        ("NVIDIA H100 NVL", 95830, "H100-94GB"),
        ("NVIDIA H200", 143771, "H200-141GB"),
        ("Tesla T4", 15360, None),
        ("NVIDIA L4", 23034, None),
        ("NVIDIA A100-SXM4-40GB", None, None),
        ("NVIDIA A100-SXM4-40GB", 16000, None),  # a MIG slice's memory is not a card's
    ],
)
def test_card_models_from_dcgm_names_and_memory(model: str, total: float | None, card: str | None) -> None:
    assert cards.card_model(model, total) == card


@pytest.mark.parametrize(
    ("model", "profile", "card"),
    [
        ("NVIDIA A100 80GB PCIe", "3g.40gb", "A100-80GB"),
        ("NVIDIA A100-SXM4-40GB", "3g.20gb", "A100-40GB"),
        ("NVIDIA A100-SXM4-40GB", "1g.10gb", None),  # in both A100 tables: cannot tell
        ("NVIDIA H100 NVL", "1g.12gb", "H100-94GB"),
        ("Tesla T4", "1g.5gb", None),
    ],
)
def test_mig_cards_from_the_profile(model: str, profile: str, card: str | None) -> None:
    assert cards.mig_card_model(model, profile) == card


def test_product_labels_follow_gpu_feature_discovery() -> None:
    assert cards.product_label("NVIDIA H100 80GB HBM3") == "NVIDIA-H100-80GB-HBM3"


def test_a_mig_series_is_its_own_device() -> None:
    labels = {"Hostname": "n", "UUID": "GPU-1", "gpu": "0", "GPU_I_ID": "3", "GPU_I_PROFILE": "1g.10gb"}
    device = device_of(labels)
    assert device.is_mig and device.key == ("n", "GPU-1", "0", "3")
    assert device.describe() == "n GPU 0 MIG 1g.10gb #3"


EXPORTED = {
    "job": "dcgm",
    "namespace": "gpu-operator",
    "pod": "dcgm-x",
    "exported_namespace": "ml",
    "exported_pod": "p",
    "exported_container": "c",
}
PLAIN = {"job": "other", "namespace": "ml", "pod": "p", "container": "c"}
TARGET_ONLY = {"job": "dcgm", "namespace": "gpu-operator", "pod": "dcgm-x"}


@pytest.mark.parametrize(
    ("scheme", "labels", "expected"),
    [
        ("auto", EXPORTED, PodRef("ml", "p", "c")),
        ("auto", PLAIN, PodRef("ml", "p", "c")),  # another job, scraped with honor_labels
        ("auto", TARGET_ONLY, None),  # the exporter's own pod, in a job that uses exported_*
        ("plain", TARGET_ONLY, PodRef("gpu-operator", "dcgm-x", "")),
        ("exported", PLAIN, None),
        ("exported", EXPORTED, PodRef("ml", "p", "c")),
        ("plain", {"pod": "p"}, None),  # a pod without a namespace names nothing
    ],
)
def test_pod_mapping_with_and_without_honor_labels(
    scheme: str, labels: dict[str, str], expected: PodRef | None
) -> None:
    read = pod_reader(scheme, [EXPORTED, PLAIN, TARGET_ONLY])  # type: ignore[arg-type]
    assert read(labels) == expected


@pytest.mark.parametrize(
    ("pod", "kind", "name"),
    [
        ("notebook-7d9f8b6c5d-x2k4p", "Deployment", "notebook"),
        ("my-api-v2-5f6d8c7b9-abcde", "Pod", "my-api-v2-5f6d8c7b9-abcde"),  # a, e are not in the alphabet
        ("my-api-v2-5f6d8c7b9-bcdfg", "Deployment", "my-api-v2"),
        ("trainer-0", "StatefulSet", "trainer"),
        ("trainer-12", "StatefulSet", "trainer"),
        ("eval-x7k2m", "Job", "eval"),
        ("nightly-28917460-x7k2m", "CronJob", "nightly"),
        ("debug-shell", "Pod", "debug-shell"),
        ("single", "Pod", "single"),
    ],
)
def test_owners_from_pod_names(pod: str, kind: str, name: str) -> None:
    assert owner_from_name("ns", pod) == Workload("ns", kind, name)


def _obj(
    kind: str, name: str, owner: tuple[str, str] | None = None, labels: dict[str, str] | None = None
) -> dict[str, object]:
    metadata: dict[str, object] = {"name": name, "namespace": "ml", "labels": labels or {}}
    if owner:
        metadata["ownerReferences"] = [{"kind": owner[0], "name": owner[1], "controller": True}]
    return {"kind": kind, "metadata": metadata}


def test_an_inventory_follows_owner_references_to_the_top_controller() -> None:
    index = OwnerIndex(
        [
            _obj("Pod", "odd-name", ("ReplicaSet", "web-abc"), {"app": "web", "pod-template-hash": "abc"}),
            _obj("ReplicaSet", "web-abc", ("Deployment", "web")),
            _obj("Pod", "job-pod", ("Job", "nightly-1")),
            _obj("Job", "nightly-1", ("CronJob", "nightly")),
            _obj("Pod", "ds-pod", ("DaemonSet", "agent")),
        ]
    )
    assert index.owner("ml", "odd-name") == Workload("ml", "Deployment", "web")
    assert index.owner("ml", "job-pod") == Workload("ml", "CronJob", "nightly")
    assert index.owner("ml", "ds-pod") == Workload("ml", "DaemonSet", "agent")
    assert index.owner("ml", "trainer-3") == Workload("ml", "StatefulSet", "trainer")  # not in it: by name


def test_selectors_are_the_labels_every_pod_shares_without_controller_bookkeeping() -> None:
    index = OwnerIndex(
        [
            _obj("Pod", "a", labels={"app": "nb", "team": "x", "pod-template-hash": "1", "idx": "0"}),
            _obj("Pod", "b", labels={"app": "nb", "team": "x", "pod-template-hash": "1", "idx": "1"}),
            _obj("Pod", "c", labels={"pod-template-hash": "1"}),
        ]
    )
    workload = Workload("ml", "Deployment", "nb")
    assert index.selector(workload, ["a", "b"]) == {"app": "nb", "team": "x"}
    assert index.selector(workload, ["a", "unknown"]) is None
    assert index.selector(workload, ["c"]) is None  # nothing left to select by


@pytest.mark.parametrize(
    ("step", "range_"), [(10080.0, "[10080000ms]"), (0.3333, "[333ms]"), (0.0001, "[1ms]")]
)
def test_timeline_steps_average_over_exactly_one_step(step: float, range_: str) -> None:
    queries = timeline_queries(step, '{cluster="a"}')
    assert queries["util"] == f'avg_over_time(DCGM_FI_DEV_GPU_UTIL{{cluster="a"}}{range_})'
    assert queries["active"].endswith(f"{range_}) * 100")
