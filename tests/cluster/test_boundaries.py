"""Module boundaries the design relies on, checked on the source."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "webhook"
PURE = (
    "quota/policy.py",
    "quota/check.py",
    "quota/status.py",
    *(f"accounting/{path.name}" for path in sorted((PACKAGE / "accounting").glob("*.py"))),
    "vendors.py",
    "gpu.py",
)


def imported_modules(path: Path) -> set[str]:
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
    return found


def test_only_cluster_py_imports_kubernetes() -> None:
    importers = [
        str(path.relative_to(PACKAGE))
        for path in PACKAGE.rglob("*.py")
        if any(m == "kubernetes" or m.startswith("kubernetes.") for m in imported_modules(path))
    ]
    assert importers == ["cluster.py"]


def test_the_quota_core_and_the_accelerator_model_do_no_io() -> None:
    forbidden = {"os", "socket", "threading", "time", "pathlib", "urllib3", "webhook.cluster"}
    assert len(PURE) > 10  # the accelerator package was found
    for name in PURE:
        modules = imported_modules(PACKAGE / name)
        assert not modules & forbidden, (name, modules & forbidden)
