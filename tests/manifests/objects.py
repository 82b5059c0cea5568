"""Small queries over rendered objects, shared by the manifest tests."""

from __future__ import annotations

import subprocess
from pathlib import Path

from tests.support.cli import gpu_webhook
from webhook.manifests import Manifest

REPO = Path(__file__).resolve().parents[2]


def run_cli(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return gpu_webhook("manifests", *args, cwd=cwd, env={"PYTHONPATH": str(REPO)})


def one(objects: list[Manifest], kind: str) -> Manifest:
    found = [obj for obj in objects if obj["kind"] == kind]
    assert len(found) == 1, f"expected one {kind}, found {len(found)}"
    return found[0]


def webhooks_by_name(objects: list[Manifest]) -> dict[str, Manifest]:
    return {
        hook["name"]: hook
        for obj in objects
        if obj["kind"].endswith("WebhookConfiguration")
        for hook in obj["webhooks"]
    }
