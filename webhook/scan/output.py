"""What `gpu-webhook scan` prints: one row per finding and a closing summary line, JSON, or policy
reports as YAML documents (`kubectl apply -f` reads them)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import orjson
import yaml

from webhook.audit.chain import Record
from webhook.scan.reports import FLAVOURS, build_reports
from webhook.scan.stream import ScanOutcome

COLUMNS = ("kind", "namespace", "name", "action", "policy", "message")
JSON_FIELDS = ("kind", "apiVersion", "namespace", "name", "owner", "decision", "findings")


FORMATS = ("table", "json", *FLAVOURS)


def render(outcome: ScanOutcome, fmt: str, rules: Mapping[str, str] | None = None) -> str:
    """`rules`: constraint name to template kind, for the reports' rule fields."""
    if fmt == "json":
        return _json(outcome)
    if fmt in FLAVOURS:
        reports = build_reports(outcome.entries, fmt, namespaces=outcome.summary.namespaces, rules=rules)
        return yaml.safe_dump_all(reports, sort_keys=False, explicit_start=True).rstrip()
    return _table(outcome.objects, outcome.summary.line())


def _json(outcome: ScanOutcome) -> str:
    objects = [{k: record[k] for k in JSON_FIELDS if k in record} for record in outcome.objects]
    summary = {k: v for k, v in outcome.summary_record.items() if k not in ("v", "type", "scope")}
    return orjson.dumps({"objects": objects, "summary": summary}, option=orjson.OPT_INDENT_2).decode()


def _table(records: Sequence[Record], closing: str) -> str:
    rows = [[_printable(v) for v in row] for record in records for row in _rows(record)]
    if not rows:
        return closing
    header = [c.upper() for c in COLUMNS]
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(COLUMNS) - 1)]
    lines = [_line(row, widths) for row in [header, *rows]]
    return "\n".join([*lines, "", closing])


def _line(row: list[str], widths: list[int]) -> str:
    padded = [value.ljust(width) for value, width in zip(row, widths, strict=False)]
    return "  ".join([*padded, row[-1]]).rstrip()


def _rows(record: Record) -> list[list[str]]:
    findings: list[Any] = record.get("findings") or []
    head = [str(record.get("kind", "")), str(record.get("namespace", "")), str(record.get("name", ""))]
    return [
        [*head, str(f.get("action", "")), str(f.get("policy", "")), str(f.get("message", ""))]
        for f in findings
        if isinstance(f, dict)
    ]


def _printable(text: str) -> str:
    """Object names and policy messages come from the cluster: no terminal escapes, one line each."""
    return "".join(ch if ch.isprintable() else " " for ch in text)
