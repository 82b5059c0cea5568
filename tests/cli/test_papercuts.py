"""The command line's sharp edges, each as a new user met it."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.audit.logs import numbered, write_log
from tests.conftest import BUNDLED_POLICIES, EXAMPLES, REPO
from tests.support.cli import gpu_webhook

HEADER = "apiVersion: gpuwebhook.io/v1alpha1\nkind: GPUSharingPolicy\nmetadata:\n  name: {name}\nspec:\n"


@pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed")
def test_make_run_serves_on_the_port_it_is_given() -> None:
    """`make run PORT=…` moves the server and the curl line it prints."""
    result = subprocess.run(
        ["make", "-n", "run", "PORT=9443"], cwd=REPO, capture_output=True, text=True, timeout=60, check=False
    )
    assert result.returncode == 0, result.stderr
    assert "gpu-webhook serve --port 9443" in result.stdout
    assert "https://127.0.0.1:9443/mutate" in result.stdout
    assert "8443" not in result.stdout


@pytest.mark.parametrize(
    ("flag", "words"),
    [
        ("bogus=1", "unrecognized arguments: --bogus=1"),
        ("port=eighty", "argument --port: invalid int value"),
        ("audit-fsync=sometimes", "argument --audit-fsync: invalid choice"),
    ],
)
def test_serve_flags_are_checked_when_rendered(flag: str, words: str) -> None:
    result = gpu_webhook("manifests", "--serve-flag", flag)
    assert result.returncode == 2 and not result.stdout
    assert "the server would not start" in result.stderr and words in result.stderr


@pytest.mark.parametrize(
    "args",
    [
        ("audit", "query", "--name", "x", "LOG"),  # not --namespace
        ("audit", "query", "--dec", "denied", "LOG"),  # not --decision
        ("manifests", "--namespace", "a", "--replica", "3"),  # not --replicas
        ("review", "--pol", "policies", "FILE"),  # not --policies
    ],
)
def test_no_option_is_guessed_from_a_prefix(tmp_path: Path, args: tuple[str, ...]) -> None:
    log = tmp_path / "audit.log"
    write_log(log, numbered(3))
    real = [str(log) if a == "LOG" else str(EXAMPLES / "pod-cpu.yaml") if a == "FILE" else a for a in args]
    result = gpu_webhook(*real)
    assert result.returncode == 2 and "unrecognized arguments" in result.stderr, result.stderr
    assert not result.stdout


def test_a_reader_that_closes_the_pipe_gets_no_traceback() -> None:
    """`gpu-webhook test … | head`: the reader is gone before anything is written."""
    process = subprocess.Popen(
        [sys.executable, "-m", "webhook", "test", "-v", str(BUNDLED_POLICIES / "examples")],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env={k: v for k, v in os.environ.items() if not k.startswith("GPU_WEBHOOK_")},
    )
    assert process.stdout is not None and process.stderr is not None
    process.stdout.close()
    errors = process.stderr.read().decode()
    assert process.wait(timeout=60) == 128 + 13  # as if killed by SIGPIPE, like other tools
    assert errors == ""


@pytest.mark.parametrize("text", ["", "# only a comment\n", "---\n---\n"])
def test_reviewing_an_empty_file_is_an_error(tmp_path: Path, text: str) -> None:
    empty = tmp_path / "pod.yaml"
    empty.write_text(text)
    result = gpu_webhook("review", str(empty), "--policies", str(BUNDLED_POLICIES / "security"))
    assert result.returncode == 2 and not result.stdout
    assert f"{empty}: no objects to review" in result.stderr


def test_a_cluster_scoped_object_is_shown_without_a_namespace(tmp_path: Path) -> None:
    namespace = tmp_path / "namespace.yaml"
    namespace.write_text("apiVersion: v1\nkind: Namespace\nmetadata: {name: ml-team}\n")
    result = gpu_webhook("review", str(namespace), "--policies", str(BUNDLED_POLICIES / "security"))
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("Namespace ml-team: allowed")
    as_json = gpu_webhook(
        "review", str(namespace), "--policies", str(BUNDLED_POLICIES / "security"), "-o", "json"
    )
    assert '"namespace": ""' in as_json.stdout


def test_policy_errors_come_in_one_pass_each_with_file_and_line(tmp_path: Path) -> None:
    (tmp_path / "a.yaml").write_text(HEADER.format(name="p") + "  sharing: {mode: magic}\n")
    (tmp_path / "b.yaml").write_text(HEADER.format(name="p") + "  sharing: {mode: exclusive}\n")
    (tmp_path / "c.yaml").write_text(HEADER.format(name="Bad_Name") + "  sharing: {mode: exclusive}\n")
    (tmp_path / "d.yaml").write_text("kind: GPUQuota\nspec: [\n")
    result = gpu_webhook("policies", "check", str(tmp_path))
    assert result.returncode == 1
    out = result.stderr
    lines = out.splitlines()
    assert f"{tmp_path / 'a.yaml'}:6: spec.sharing.mode: 'magic' is not one of" in out
    assert f"{tmp_path / 'b.yaml'}:4: metadata.name: GPUSharingPolicy 'p' is also defined at " in out
    assert out.count(f"{tmp_path / 'a.yaml'}:4") == 1  # the duplicate points at the first
    assert f"{tmp_path / 'c.yaml'}:4: metadata.name: must be a DNS subdomain name" in out
    assert f"{tmp_path / 'd.yaml'}:3: not valid YAML: the file ends where a value was expected" in out
    assert "4 problem(s)" in lines[-1]
    assert [line.split(":")[0] for line in lines[:-1]] == [
        str(tmp_path / f) for f in ("a.yaml", "b.yaml", "c.yaml", "d.yaml")
    ]
