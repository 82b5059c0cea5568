"""Prometheus metrics, on a registry of our own (never the process-global one)."""

from __future__ import annotations

import logging
import platform
from collections.abc import Callable, Iterable, Iterator, Sequence

from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    disable_created_metrics,
    generate_latest,
)
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.exposition import CONTENT_TYPE_LATEST

from webhook import __version__

# The `policy` label of the request counter takes at most this many distinct values in one process;
# later ones are counted as OTHER. Its values are policy names and built-in rule ids, never request data.
MAX_POLICY_LABELS = 100
OTHER = "other"
LATENCY_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5)
CONTENT_TYPE = CONTENT_TYPE_LATEST

# The *_created series double the exposition size and no dashboard of ours reads them.
disable_created_metrics()  # type: ignore[no-untyped-call]


class Metrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        self.requests = Counter(
            "gpu_webhook_admission_requests",
            "Admission requests answered, by endpoint, decision and the policy that denied or warned "
            '("" when none did).',
            ["endpoint", "decision", "policy"],
            registry=self.registry,
        )
        self.latency = Histogram(
            "gpu_webhook_admission_duration_seconds",
            "Time from request received to response ready.",
            ["endpoint", "decision"],
            buckets=LATENCY_BUCKETS,
            registry=self.registry,
        )
        self._children: dict[tuple[str, str, str], tuple[Counter, Histogram]] = {}
        self._policies: set[str] = set()
        self.policy_load_errors = Counter(
            "gpu_webhook_policy_load_errors",
            "Policy sets rejected at load or reload.",
            registry=self.registry,
        )
        self.policy_generation = Gauge(
            "gpu_webhook_policy_generation",
            "How many policy sets have been loaded successfully by this process.",
            registry=self.registry,
        )
        self.policy_documents_skipped = Gauge(
            "gpu_webhook_policy_documents_skipped",
            "Documents of the policy set in force that are of other projects' kinds, so not enforced.",
            registry=self.registry,
        )
        self.utilization_refresh_errors = Counter(
            "gpu_webhook_utilization_refresh_errors",
            "Failed reads of GPU utilization from Prometheus (placement hints then use older data or none).",
            registry=self.registry,
        )
        self.utilization_up = Gauge(
            "gpu_webhook_utilization_up",
            "1 when the last read of GPU utilization from Prometheus succeeded, else 0.",
            registry=self.registry,
        )
        self.utilization_last_success = Gauge(
            "gpu_webhook_utilization_last_success_timestamp_seconds",
            "Unix time of the last successful read of GPU utilization.",
            registry=self.registry,
        )
        self.utilization_nodes = Gauge(
            "gpu_webhook_utilization_nodes",
            "GPU nodes in the current utilization snapshot.",
            registry=self.registry,
        )
        build = Gauge(
            "gpu_webhook_build_info",
            "Build information.",
            ["version", "python"],
            registry=self.registry,
        )
        build.labels(version=__version__, python=platform.python_version()).set(1)

    def add_gauges(self, name: str, documentation: str, labels: Sequence[str], samples: GaugeSamples) -> None:
        """A gauge family computed when scraped, from state that lives elsewhere (caches, policies)."""
        self.registry.register(CallbackGauges(name, documentation, labels, samples))

    def observe(self, endpoint: str, decision: str, seconds: float, policy: str = "") -> None:
        """`policy` names what denied or warned (webhook.decision.Finding.policy), "" for none."""
        # labels() costs a lock and a tuple build per call; the children are few and kept.
        children = self._children.get((endpoint, decision, policy))
        if children is None:
            children = self._new_children(endpoint, decision, policy)
        children[0].inc()
        children[1].observe(seconds)

    def _new_children(self, endpoint: str, decision: str, policy: str) -> tuple[Counter, Histogram]:
        label = self._policy_label(policy)
        key = (endpoint, decision, label)
        children = self._children.get(key)
        if children is None:
            children = self._children[key] = (
                self.requests.labels(endpoint=endpoint, decision=decision, policy=label),
                self.latency.labels(endpoint=endpoint, decision=decision),
            )
        return children

    def _policy_label(self, policy: str) -> str:
        """The first MAX_POLICY_LABELS names keep their own series: a policy set that grows
        without end (or a bug feeding the label) costs one OTHER series, not the scrape."""
        if not policy or policy in self._policies:
            return policy
        if len(self._policies) >= MAX_POLICY_LABELS:
            return OTHER
        self._policies.add(policy)
        return policy

    def render(self) -> bytes:
        return generate_latest(self.registry)


GaugeSamples = Callable[[], Iterable[tuple[Sequence[str], float]]]


class CallbackGauges:
    """A prometheus_client collector whose samples come from a function; a failing function
    costs its own family, never the scrape."""

    def __init__(self, name: str, documentation: str, labels: Sequence[str], samples: GaugeSamples) -> None:
        self.name = name
        self.documentation = documentation
        self.labels = list(labels)
        self.samples = samples

    def describe(self) -> Iterator[Metric]:
        yield GaugeMetricFamily(self.name, self.documentation, labels=self.labels)

    def collect(self) -> Iterator[Metric]:
        family = GaugeMetricFamily(self.name, self.documentation, labels=self.labels)
        try:
            for values, value in self.samples():
                family.add_metric(list(values), value)
        except Exception:
            logging.getLogger(__name__).exception("metric samples failed", extra={"metric": self.name})
            return
        yield family
