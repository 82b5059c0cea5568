"""`make run` as the README's first-run section tells it: the server records its decisions in a
git-ignored file of the checkout, and the banner prints the command that reads them."""

from __future__ import annotations

import shlex
import shutil
import subprocess

import pytest

from tests.docs.blocks import REPO
from webhook.cli import build_parser

AUDIT_LOG = ".run/audit.log"
TAIL = f".venv/bin/gpu-webhook audit tail {AUDIT_LOG}"

pytestmark = pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed")


def _dry_run(*variables: str) -> list[str]:
    result = subprocess.run(
        ["make", "-n", "run", *variables], cwd=REPO, capture_output=True, text=True, timeout=60, check=False
    )
    assert result.returncode == 0, result.stderr
    return result.stdout.splitlines()


def _serve_line(lines: list[str]) -> list[str]:
    (line,) = [line for line in lines if "gpu-webhook serve" in line]
    return shlex.split(line)


def test_make_run_records_to_the_documented_log_and_prints_how_to_read_it() -> None:
    lines = _dry_run()
    serve = _serve_line(lines)
    assert serve[serve.index("--audit-log") + 1] == AUDIT_LOG
    assert any(TAIL in line for line in lines), "the banner names the audit tail command"
    readme = (REPO / "README.md").read_text()
    assert AUDIT_LOG in readme and TAIL in readme


def test_the_printed_command_is_one_the_cli_accepts() -> None:
    args = build_parser().parse_args(shlex.split(TAIL)[1:])
    assert str(args.file) == AUDIT_LOG


def test_the_log_is_git_ignored() -> None:
    if shutil.which("git") is None or not (REPO / ".git").exists():
        pytest.skip("not a git checkout")
    result = subprocess.run(
        ["git", "check-ignore", "-q", AUDIT_LOG], cwd=REPO, capture_output=True, timeout=30, check=False
    )
    assert result.returncode == 0, f"{AUDIT_LOG} is not git-ignored"


def test_another_log_is_one_variable_away() -> None:
    serve = _serve_line(_dry_run("AUDIT_LOG=elsewhere.log"))
    assert serve[serve.index("--audit-log") + 1] == "elsewhere.log"
