"""The offline path end to end: quota policies and an inventory from files, pods that fit and pods
that do not, through `gpu-webhook review --inventory … -o json`; each pod is judged on its own."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.support.pods import gpu_pod, make_pod, res, sidecar
from webhook.policy.quota_files import load_quotas

POLICIES = """\
apiVersion: gpuwebhook.io/v1alpha1
kind: GPUQuota
metadata: {name: ml-team}
spec:
  match: {namespaces: [ml-team]}
  limits: {gpus: 8}
---
apiVersion: gpuwebhook.io/v1alpha1
kind: GPUQuota
metadata: {name: notebooks-mig}
spec:
  match: {namespaces: [notebooks]}
  limits:
    resources: {nvidia.com/mig-1g.10gb: 14, nvidia.com/mig-3g.40gb: 2}
---
apiVersion: gpuwebhook.io/v1alpha1
kind: GPUQuota
metadata: {name: hami-memory}
spec:
  match: {namespaceSelector: {matchLabels: {gpu-sharing: hami}}}
  limits: {gpuMemory: 80Gi}
"""

INVENTORY = [
    {
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": {"name": "shared", "labels": {"gpu-sharing": "hami"}},
    },
    *[gpu_pod(f"train-{i}", "ml-team", gpus=1, phase="Running") for i in range(7)],
    gpu_pod("finished", "ml-team", gpus=8, phase="Succeeded"),
    gpu_pod("crashed", "ml-team", gpus=8, phase="Failed"),
    make_pod("nb-1", "notebooks", [res("lab", {"nvidia.com/mig-1g.10gb": 13})]),
    make_pod("nb-2", "notebooks", [res("lab", {"nvidia.com/mig-3g.40gb": 1})]),
    make_pod("infer", "shared", [res("srv", {"nvidia.com/gpu": 2, "nvidia.com/gpumem": 20480})]),
]


@pytest.fixture(scope="module")
def judged(tmp_path_factory: pytest.TempPathFactory) -> Any:
    root = tmp_path_factory.mktemp("offline")
    (root / "policies").mkdir()
    (root / "policies" / "quotas.yaml").write_text(POLICIES)
    (root / "inventory.yaml").write_text(
        yaml.safe_dump({"apiVersion": "v1", "kind": "List", "items": INVENTORY})
    )
    pods = [case[1] for case in CASES] + [gpu_pod("fits", "ml-team", gpus=1)]
    (root / "pods.yaml").write_text(yaml.safe_dump_all(pods))
    command = [
        sys.executable,
        "-m",
        "webhook",
        "review",
        str(root / "pods.yaml"),
        "--policies",
        str(root / "policies"),
        "--no-bundle",  # the quotas alone: the bundle's per-pod maximum would judge first
        "--inventory",
        str(root / "inventory.yaml"),
        "-o",
        "json",
    ]
    result = subprocess.run(command, capture_output=True, text=True, timeout=120, check=False)
    assert result.returncode in (0, 1), result.stderr
    entries = {(e["namespace"], e["name"]): e for e in json.loads(result.stdout)}

    def judge(pod: dict[str, Any]) -> tuple[bool, str]:
        entry = entries[(pod["metadata"]["namespace"], pod["metadata"]["name"])]
        return entry["allowed"], (entry["status"] or {}).get("message", "")

    return judge


CASES: list[tuple[str, dict[str, Any], bool, str]] = [
    ("whole GPU that fits", gpu_pod("one", "ml-team", gpus=1), True, ""),
    (
        "whole GPUs over the limit",
        gpu_pod("two", "ml-team", gpus=2),
        False,
        'GPU quota "ml-team" exceeded in namespace ml-team: this pod needs 2 GPUs, 7 of 8 are in use',
    ),
    (
        "an init container asks for more than the app",
        make_pod(
            "init", "ml-team", [res("app", {"nvidia.com/gpu": 1})], init=[res("prep", {"nvidia.com/gpu": 2})]
        ),
        False,
        "this pod needs 2 GPUs, 7 of 8 are in use",
    ),
    (
        "a native sidecar adds to the app",
        make_pod(
            "side",
            "ml-team",
            [res("app", {"nvidia.com/gpu": 1})],
            init=[sidecar("ckpt", {"nvidia.com/gpu": 1})],
        ),
        False,
        "this pod needs 2 GPUs",
    ),
    (
        "MIG profile with room",
        make_pod("m1", "notebooks", [res("a", {"nvidia.com/mig-1g.10gb": 1})]),
        True,
        "",
    ),
    (
        "MIG profile without room",
        make_pod("m2", "notebooks", [res("a", {"nvidia.com/mig-1g.10gb": 2})]),
        False,
        "this pod needs 2 nvidia.com/mig-1g.10gb, 13 of 14 are in use",
    ),
    (
        "another MIG profile is counted on its own",
        make_pod("m3", "notebooks", [res("a", {"nvidia.com/mig-3g.40gb": 1})]),
        True,
        "",
    ),
    (
        "HAMi memory times count that fits",
        make_pod("h1", "shared", [res("a", {"nvidia.com/gpu": 2, "nvidia.com/gpumem": 20480})]),
        True,
        "",
    ),
    (
        "HAMi memory times count over the limit",
        make_pod("h2", "shared", [res("a", {"nvidia.com/gpu": 3, "nvidia.com/gpumem": 20480})]),
        False,
        "this pod needs 60Gi of GPU memory, 40Gi of 80Gi are in use",
    ),
    ("a namespace without a quota", gpu_pod("free", "sandbox", gpus=64), True, ""),
]


@pytest.mark.parametrize(("pod", "allowed", "words"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_offline_quota_decisions(judged: Any, pod: dict[str, Any], allowed: bool, words: str) -> None:
    got_allowed, message = judged(pod)
    assert got_allowed is allowed, message
    assert words in message


def test_finished_pods_left_the_room(judged: Any) -> None:
    """Two 8-GPU pods that finished do not count: one more GPU still fits under 8."""
    assert judged(gpu_pod("fits", "ml-team", gpus=1)) == (True, "")


def test_the_files_are_what_the_cli_reads(tmp_path: Path) -> None:
    (tmp_path / "quotas.yaml").write_text(POLICIES)
    assert [q.name for q in load_quotas(tmp_path)] == ["ml-team", "notebooks-mig", "hami-memory"]
