"""No command shows a traceback, whatever paths and arguments it is given: one line, non-zero.

Driven in-process through `webhook.cli.main`, as `gpu-webhook` runs it, so hypothesis can try
many combinations. `serve` and `audit tail -f` are left out: given good arguments they run on.
"""

from __future__ import annotations

import contextlib
import io
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.support.policies import TEAM_EXCLUSIVE as SHARING
from webhook.cli import TRACEBACK_VARIABLE, main

POD = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "a"}, "spec": {"containers": []}}

# Paths a user gets wrong, relative to the sandbox the test runs in.
HOSTILE = [
    "missing.yaml",
    "missing/dir/file.yaml",
    "a-directory",
    "a-file/below-a-file",
    "a-file/below/a-file",
    "empty.yaml",
    "binary.yaml",
    "not-yaml.yaml",
    "not-json.json",
    "scalar.yaml",
    "pod.yaml",
    "ok-policies",
    "ok-policies/sharing.yaml",
    "a file with spaces ünd ñ.yaml",
    "x" * 300,
    "-",
    "--",
    "-starts-with-a-dash",
    "",
]


def _sandbox(root: Path) -> None:
    (root / "a-directory").mkdir()
    (root / "a-file").write_text("plain text\n")
    (root / "empty.yaml").write_text("")
    (root / "binary.yaml").write_bytes(bytes(range(256)) * 4)
    (root / "not-yaml.yaml").write_text("key: [unclosed\n")
    (root / "not-json.json").write_text("{nope")
    (root / "scalar.yaml").write_text("42\n")
    (root / "pod.yaml").write_text(yaml.safe_dump(POD))
    (root / "ok-policies").mkdir()
    (root / "ok-policies" / "sharing.yaml").write_text(SHARING)
    (root / "a file with spaces ünd ñ.yaml").write_text("kind: [\n")


# Each command, with PATH where a hostile path goes. The bundle is left out where policies
# load, so examples stay cheap; policy loading itself is covered with the bundle elsewhere.
COMMANDS = [
    ("review", "PATH", "--no-bundle", "--policies", "ok-policies"),
    ("review", "pod.yaml", "--no-bundle", "--policies", "PATH"),
    ("review", "pod.yaml", "--no-bundle", "--policies", "ok-policies", "--inventory", "PATH"),
    ("policies", "check", "--no-bundle", "PATH"),
    ("scan", "--no-bundle", "--policies", "PATH", "--inventory", "pod.yaml"),
    ("scan", "--no-bundle", "--policies", "ok-policies", "--inventory", "PATH"),
    ("scan", "--no-bundle", "--policies", "ok-policies", "--inventory", "pod.yaml", "--audit-log", "PATH"),
    ("quota", "status", "--no-bundle", "--policies", "ok-policies", "--inventory", "PATH"),
    ("dra", "templates", "--no-bundle", "--policies", "PATH", "--namespace", "team"),
    ("test", "PATH"),
    ("certs", "generate", "--out", "PATH"),
    ("audit", "keygen", "--out", "PATH"),
    ("audit", "summary", "PATH"),
    ("audit", "query", "PATH"),
    ("audit", "verify", "PATH"),
    ("audit", "tail", "PATH"),
    ("audit", "report", "--out", "PATH", "pod.yaml"),
    ("audit", "report", "--out", "report.html", "PATH"),
    ("manifests", "--policies", "PATH", "--no-security-bundle", "--cert-dir", "PATH"),
]
WORDS = st.text(alphabet=st.characters(blacklist_categories=("Cs", "Cc")), max_size=12)


@contextlib.contextmanager
def _inside(directory: Path) -> Iterator[None]:
    before = Path.cwd()
    os.chdir(directory)
    try:
        yield
    finally:
        os.chdir(before)


def _run(argv: list[str]) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main(argv)
        except SystemExit as e:  # argparse's usage errors end this way, with code 2
            code = e.code if isinstance(e.code, int) else 2
    return code, out.getvalue(), err.getvalue()


@contextlib.contextmanager
def _fresh_sandbox() -> Iterator[Path]:
    """A new sandbox each time: commands that write (keygen, certs) must not change the next case."""
    with tempfile.TemporaryDirectory() as directory:
        root = Path(directory)
        _sandbox(root)
        with _inside(root):
            yield root


def _names_a_path(error: str, argv: list[str]) -> bool:
    parts = {part for arg in argv for part in arg.split("/") if len(part) > 1 and not part.startswith("-")}
    return any(part in error for part in parts)


@settings(max_examples=120, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(
    command=st.sampled_from(COMMANDS),
    path=st.sampled_from(HOSTILE) | WORDS,
    extra=st.just([]) | st.lists(st.sampled_from(HOSTILE) | WORDS, min_size=1, max_size=2),
)
def test_no_command_shows_a_traceback(command: tuple[str, ...], path: str, extra: list[str]) -> None:
    argv = [path if part == "PATH" else part for part in command] + extra
    with _fresh_sandbox():
        code, _, err = _run(argv)
    assert "Traceback" not in err, argv
    assert TRACEBACK_VARIABLE not in err, (argv, err)  # the last net caught a defect of ours
    if code not in (0, 1):
        assert code == 2, (argv, code, err)
        shown = err.rstrip("\n").split("\n")  # not splitlines(): an argument may hold a form feed
        lines = [line for line in shown if not line.startswith(("policies in force:", "note:"))]
        usage = lines[0].startswith("usage:") and lines[-1].startswith("gpu-webhook")
        assert usage or lines[0].startswith("gpu-webhook"), (argv, err)


# An output path whose directory is missing may be created; every other bad path is an error.
WRITES = {"--out", "--audit-log"}


@pytest.mark.parametrize("command", COMMANDS, ids=[" ".join(c) for c in COMMANDS])
@pytest.mark.parametrize("path", ["missing/dir/file.yaml", "a-file/below-a-file"])
def test_a_bad_path_is_named(command: tuple[str, ...], path: str) -> None:
    argv = [path if part == "PATH" else part for part in command]
    writes = command[command.index("PATH") - 1] in WRITES
    with _fresh_sandbox() as root:
        code, _, err = _run(argv)
        created = (root / path).exists()
    if code == 0:
        assert writes and created and path.startswith("missing/"), (argv, err)
        return
    assert "Traceback" not in err and err.strip(), (argv, err)
    lines = [line for line in err.splitlines() if not line.startswith("policies in force:")]
    assert len(lines) <= 2 and _names_a_path(lines[0], argv), (argv, err)


def test_an_empty_policy_directory_is_noted() -> None:
    with _fresh_sandbox():
        code, _, err = _run(["review", "pod.yaml", "--no-bundle", "--policies", "a-directory"])
    assert code == 0
    assert "note: a-directory holds no policy files (*.yaml, *.yml)" in err


def test_a_file_in_the_way_of_the_audit_log_is_named() -> None:
    argv = ["scan", "--no-bundle", "--policies", "ok-policies", "--inventory", "pod.yaml"]
    with _fresh_sandbox():
        code, _, err = _run([*argv, "--audit-log", "a-file/below-a-file"])
    assert code == 2
    assert err.endswith("gpu-webhook: a-file: a file stands where the audit log's directory must be\n")
