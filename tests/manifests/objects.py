"""Small queries over rendered objects, shared by the manifest tests."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from webhook.manifests import Manifest

REPO = Path(__file__).resolve().parents[2]


def run_cli(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "webhook", "manifests", *args],
        cwd=cwd,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


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
