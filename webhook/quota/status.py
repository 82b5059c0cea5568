"""Where every namespace stands against its GPU quotas: rows for `quota status` and /metrics. Pure."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any, Protocol

from webhook.accounting.demand import DEFAULT_SETTINGS, QuotaSettings
from webhook.accounting.usage import Usage, format_dimension
from webhook.match import glob_matches
from webhook.quota.check import NAMESPACE_NAME_LABEL
from webhook.quota.policy import GPUQuota
from webhook.types import EnforcementAction

BAR_WIDTH = 20
HEADERS = ("NAMESPACE", "QUOTA", "RESOURCE", "USED", "LIMIT", "")


class StatusView(Protocol):
    def namespaces(self) -> list[str]: ...

    def namespace_labels(self, namespace: str) -> Mapping[str, str]: ...

    def usage(self, namespace: str, settings: QuotaSettings) -> Usage: ...


@dataclass(frozen=True)
class StatusRow:
    namespace: str
    quota: str
    action: EnforcementAction
    resource: str
    used: Fraction
    limit: Fraction

    @property
    def fraction(self) -> Fraction:
        if self.limit:
            return self.used / self.limit
        return Fraction(1) if self.used else Fraction(0)

    def as_json(self) -> dict[str, Any]:
        return {
            "namespace": self.namespace,
            "quota": self.quota,
            "enforcementAction": self.action,
            "resource": self.resource,
            "used": format_dimension(self.resource, self.used),
            "limit": format_dimension(self.resource, self.limit),
            "usedExact": str(self.used),
            "limitExact": str(self.limit),
            "percent": round(float(self.fraction) * 100, 1),
        }


def status_rows(
    quotas: Sequence[GPUQuota], view: StatusView, settings: QuotaSettings = DEFAULT_SETTINGS
) -> list[StatusRow]:
    """One row per namespace, quota and limit, for every namespace each quota applies to."""
    rows: list[StatusRow] = []
    for namespace in _candidates(quotas, view):
        labels = {NAMESPACE_NAME_LABEL: namespace, **view.namespace_labels(namespace)}
        for quota in quotas:
            if not quota.applies_to(namespace, labels):
                continue
            usage = view.usage(namespace, quota.settings_or(settings))
            rows += [
                StatusRow(namespace, quota.name, quota.action, dimension, usage.amount(dimension), limit)
                for dimension, limit in quota.limits.items()
            ]
    return rows


def render_table(rows: Sequence[StatusRow]) -> str:
    cells = [HEADERS] + [
        (
            row.namespace,
            row.quota,
            row.resource,
            format_dimension(row.resource, row.used),
            format_dimension(row.resource, row.limit),
            bar(row.fraction),
        )
        for row in rows
    ]
    widths = [max(len(line[i]) for line in cells) for i in range(len(HEADERS))]
    lines = ("  ".join(c.ljust(w) for c, w in zip(line, widths, strict=True)).rstrip() for line in cells)
    return "\n".join(lines)


def bar(fraction: Fraction, width: int = BAR_WIDTH) -> str:
    """[#########-----------]  45%; over the limit the bar is full and marked with '!'."""
    filled = min(width, round(fraction * width))
    percent = f"{round(float(fraction) * 100):>4}%"
    mark = "!" if fraction > 1 else " "
    return f"[{'#' * filled}{'-' * (width - filled)}]{mark}{percent}"


def _candidates(quotas: Sequence[GPUQuota], view: StatusView) -> list[str]:
    """Known namespaces, plus namespaces a quota names outright (they may have no pods yet)."""
    named = {
        name
        for quota in quotas
        for name in quota.match.namespaces
        if not any(ch in name for ch in "*?") and not glob_matches(quota.match.excluded_namespaces, name)
    }
    return sorted(set(view.namespaces()) | named)
