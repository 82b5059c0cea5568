"""Mean utilization per namespace over time, from raw range series, for the report's charts. Pure."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence

from webhook.config import PodLabels
from webhook.utilization.labels import PodRef, device_of, pod_reader
from webhook.utilization.prometheus import Series

Points = list[tuple[float, float]]
SeriesKey = tuple[tuple[str, str, str, str], PodRef]


def namespace_timelines(
    answers: Mapping[str, Sequence[Series]], pod_labels: PodLabels = "auto"
) -> dict[str, Points]:
    """Per namespace, the mean over its GPUs at each step; engine-active wins where a series has it."""
    read_pod = pod_reader(pod_labels, (s.labels for series in answers.values() for s in series))
    chosen: dict[SeriesKey, Series] = {}
    for name in ("util", "active"):  # a later name replaces an earlier one for the same GPU and pod
        for series in answers.get(name, ()):
            pod = read_pod(series.labels)
            if pod is not None:
                chosen[(device_of(series.labels).key, pod)] = series
    steps: dict[str, dict[float, list[float]]] = defaultdict(lambda: defaultdict(list))
    for (_, pod), series in chosen.items():
        for at, value in series.points:
            steps[pod.namespace][at].append(value)
    return {
        namespace: [(at, sum(values) / len(values)) for at, values in sorted(by_time.items())]
        for namespace, by_time in sorted(steps.items())
    }
