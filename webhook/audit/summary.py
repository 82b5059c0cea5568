"""One streaming pass of aggregates: counts, denial reasons by rule, latency percentiles.

Memory grows with the number of distinct namespaces, policies and minutes (and seconds, up to
MAX_SECONDS of them, so that a short log can be charted finely), and eight bytes per record for
latencies; never with the records themselves.
"""

from __future__ import annotations

import math
import re
from array import array
from collections import Counter, defaultdict, deque
from collections.abc import Iterable
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any, TextIO

from webhook.audit.chain import Record

RECENT_DENIALS = 500
TOP = 10
EXAMPLES = 3
EXAMPLE_CHARS = 200
MAX_SECONDS = 3600  # per-second counts are kept until a log spans more distinct seconds than this
NO_RULE = "(no rule: the failure mode answered)"


def _per_second() -> defaultdict[str, Counter[str]] | None:
    return defaultdict(Counter)


@dataclass
class Stats:
    total: int = 0
    dry_run: int = 0
    first_time: str = ""
    last_time: str = ""
    decisions: Counter[str] = field(default_factory=Counter)
    endpoints: Counter[str] = field(default_factory=Counter)
    namespaces: Counter[str] = field(default_factory=Counter)
    denied_namespaces: Counter[str] = field(default_factory=Counter)
    findings: Counter[tuple[str, str]] = field(default_factory=Counter)
    denied_policies: Counter[str] = field(default_factory=Counter)
    sharing_modes: Counter[str] = field(default_factory=Counter)
    # Denials by the rule (policy or constraint) that denied, with a few distinct messages each.
    reasons: Counter[str] = field(default_factory=Counter)
    examples: dict[str, list[str]] = field(default_factory=dict)
    gpus: defaultdict[str, float] = field(default_factory=lambda: defaultdict(float))
    minutes: defaultdict[str, Counter[str]] = field(default_factory=lambda: defaultdict(Counter))
    seconds: defaultdict[str, Counter[str]] | None = field(default_factory=_per_second)
    recent_denials: deque[Record] = field(default_factory=lambda: deque(maxlen=RECENT_DENIALS))
    latencies: array[float] = field(default_factory=lambda: array("d"))

    def add(self, record: Record) -> None:
        decision = str(record.get("decision", "unknown"))
        namespace = str(record.get("namespace") or "(cluster)")
        moment = str(record.get("time", ""))
        self.total += 1
        if record.get("dryRun"):
            self.dry_run += 1
        if not self.first_time or moment < self.first_time:
            self.first_time = moment
        if moment > self.last_time:
            self.last_time = moment
        self.decisions[decision] += 1
        self.endpoints[str(record.get("endpoint", ""))] += 1
        self.namespaces[namespace] += 1
        self.minutes[moment[:16]][decision] += 1
        self._add_second(moment[:19], decision)
        if record.get("findings"):
            self._add_findings(record, decision == "denied")
        self._add_sharing(record)
        if "quota" in record or "gpus" in record:
            self._add_gpus(record, namespace)
        if decision == "denied":
            self._add_denial(record, namespace)
        latency = record.get("latencyMs")
        if isinstance(latency, int | float):
            self.latencies.append(latency)

    def percentile(self, p: float) -> float | None:
        """Nearest-rank percentile of the recorded latencies, in milliseconds."""
        if not self.latencies:
            return None
        ordered = sorted(self.latencies)
        return ordered[max(0, math.ceil(p / 100 * len(ordered)) - 1)]

    def _add_findings(self, record: Record, denied: bool) -> None:
        for finding in _listed(record.get("findings")):
            if isinstance(finding, dict):
                policy, action = str(finding.get("policy", "")), str(finding.get("action", ""))
                self.findings[(policy, action)] += 1
                if denied and action == "deny":
                    self.denied_policies[policy] += 1

    def _add_sharing(self, record: Record) -> None:
        mode = record.get("sharingMode")
        if mode or record.get("endpoint") == "mutate":
            self.sharing_modes[str(mode or "none")] += 1

    def _add_gpus(self, record: Record, namespace: str) -> None:
        gpus = admitted_gpus(record)
        if gpus:
            self.gpus[namespace] += gpus

    def _add_second(self, second: str, decision: str) -> None:
        if self.seconds is None:
            return
        if second not in self.seconds and len(self.seconds) >= MAX_SECONDS:
            self.seconds = None  # a long log: minutes are fine enough
            return
        self.seconds[second][decision] += 1

    def _add_denial(self, record: Record, namespace: str) -> None:
        self.denied_namespaces[namespace] += 1
        for rule, message in denial_reasons(record):
            self.reasons[rule] += 1
            examples = self.examples.setdefault(rule, [])
            if len(examples) < EXAMPLES and message not in examples:
                examples.append(message)
        self.recent_denials.append(record)


def denial_reasons(record: Record) -> list[tuple[str, str]]:
    """(rule, message) for each rule that denied: messages name pods, so they are grouped by the
    policy or constraint that wrote them. A denial without a deny finding is the failure mode's."""
    found: dict[str, str] = {}
    for finding in _listed(record.get("findings")):
        if isinstance(finding, dict) and finding.get("action") == "deny":
            rule = str(finding.get("policy", "")) or NO_RULE
            found.setdefault(rule, _example(finding.get("message")))
    return list(found.items()) or [(NO_RULE, _example(record.get("message")))]


def _listed(value: Any) -> list[Any]:
    """A record's list field; anything else (a log edited by hand) reads as empty."""
    return value if isinstance(value, list) else []


def _example(message: Any) -> str:
    text = " ".join(str(message or "").split())
    return text if len(text) <= EXAMPLE_CHARS else text[: EXAMPLE_CHARS - 1] + "…"


def collect(records: Iterable[Record]) -> Stats:
    stats = Stats()
    for record in records:
        stats.add(record)
    return stats


def admitted_gpus(record: Record) -> float | None:
    """GPU-equivalents a record admitted, with or without a quota (docs/audit.md).

    Counted on /validate only, for allowed requests that are not dry runs: the quota's own
    accounting when a quota counted the pod (`quota.demand.gpus`, or in older records
    `quota.after.gpus - quota.before.gpus`), else the `gpus` review() counted. Either may be a
    number or the exact text the quota engine writes ("2", "2/7").
    """
    if record.get("endpoint") != "validate" or not record.get("allowed") or record.get("dryRun"):
        return None
    quota = record.get("quota")
    counted = _quota_count(quota) if isinstance(quota, dict) and not quota.get("error") else None
    return counted if counted is not None else _number(record, "gpus")


def _quota_count(quota: dict[str, Any]) -> float | None:
    demand = _number(quota.get("demand"), "gpus")
    if demand is not None:
        return demand
    before, after = _number(quota.get("before"), "gpus"), _number(quota.get("after"), "gpus")
    return after - before if before is not None and after is not None else None


def as_json(stats: Stats) -> dict[str, Any]:
    return {
        "records": stats.total,
        "dryRun": stats.dry_run,
        "from": stats.first_time,
        "to": stats.last_time,
        "decisions": dict(stats.decisions),
        "endpoints": dict(stats.endpoints),
        "namespaces": dict(stats.namespaces.most_common()),
        "deniedByNamespace": dict(stats.denied_namespaces.most_common()),
        "policies": [
            {"policy": policy, "action": action, "count": count}
            for (policy, action), count in stats.findings.most_common()
        ],
        "deniedByPolicy": dict(stats.denied_policies.most_common()),
        "sharingModes": dict(stats.sharing_modes.most_common()),
        "denialsByRule": [
            {"rule": rule, "count": count, "examples": stats.examples.get(rule, [])}
            for rule, count in stats.reasons.most_common(TOP)
        ],
        "gpusAdmittedByNamespace": {ns: round(v, 4) for ns, v in sorted(stats.gpus.items())},
        "latencyMs": {"p50": stats.percentile(50), "p99": stats.percentile(99)},
    }


def write_text(stats: Stats, out: TextIO) -> None:
    data = as_json(stats)
    out.write(
        f"records: {stats.total} ({stats.dry_run} dry run)  from {stats.first_time} to {stats.last_time}\n"
    )
    p50, p99 = data["latencyMs"]["p50"], data["latencyMs"]["p99"]
    out.write(f"latency: p50 {_ms(p50)}  p99 {_ms(p99)}\n")
    _section(out, "by decision", stats.decisions.most_common())
    _section(out, "by endpoint", stats.endpoints.most_common())
    _section(out, "by namespace", stats.namespaces.most_common(TOP * 2))
    _section(
        out, "by policy (finding, action)", [(f"{p} ({a})", n) for (p, a), n in stats.findings.most_common()]
    )
    _section(out, "by sharing mode", stats.sharing_modes.most_common())
    _section(out, "GPU-equivalents admitted by namespace", _gpu_rows(stats))
    out.write("\ndenial reasons by rule, with examples:\n")
    if not stats.reasons:
        out.write("  -\n")
    for rule, count in stats.reasons.most_common(TOP):
        out.write(f"  {count:>9}  {_printable(rule)}\n")
        for example in stats.examples.get(rule, []):
            out.write(f"{'':13}e.g. {_printable(example)}\n")


def _gpu_rows(stats: Stats) -> list[tuple[str, str]]:
    ordered = sorted(stats.gpus.items(), key=lambda item: (-item[1], item[0]))
    return [(namespace, f"{value:g}") for namespace, value in ordered[: TOP * 2]]


def _printable(text: str) -> str:
    return "".join(ch if ch.isprintable() else " " for ch in text) or "-"


def _section(out: TextIO, title: str, rows: Iterable[tuple[str, int | str]]) -> None:
    rows = list(rows)
    out.write(f"\n{title}:\n")
    if not rows:
        out.write("  -\n")
    for name, count in rows:
        out.write(f"  {count:>9}  {_printable(name)}\n")


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f} ms"


def _number(mapping: Any, key: str) -> float | None:
    """A number, or an amount written as text: the quota's exact "1", "2/7", or a decimal "0.5"."""
    value = mapping.get(key) if isinstance(mapping, dict) else None
    if isinstance(value, str) and _AMOUNT.fullmatch(value.strip()):
        return float(Fraction(value.strip()))
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


_AMOUNT = re.compile(r"-?[0-9]{1,12}(/[1-9][0-9]{0,11}|\.[0-9]{1,12})?")
