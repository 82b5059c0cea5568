"""Pure pieces of the readers: time arguments, filters on raw lines, CSV safety."""

from __future__ import annotations

import datetime as dt
import io

import pytest

from tests.audit.logs import denied, entry
from webhook.audit import output
from webhook.audit.chain import line_of
from webhook.audit.query import Filter, QueryError, parse_time

NOW = dt.datetime(2025, 3, 1, 12, 0, tzinfo=dt.UTC)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("15m", "2025-03-01T11:45:00.000Z"),
        ("2h", "2025-03-01T10:00:00.000Z"),
        ("1d", "2025-02-28T12:00:00.000Z"),
        ("2025-03-01T10:30:00Z", "2025-03-01T10:30:00.000Z"),
        ("2025-03-01T12:30:00+02:00", "2025-03-01T10:30:00.000Z"),
        ("2025-02-27", "2025-02-27T00:00:00.000Z"),
    ],
)
def test_times_become_the_records_own_format(text: str, expected: str) -> None:
    assert parse_time(text, now=NOW) == expected


def test_a_bad_time_is_a_clear_error() -> None:
    with pytest.raises(QueryError, match="not a time"):
        parse_time("yesterday")


@pytest.mark.parametrize(
    ("where", "matches"),
    [
        (Filter(namespace="team-b"), True),
        (Filter(namespace="team-*"), True),
        (Filter(namespace="team-a"), False),
        (Filter(policy="no-privileged", decision="denied"), True),
        (Filter(policy="other"), False),
        (Filter(user="bob*", kind="Pod"), True),
        (Filter(record_type="checkpoint"), False),
        (Filter(since="2025-03-01T12:05:00.000Z"), False),
        (Filter(until="2025-03-01T12:05:00.000Z"), True),
    ],
)
def test_filters_agree_on_raw_lines_and_records(where: Filter, matches: bool) -> None:
    record = entry("u1", denied("no-privileged", "no"), namespace="team-b", user="bob@example.com")
    line = line_of(record)
    assert (where.maybe(line) and where.matches(record)) is matches
    if matches:
        assert where.maybe(line), "the raw-line test must never drop a matching record"


def test_csv_cells_cannot_become_formulas() -> None:
    record = entry("u1", denied("p", '=HYPERLINK("http://x")'), namespace="ns")
    out = io.StringIO()
    output.write([record], "csv", out)
    assert "'=HYPERLINK" in out.getvalue()


def test_the_table_drops_control_characters() -> None:
    record = entry("u1", denied("p", "bad\x1b[31mred"), namespace="ns")
    out = io.StringIO()
    output.write([record], "table", out)
    assert "\x1b" not in out.getvalue()
