"""Print records as a table, JSON, JSON lines or CSV, streaming one record at a time.

Records hold strings from untrusted requests: the table drops control characters
(no terminal escapes), and CSV cells that a spreadsheet would run as a formula
are quoted with a leading apostrophe.
"""

from __future__ import annotations

import csv
from collections.abc import Callable, Iterable
from typing import Any, TextIO

import orjson

from webhook.audit.chain import Record
from webhook.audit.query import policies

FORMATS = ("table", "json", "jsonl", "csv")
CSV_COLUMNS = (
    "seq",
    "time",
    "uid",
    "endpoint",
    "operation",
    "kind",
    "namespace",
    "name",
    "user",
    "decision",
    "dryRun",
    "sharingMode",
    "gpus",
    "policies",
    "latencyMs",
    "message",
)
TABLE_COLUMNS = (
    ("time", 24),
    ("endpoint", 8),
    ("decision", 8),
    ("namespace", 16),
    ("name", 24),
    ("kind", 10),
    ("user", 22),
    ("policies", 24),
    ("message", 0),
)
_FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


def write(records: Iterable[Record], fmt: str, out: TextIO) -> int:
    writers: dict[str, Callable[[Iterable[Record], TextIO], int]] = {
        "table": _table,
        "json": _json_array,
        "jsonl": _json_lines,
        "csv": _csv,
    }
    return writers[fmt](records, out)


def cell(record: Record, column: str) -> str:
    if column == "policies":
        return ",".join(dict.fromkeys(policies(record)))
    if column == "message":
        return _message(record)
    if column == "name" and not record.get("name"):
        return str(record.get("generateName") or "")
    value = record.get(column)
    if value is None:
        return ""
    if isinstance(value, float) and value.is_integer():
        return str(int(value))  # 2.0 GPUs read as 2, as summary prints them
    return str(value).lower() if isinstance(value, bool) else str(value)


def _message(record: Record) -> str:
    if record.get("message"):
        return str(record["message"])
    warnings = record.get("warnings")
    return "; ".join(str(w) for w in warnings) if isinstance(warnings, list) else ""


def _table(records: Iterable[Record], out: TextIO) -> int:
    out.write(_row([name.upper() for name, _ in TABLE_COLUMNS]) + "\n")
    count = 0
    for record in records:
        out.write(_row([cell(record, name) for name, _ in TABLE_COLUMNS]) + "\n")
        count += 1
    return count


def _row(values: list[str]) -> str:
    cells = []
    for (_, width), value in zip(TABLE_COLUMNS, values, strict=True):
        text = "".join(ch if ch.isprintable() else " " for ch in value)
        if width:
            text = text if len(text) <= width else text[: width - 1] + "…"
            text = text.ljust(width)
        cells.append(text)
    return "  ".join(cells).rstrip()


def _json_array(records: Iterable[Record], out: TextIO) -> int:
    count = 0
    out.write("[")
    for record in records:
        out.write(("," if count else "") + "\n" + orjson.dumps(record).decode())
        count += 1
    out.write("\n]\n" if count else "]\n")
    return count


def _json_lines(records: Iterable[Record], out: TextIO) -> int:
    count = 0
    for record in records:
        out.write(orjson.dumps(record).decode() + "\n")
        count += 1
    return count


def _csv(records: Iterable[Record], out: TextIO) -> int:
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(CSV_COLUMNS)
    count = 0
    for record in records:
        writer.writerow([_defuse(cell(record, column)) for column in CSV_COLUMNS])
        count += 1
    return count


def _defuse(value: Any) -> str:
    text = str(value)
    if text.startswith(_FORMULA_START) and not _is_number(text):
        return "'" + text
    return text


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True
