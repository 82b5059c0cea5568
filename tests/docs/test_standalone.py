"""The user documentation stands alone: every relative link resolves inside the repository, and
nothing names material a clone does not have or the labels of the project's own work."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.docs.blocks import REPO

PAGES = [
    REPO / "README.md",
    *sorted((REPO / "docs").glob("*.md")),
    REPO / "policies" / "README.md",
    REPO / "policies" / "security" / "README.md",
    REPO / "manifests" / "README.md",
    REPO / "bench" / "README.md",
]
JARGON = [
    (re.compile(r"\.\./shared|DESIGN\.md"), "a design note outside the repository"),
    (re.compile(r"\bstop \d+\b|\bstop \d+'s\b|\bthis stop\b", re.I), "an internal milestone label"),
    (re.compile(r"\bprototype \d+ of \d+\b", re.I), "an internal experiment label"),
    (re.compile(r"\bissue #?\d+\b", re.I), "an issue number"),
    (re.compile(r"\bmilestone\b", re.I), "an internal milestone"),
]
_LINK = re.compile(r"\]\(([^)#\s]+)(?:#[^)]*)?\)|`((?:\.\./)+[^`\s]+)`")


@pytest.mark.parametrize("page", PAGES, ids=[str(p.relative_to(REPO)) for p in PAGES])
def test_no_jargon_and_nothing_outside_the_repository(page: Path) -> None:
    found = []
    for number, line in enumerate(page.read_text().splitlines(), 1):
        for pattern, what in JARGON:
            for match in pattern.finditer(line):
                found.append(f"{page.relative_to(REPO)}:{number}: {what}: {match.group(0)!r}")
    assert not found, "\n".join(found)


@pytest.mark.parametrize("page", PAGES, ids=[str(p.relative_to(REPO)) for p in PAGES])
def test_relative_links_resolve_inside_the_repository(page: Path) -> None:
    broken = []
    for match in _LINK.finditer(page.read_text()):
        target = match.group(1) or match.group(2)
        if re.match(r"^[a-z]+:", target):
            continue  # https:, mailto:
        resolved = (page.parent / target).resolve()
        if not resolved.is_relative_to(REPO) or not resolved.exists():
            broken.append(target)
    assert not broken, broken
