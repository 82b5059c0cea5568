"""The command line run as users run it: `python -m webhook …` in a child process."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

from tests.support.patience import PATIENCE


def gpu_webhook(
    *args: str, cwd: Path | None = None, env: Mapping[str, str] | None = None, timeout: float = 3 * PATIENCE
) -> subprocess.CompletedProcess[str]:
    """Never raises for a failing command: tests assert on its exit code and output. The
    caller's GPU_WEBHOOK_* settings are left out, so a developer's shell cannot change a result.
    `timeout` bounds a whole command (start, compiling the bundle, its work), so it is wider."""
    inherited = {k: v for k, v in os.environ.items() if not k.startswith("GPU_WEBHOOK_")}
    return subprocess.run(
        [sys.executable, "-m", "webhook", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
        cwd=cwd,
        env={**inherited, **(env or {})},
    )
