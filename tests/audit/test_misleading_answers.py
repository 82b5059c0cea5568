"""No reader answers as if all were well when it is not (docs/audit.md, "When reading goes wrong").

- A file that is not an audit log is refused, naming the file and the line: exit 2.
- A path that is missing, a directory or unreadable is one line naming it: exit 2.
- summary, report and query check the chain as they read: they print what they read, then say
  on stderr where verification fails, and exit 1.

Driven in-process through `webhook.cli.main`, as `gpu-webhook` runs it.
"""

from __future__ import annotations

import contextlib
import io
import os
import pathlib
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.audit.logs import entry, lines, numbered, records, rewrite, write_log
from webhook.audit.chain import line_of, record_hash
from webhook.audit.checkpoint import Checkpointer
from webhook.audit.files import expand
from webhook.audit.journal import Journal, JournalOptions
from webhook.audit.output import FORMATS, write
from webhook.audit.query import Filter
from webhook.audit.report import render
from webhook.audit.signing import SigningKey, generate
from webhook.audit.summary import as_json, collect, write_text
from webhook.cli import main

Run = tuple[int, str, str]


def audit(*argv: str | Path) -> Run:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(["audit", *map(str, argv)])
    assert "Traceback" not in err.getvalue()
    return code, out.getvalue(), err.getvalue()


def readers(path: Path, report: Path) -> dict[str, list[str | Path]]:
    """Each reader of a log, by name, reading `path`."""
    return {
        "summary": ["summary", path],
        "report": ["report", path, "--out", report],
        "query": ["query", path],
        "tail": ["tail", path],
        "verify": ["verify", path],
    }


READERS = ["summary", "report", "query", "tail", "verify"]
SERVER_LOG = b'{"time":"2026-01-01T00:00:00.000+00:00","level":"info","logger":"uvicorn","msg":"started"}\n'
NOT_LOGS: list[tuple[str, bytes, int, str]] = [
    # (case, content, the line named, what it is said to be)
    ("binary garbage", bytes(range(256)) * 64, 1, "is binary data"),
    ("binary after text", b"GIF89a\n\x00\x01\x02\xff\xfe\n", 1, "is not JSON"),
    ("plain text", b"hello\nworld\n", 1, "is not JSON"),
    ("YAML", b"apiVersion: v1\nkind: Pod\n", 1, "is not JSON"),
    ("a JSON list", b"[1, 2, 3]\n", 1, "is JSON but not an object"),
    (
        "a Kubernetes object",
        b'{"apiVersion":"v1","kind":"Pod"}\n',
        1,
        "is a JSON object without the type, seq and hash of an audit record",
    ),
    (
        "the server's own log lines",
        SERVER_LOG * 3,
        1,
        "is a JSON object without the type, seq and hash of an audit record",
    ),
    ("blank lines first", b"\n\nnot a log\n", 3, "is not JSON"),
    ("one long line, no newline", b"x" * 200_000, 1, "is not JSON"),
]


@pytest.mark.parametrize("reader", READERS)
@pytest.mark.parametrize(("case", "content", "line", "what"), NOT_LOGS, ids=[n[0] for n in NOT_LOGS])
def test_a_file_that_is_not_an_audit_log_is_refused(
    tmp_path: Path, reader: str, case: str, content: bytes, line: int, what: str
) -> None:
    path = tmp_path / "some.file"
    path.write_bytes(content)
    code, out, err = audit(*readers(path, tmp_path / "report.html")[reader])
    assert code == 2, (case, out, err)
    assert (out, err) == ("", f"gpu-webhook: {path}:{line}: not an audit log (line {line} {what})\n")
    assert not (tmp_path / "report.html").exists()


@pytest.mark.parametrize("reader", READERS)
def test_an_empty_file_is_an_empty_log(tmp_path: Path, reader: str) -> None:
    path = tmp_path / "audit.log"
    path.write_bytes(b"")
    code, _, err = audit(*readers(path, tmp_path / "report.html")[reader])
    assert code == 0, err


def _unreadable(monkeypatch: pytest.MonkeyPatch, path: Path) -> None:
    """As a file without read permission behaves for a user who is not root (tests may run as root)."""
    original = pathlib.Path.open

    def refuse(self: Path, *args: Any, **kwargs: Any) -> Any:
        if self == path:
            raise PermissionError(13, "Permission denied", str(self))
        return original(self, *args, **kwargs)

    monkeypatch.setattr(pathlib.Path, "open", refuse)


BAD_PATHS: list[tuple[str, Callable[[Path], Path], str]] = [
    ("missing", lambda root: root / "none.log", "no audit log at {path}: no such file"),
    (
        "below a missing directory",
        lambda root: root / "no" / "audit.log",
        "no audit log at {path}: no such file",
    ),
    ("a directory", lambda root: root, "{path} is a directory; name the log file in it"),
    ("below a file", lambda root: root / "audit.log" / "x", "no audit log at {path}: no such file"),
    ("not a regular file", lambda root: Path(os.devnull), "{path} is not a regular file"),
]


@pytest.mark.parametrize("reader", READERS)
@pytest.mark.parametrize(("case", "where", "message"), BAD_PATHS, ids=[b[0] for b in BAD_PATHS])
def test_a_bad_path_is_one_line_naming_it(
    tmp_path: Path, reader: str, case: str, where: Callable[[Path], Path], message: str
) -> None:
    write_log(tmp_path / "audit.log", numbered(2))
    path = where(tmp_path)
    code, out, err = audit(*readers(path, tmp_path / "report.html")[reader])
    assert (code, out) == (2, ""), case
    assert err.startswith("gpu-webhook: " + message.format(path=path)), err
    assert len(err.splitlines()) == 1


@pytest.mark.parametrize("reader", READERS)
def test_an_unreadable_file_is_one_line_naming_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, reader: str
) -> None:
    log = tmp_path / "audit.log"
    write_log(log, numbered(2))
    _unreadable(monkeypatch, log)
    code, out, err = audit(*readers(log, tmp_path / "report.html")[reader])
    assert (code, out) == (2, "")
    assert err == f"gpu-webhook: cannot read the audit log {log}: Permission denied\n"


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads a file whatever its mode")
def test_a_file_without_read_permission_is_named(tmp_path: Path) -> None:
    log = tmp_path / "audit.log"
    write_log(log, numbered(2))
    log.chmod(0)
    code, _, err = audit("summary", log)
    assert code == 2
    assert err == f"gpu-webhook: cannot read the audit log {log}: Permission denied\n"


def _edit(data: list[bytes]) -> int:
    record = orjson.loads(data[4])
    record["namespace"] = "kube-system"
    data[4] = line_of(record)
    return 5


def _edit_and_rehash(data: list[bytes]) -> int:
    record = orjson.loads(data[4])
    record["namespace"] = "kube-system"
    record["hash"] = record_hash(record)
    data[4] = line_of(record)
    return 5  # the record after it no longer links to it: its own line is named


def _remove(data: list[bytes]) -> int:
    del data[4]
    return 5


def _swap(data: list[bytes]) -> int:
    data[4], data[5] = data[5], data[4]
    return 5


def _garble(data: list[bytes]) -> int:
    data[4] = b"\x00\x01garbage\n"
    return 5


def _garble_first(data: list[bytes]) -> int:
    data[0] = b"not a record\n"
    return 1


TAMPERING: list[tuple[str, Callable[[list[bytes]], int], str]] = [
    # (case, tamper returning the line named, reason)
    ("a field edited", _edit, "edited"),
    ("edited and its hash recomputed", _edit_and_rehash, "edited"),
    ("a line removed", _remove, "deleted"),
    ("two lines swapped", _swap, "reordered"),
    ("a line replaced by garbage", _garble, "edited"),
    ("the first line replaced by text", _garble_first, "edited"),
]
CHECKING = ["summary", "summary json", "report", "query", "query csv"]


def _checking(name: str, path: Path, report: Path) -> list[str | Path]:
    argv: dict[str, list[str | Path]] = {
        "summary": ["summary", path],
        "summary json": ["summary", path, "-o", "json"],
        "report": ["report", path, "--out", report],
        "query": ["query", path],
        "query csv": ["query", path, "-o", "csv", "--namespace", "team-a"],
    }
    return argv[name]


@pytest.mark.parametrize("reader", CHECKING)
@pytest.mark.parametrize(("case", "tamper", "reason"), TAMPERING, ids=[t[0] for t in TAMPERING])
def test_a_log_that_fails_verification_is_read_and_said_to_fail(
    tmp_path: Path, reader: str, case: str, tamper: Callable[[list[bytes]], int], reason: str
) -> None:
    log = tmp_path / "audit.log"
    write_log(log, numbered(12))
    data = lines(log)
    line = tamper(data)
    rewrite(log, data)
    code, out, err = audit(*_checking(reader, log, tmp_path / "report.html"))
    assert code == 1, (case, err)
    assert out.strip(), "what could be read is printed all the same"
    (message,) = err.splitlines()
    head = f"gpu-webhook: the audit log fails verification at {log}:{line}"
    assert re.match(re.escape(head) + "[ :]", message), message
    assert f": {reason}: " in message
    skipped = [*_checking(reader, log, tmp_path / "skipped.html"), "--no-verify"]
    code, _, err = audit(*skipped)
    assert (code, err) == (0, ""), "--no-verify reads without the check"


def test_the_summary_says_in_its_json_and_the_report_on_its_page(tmp_path: Path) -> None:
    log = tmp_path / "audit.log"
    write_log(log, numbered(12))
    data = lines(log)
    _edit(data)
    rewrite(log, data)
    _, out, _ = audit("summary", log, "-o", "json")
    assert orjson.loads(out)["verification"].startswith(f"failed at {log}:5 (seq 5): edited")
    _, out, _ = audit("summary", log, "-o", "json", "--no-verify")
    assert orjson.loads(out)["verification"] == "skipped"
    audit("report", log, "--out", tmp_path / "report.html")
    page = (tmp_path / "report.html").read_text()
    assert 'data-verification="failed"' in page and f"{log}:5 (seq 5): edited" in page


def test_query_with_a_limit_still_checks_the_records_after_it(tmp_path: Path) -> None:
    """A record is vouched for by the ones after it: an edit there is caught at their link."""
    log = tmp_path / "audit.log"
    write_log(log, numbered(12))
    data = lines(log)
    _edit_and_rehash(data)
    rewrite(log, data)
    code, out, err = audit("query", log, "--limit", "2", "-o", "jsonl")
    assert len(out.splitlines()) == 2
    assert code == 1 and f"{log}:5 (seq 5): edited" in err


def test_a_line_being_written_is_no_failure(tmp_path: Path) -> None:
    """The server may be in the middle of a write: readers skip a torn last line, as before."""
    log = tmp_path / "audit.log"
    write_log(log, numbered(3))
    with log.open("ab") as stream:
        stream.write(b'{"allowed":tr')
    for reader in ("summary", "query"):
        code, _, err = audit(reader, log)
        assert (code, err) == (0, ""), reader


def test_a_rotated_file_that_lost_its_end_fails(tmp_path: Path) -> None:
    log = tmp_path / "audit.log"
    write_log(log, numbered(60), batch=5, max_bytes=6000, keep=20)
    files = expand([log])
    rewrite(files[1], lines(files[1])[:-2])
    code, out, err = audit("summary", log)
    assert code == 1 and out
    assert f"at {files[2]}:1" in err and "truncated" in err


def test_each_replicas_log_is_a_chain_of_its_own(tmp_path: Path) -> None:
    """A StatefulSet's replicas each write their own log; reading them together is no failure."""
    first, second = tmp_path / "replica-0.log", tmp_path / "replica-1.log"
    write_log(first, numbered(3, namespace="team-a"))
    write_log(second, numbered(4, namespace="team-b"))
    code, out, err = audit("summary", first, second, "-o", "json")
    assert (code, err) == (0, "")
    assert orjson.loads(out)["namespaces"] == {"team-a": 3, "team-b": 4}
    rewrite(second, lines(second)[:2] + lines(second)[3:])
    code, _, err = audit("query", first, second)
    assert code == 1 and f"at {second}:3 (seq 3): deleted: seq 3..3 not found" in err


def test_a_rewritten_chain_is_caught_with_the_public_key(tmp_path: Path) -> None:
    private, public = generate(tmp_path / "keys")
    log = tmp_path / "audit.log"
    journal = Journal(JournalOptions(path=log), checkpointer=Checkpointer(SigningKey.load(private), 4))
    journal.open()
    for _ in range(3):
        journal.append(numbered(4))
    journal.checkpoint()
    journal.close()
    assert audit("summary", log, "--public-key", public)[0] == 0
    out = []
    prev = None
    for record in records(log):
        if record["seq"] == 3:
            record["namespace"] = "elsewhere"
        if prev is not None:
            record["prev"] = prev
        record["hash"] = record_hash(record)
        prev = record["hash"]
        out.append(line_of(record))
    rewrite(log, out)
    assert audit("summary", log)[0] == 0, "the chain alone cannot catch a full rewrite"
    code, _, err = audit("summary", log, "--public-key", public)
    assert code == 1 and ": signature: " in err


REPORT_OUT: list[tuple[str, Callable[[Path], Path], str]] = [
    (
        "a missing directory",
        lambda root: root / "no" / "report.html",
        "the directory {parent} does not exist",
    ),
    ("below a file", lambda root: root / "audit.log" / "report.html", "{parent} is not a directory"),
    ("a directory", lambda root: root, "it is a directory; give a file name"),
]


@pytest.mark.parametrize(("case", "where", "message"), REPORT_OUT, ids=[r[0] for r in REPORT_OUT])
def test_report_names_an_out_path_it_cannot_write(
    tmp_path: Path, case: str, where: Callable[[Path], Path], message: str
) -> None:
    write_log(tmp_path / "audit.log", [entry("a")])
    out = where(tmp_path)
    code, printed, err = audit("report", tmp_path / "audit.log", "--out", out)
    assert (code, printed) == (2, ""), case
    assert err == f"gpu-webhook: cannot write the report {out}: {message.format(parent=out.parent)}\n"


def test_keygen_keeps_a_key_pair_unless_forced(tmp_path: Path) -> None:
    keys = tmp_path / "keys"
    assert audit("keygen", "--out", keys)[0] == 0
    private, public = keys / "audit-signing.key", keys / "audit-signing.pub"
    before = private.read_bytes(), public.read_bytes()
    code, out, err = audit("keygen", "--out", keys)
    assert (code, out) == (2, "")
    assert err == f"gpu-webhook: {private} exists: keygen does not replace a key pair unless given --force\n"
    assert (private.read_bytes(), public.read_bytes()) == before
    private.chmod(0o644)
    assert audit("keygen", "--out", keys, "--force")[0] == 0
    assert private.read_bytes() != before[0] and public.read_bytes() != before[1]
    assert private.stat().st_mode & 0o777 == 0o600


def test_keygen_names_an_out_that_is_a_file(tmp_path: Path) -> None:
    taken = tmp_path / "keys"
    taken.write_text("not a directory\n")
    code, _, err = audit("keygen", "--out", taken)
    assert code == 2
    assert err == f"gpu-webhook: {taken} exists and is not a directory: keygen --out names a directory\n"
    assert taken.read_text() == "not a directory\n"


SCALARS = (
    st.none() | st.booleans() | st.integers(-(2**63), 2**63 - 1) | st.floats(allow_nan=False) | st.text()
)
JSON = st.recursive(
    SCALARS,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3),
    max_leaves=8,
)
KEYS = [
    "type",
    "time",
    "endpoint",
    "decision",
    "allowed",
    "dryRun",
    "namespace",
    "name",
    "findings",
    "warnings",
]
KEYS += ["quota", "gpus", "latencyMs", "sharingMode", "message", "uid", "user", "policies", "generateName"]


# The fields that choose a reader's path, so that every path meets the odd values.
PATHS = st.fixed_dictionaries(
    {
        "decision": st.sampled_from(["allowed", "denied", "warned"]) | JSON,
        "endpoint": st.sampled_from(["validate", "mutate"]) | JSON,
        "allowed": st.booleans() | JSON,
    }
)
RECORDS = st.tuples(PATHS, st.dictionaries(st.sampled_from(KEYS), JSON, max_size=8))


@settings(max_examples=150, deadline=None)
@given(st.lists(RECORDS, max_size=6))
def test_any_json_object_in_a_log_is_read_without_an_error(
    items: list[tuple[dict[str, Any], dict[str, Any]]],
) -> None:
    """A log edited by hand holds any JSON: the readers print it, and verification says the rest."""
    decided = [{"type": "decision", **paths, **fields} for paths, fields in items]
    stats = collect(decided)
    assert stats.total == len(decided)
    assert as_json(stats)["records"] == len(decided)
    write_text(stats, io.StringIO())
    assert render(stats, sources=[Path("audit.log")], verification="ok").endswith("</html>\n")
    for fmt in FORMATS:
        assert write(iter(decided), fmt, io.StringIO()) == len(decided)
    where = Filter(namespace="team-*", decision="denied", policy="gpu-*", since="2025-01-01")
    assert all(isinstance(where.matches(record), bool) for record in decided)


def test_a_public_key_without_the_check_is_refused(tmp_path: Path) -> None:
    write_log(tmp_path / "audit.log", numbered(2))
    _, public = generate(tmp_path / "keys")
    code, out, err = audit("summary", tmp_path / "audit.log", "--no-verify", "--public-key", public)
    assert (code, out) == (2, "")
    assert "--no-verify" in err and len(err.splitlines()) == 1
