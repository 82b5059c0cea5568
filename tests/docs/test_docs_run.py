"""Every command and YAML example in the README and docs/ is run or loaded (tests/docs/blocks.py
says how a page marks files and excerpts). Commands that need a cluster, a running server,
Prometheus or a container engine are listed and not run; everything else runs, in a directory
per page that holds the repository's examples and policies, a signed audit log, inventories and
a team's policy directory, and must exit 0 (`review` and `scan` may exit 1: a denial or finding
is their answer) without a traceback."""

from __future__ import annotations

import ast
import importlib
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.audit.logs import entry, write_log
from tests.audit.sample import sample
from tests.docs.blocks import PAGES, REPO, Block, blocks, every_block
from tests.support.pods import gpu_pod, namespace
from tests.support.policies import TEAM_SHARING
from webhook import certs
from webhook.audit.checkpoint import Checkpointer
from webhook.audit.journal import Journal, JournalOptions
from webhook.audit.signing import SigningKey, generate

BIN = Path(sys.executable).parent
POLICY_KINDS = {"GPUSharingPolicy", "GPUQuota", "ConstraintTemplate"}
TEST_KINDS = {"PolicyTest", "Suite"}
NOT_RUN = {
    "kubectl": "needs a cluster",
    "curl": "needs the server that `make run` starts",
    "make": "`make run` serves until stopped; `make test` is this suite",
    "docker": "needs a container engine",
    "podman": "needs a container engine",
}
MAY_EXIT_1 = {"review", "scan"}  # a denial or a finding is their answer
TEAM_SUITE = """\
apiVersion: gpuwebhook.io/v1alpha1
kind: PolicyTest
metadata: {name: team-timeslice}
spec:
  cases:
    - name: a whole GPU becomes a shared one
      object:
        apiVersion: v1
        kind: Pod
        metadata: {name: nb, namespace: team-a}
        spec:
          containers:
            - {name: main, image: python:3.12, resources: {limits: {nvidia.com/gpu: 1}}}
      expect:
        allowed: true
        object: {spec: {containers: [{resources: {limits: {nvidia.com/gpu.shared: "1"}}}]}}
"""


def why_not_run(command: str) -> str | None:
    words = command.removeprefix(".venv/bin/").split()
    if any(word.startswith("bench/") for word in words):
        return "a benchmark: minutes of load, run on demand"
    if "kubectl" in words[1:]:
        return "pipes into kubectl, which needs a cluster"
    if words[0] in NOT_RUN:
        return NOT_RUN[words[0]]
    if words[0].endswith("gpu-webhook"):
        if "--kubeconfig" in words:
            return "needs a cluster"
        if any(word.startswith("--prometheus-url") for word in words):
            return "needs Prometheus"
        if words[1] == "serve":
            return "serves until stopped"
        if words[1:3] == ["audit", "tail"] and "-f" in words:
            return "follows the log until stopped"
        return None
    if words[0] in ("python", "python3", "gpu-webhook"):
        return None
    return f"no rule for {words[0]!r}"


def _sandbox(root: Path, page_blocks: list[Block]) -> Path:
    for directory in ("examples", "policies", "tests/policies"):
        shutil.copytree(REPO / directory, root / directory)
    private, _ = generate(root)  # audit-signing.key and audit-signing.pub
    checkpointer = Checkpointer(SigningKey.load(private), every_records=5)
    journal = Journal(JournalOptions(path=root / "audit.log", fsync="never"), checkpointer=checkpointer)
    journal.open()
    journal.append(sample())
    journal.checkpoint()
    journal.close()
    (root / ".run").mkdir()
    shutil.copy(root / "audit.log", root / ".run" / "audit.log")  # what `make run` (not run) records
    if not any("certs generate --out ./tls" in c for block in page_blocks for c in block.commands()):
        certs.generate(root / "tls", "gpu-webhook", "gpu-system", days=30)  # an install's certificates
    write_log(root / "other.log", [entry("x", minute=1)])
    # What `kubectl -n gpu-system cp gpu-webhook-0:/var/lib/gpu-webhook ./audit-0` (not run) copies.
    shutil.copytree(root, root / "audit-0", ignore=lambda d, names: [n for n in names if n != "audit.log"])
    pods = [namespace("ml-team"), namespace("team-a"), gpu_pod("trainer-0", gpus=7)]
    for name in ("cluster.yaml", "cluster-dump.yaml"):
        (root / name).write_text(yaml.safe_dump_all(pods))
    (root / "team-policies").mkdir()
    (root / "team-policies" / "sharing.yaml").write_text(TEAM_SHARING)
    (root / "team-policies" / "sharing.test.yaml").write_text(TEAM_SUITE)
    for block in page_blocks:
        if block.file is not None:
            (root / block.file).parent.mkdir(parents=True, exist_ok=True)
            (root / block.file).write_text(block.text)
    return root


def _run(command: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    command = command.removeprefix(".venv/bin/")
    env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}", "HOME": str(cwd), "KUBECONFIG": ""}
    return subprocess.run(
        ["bash", "-o", "pipefail", "-c", command],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )


def _command_problem(block: Block, command: str, cwd: Path, *, ours: bool = False) -> str | None:
    if not ours and any(word.startswith("/") for word in command.split()):
        return f"{block.where}: `{command}` names an absolute path; examples work in a directory of their own"
    result = _run(command, cwd)
    words = command.removeprefix(".venv/bin/").split()
    allowed = {0, 1} if words[0] == "gpu-webhook" and words[1] in MAY_EXIT_1 else {0}
    if result.returncode in allowed and "Traceback" not in result.stderr:
        return None
    output = result.stdout[-2000:] + result.stderr[-2000:]
    return f"{block.where}: `{command}` exited {result.returncode}:\n{output}"


def _yaml_problem(block: Block, cwd: Path) -> str | None:
    try:
        documents = [d for d in yaml.safe_load_all(block.text) if d is not None]
    except yaml.YAMLError as e:
        return f"{block.where}: not YAML: {e}"
    if block.excerpt:
        return None
    kinds = {d.get("kind") for d in documents if isinstance(d, dict)}
    if not kinds or None in kinds:
        return f"{block.where}: a YAML example without a kind must start with `# excerpt` or `# file:`"
    path = cwd / block.file if block.file is not None else cwd / "example" / f"line{block.line}.yaml"
    if block.file is None:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(block.text)
    if kinds & TEST_KINDS:
        return _command_problem(block, f"gpu-webhook test {path}", cwd, ours=True)
    constraints = all(str(d.get("apiVersion", "")).startswith("constraints.") for d in documents)
    if kinds <= POLICY_KINDS or constraints:
        alone = cwd / "alone" / str(block.line)
        alone.mkdir(parents=True)
        shutil.copy(path, alone / path.name)
        if constraints:  # a Constraint is checked against the bundle's templates
            for template in (REPO / "policies" / "security").glob("*/template.yaml"):
                shutil.copy(template, alone / f"{template.parent.name}-template.yaml")
        return _command_problem(block, f"gpu-webhook policies check {alone}", cwd, ours=True)
    if kinds <= {"Pod", "Deployment", "Job", "Namespace", "StatefulSet", "DaemonSet", "CronJob"}:
        return _command_problem(block, f"gpu-webhook review {path}", cwd, ours=True)
    return f"{block.where}: no rule to load kinds {sorted(str(kind) for kind in kinds)}"


def _python_problem(block: Block, cwd: Path) -> str | None:
    tree = ast.parse(block.text)  # a syntax error fails here
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("webhook"):
            module = importlib.import_module(node.module)
            missing = [a.name for a in node.names if not hasattr(module, a.name)]
            if missing:
                return f"{block.where}: {node.module} has no {missing}"
    if "sys.argv[1]" in block.text:  # a script over the audit log
        (cwd / "check.py").write_text(block.text)
        return _command_problem(block, "python check.py audit.log", cwd)
    return None


def _problems(page: Path, cwd: Path) -> tuple[list[str], list[str]]:
    problems: list[str] = []
    skipped: list[str] = []
    for block in blocks(page):
        if block.lang == "yaml":
            problems.append(_yaml_problem(block, cwd) or "")
        elif block.lang == "python":
            problems.append(_python_problem(block, cwd) or "")
        for command in block.commands():
            reason = why_not_run(command)
            if reason is None:
                problems.append(_command_problem(block, command, cwd) or "")
            else:
                skipped.append(f"{block.where}: {command} ({reason})")
    return [p for p in problems if p], skipped


@pytest.mark.parametrize("page", PAGES, ids=[str(p.relative_to(REPO)) for p in PAGES])
def test_every_example_on_the_page_runs(page: Path, tmp_path: Path) -> None:
    cwd = _sandbox(tmp_path, blocks(page))
    problems, skipped = _problems(page, cwd)
    assert not problems, "\n\n".join(problems)
    assert not [s for s in skipped if "no rule for" in s], skipped


def test_the_examples_are_mostly_run() -> None:
    """A guard on the harness itself: a page's commands are found, and most of them run."""
    commands = [c for block in every_block() for c in block.commands()]
    skipped = [c for c in commands if why_not_run(c) is not None]
    assert len(commands) - len(skipped) >= 20, skipped
