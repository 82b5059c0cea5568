"""The README's reference tables and the docs' sample outputs say what the code does.

- every subcommand the parser offers has a row in the README's command table, every `serve` flag
  is named in its options table, and every `manifests` flag in that command's row;
- every list of the exempt namespaces names all of webhook.config.EXEMPT_NAMESPACES;
- docs/quota.md's sample output is what its documented command prints on its documented policy
  and cluster, and its refusal is what `review` answers there.
"""

from __future__ import annotations

import argparse
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from tests.docs.blocks import REPO, blocks
from webhook.cli import build_parser
from webhook.config import DEFAULT_NAMESPACE, EXEMPT_NAMESPACES

README = REPO / "README.md"
BIN = Path(sys.executable).parent
_CODE = re.compile(r"`([^`]+)`")
_FLAG = re.compile(r"(?<![\w-])(--[a-z][a-z0-9-]*)")


def _subcommands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    """Every command path (`serve`, `certs client`, ...) with its parser; groups are left out."""
    found: dict[str, argparse.ArgumentParser] = {}
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                nested = _subcommands(sub)
                found.update({f"{name} {path}": p for path, p in nested.items()} if nested else {name: sub})
    return found


COMMANDS = _subcommands(build_parser())


def _flags(parser: argparse.ArgumentParser) -> set[str]:
    return {
        option
        for action in parser._actions
        for option in action.option_strings
        if option.startswith("--") and option != "--help"
    }


def _section(text: str, heading: str) -> str:
    start = text.index(heading + "\n")
    following = re.search(r"^#{2,3} ", text[start + len(heading) :], re.M)
    return text[start : start + len(heading) + (following.start() if following else len(text))]


def _rows(section: str) -> list[list[str]]:
    rows = [line for line in section.splitlines() if line.startswith("| ")]
    return [[cell.strip() for cell in re.split(r"(?<!\\)\|", row)[1:-1]] for row in rows]


def _command_rows() -> list[list[str]]:
    return _rows(_section(README.read_text(), "## Command line"))


@pytest.mark.parametrize("path", sorted(COMMANDS))
def test_every_subcommand_has_a_row_in_the_readme(path: str) -> None:
    firsts = [row[0] for row in _command_rows()]
    assert any(re.match(rf"`gpu-webhook {re.escape(path)}[ `]", cell) for cell in firsts), (
        f"README.md's command table has no row for `gpu-webhook {path}`"
    )


def test_every_serve_flag_is_in_the_readme_options_table() -> None:
    table = _rows(_section(README.read_text(), "### `serve` options"))
    named = {flag for row in table for code in _CODE.findall(" | ".join(row)) for flag in _FLAG.findall(code)}
    flags = _flags(COMMANDS["serve"])
    missing = sorted(flags - named)
    assert not missing, f"README.md's `serve` options table does not name {missing}"


def test_every_manifests_flag_is_in_its_row() -> None:
    (row,) = [row for row in _command_rows() if row[0].startswith("`gpu-webhook manifests")]
    named = set(_FLAG.findall(row[0]))
    missing = sorted(_flags(COMMANDS["manifests"]) - named)
    assert not missing, f"README.md's `gpu-webhook manifests` row does not name {missing}"


# The exempt namespaces: other GPU stacks may be added to the constant; every list follows it.

LISTING_PAGES = [README, REPO / "docs/operations.md", REPO / "docs/security.md", REPO / "docs/policies.md"]
_EXEMPTING = re.compile(r"exempt|exclude|skip|never sent|never reviewed|always works", re.I)


def _paragraphs(page: Path) -> list[str]:
    """Paragraphs and table rows, so that one row of a table counts on its own."""
    parts: list[str] = []
    for paragraph in re.split(r"\n\s*\n", page.read_text()):
        lines = paragraph.splitlines()
        rows = [line for line in lines if line.startswith("|")]
        parts += rows or [paragraph]
    return parts


def _named(paragraph: str) -> set[str]:
    return {name.strip() for code in _CODE.findall(paragraph) for name in code.split(",")}


@pytest.mark.parametrize("page", LISTING_PAGES, ids=[str(p.relative_to(REPO)) for p in LISTING_PAGES])
def test_every_list_of_exempt_namespaces_is_complete(page: Path) -> None:
    """A paragraph that names `kube-system` as exempt names every exempt namespace (the
    webhook's own may be called that, since an install can move it)."""
    short = []
    for paragraph in _paragraphs(page):
        named = _named(paragraph)
        if "kube-system" not in named or not _EXEMPTING.search(paragraph):
            continue
        if "own namespace" in paragraph:
            named.add(DEFAULT_NAMESPACE)
        missing = [name for name in EXEMPT_NAMESPACES if name not in named]
        if missing:
            short.append(f"{' '.join(paragraph.split())[:120]}... lacks {missing}")
    assert not short, "\n".join(short)


def test_the_readme_names_the_exempt_namespaces() -> None:
    text = README.read_text()
    assert ",".join(EXEMPT_NAMESPACES) in text  # the serve default
    (listing,) = [p for p in _paragraphs(README) if "Exempt namespaces:" in p]
    names = _CODE.findall(listing[listing.index("Exempt namespaces:") :])
    assert names[: len(EXEMPT_NAMESPACES)] == list(EXEMPT_NAMESPACES)


# docs/quota.md's samples.

QUOTA = REPO / "docs/quota.md"


@pytest.fixture(scope="module")
def quota_page(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The page's files (the policy, the cluster) in a directory of their own."""
    root = tmp_path_factory.mktemp("quota")
    for block in blocks(QUOTA):
        if block.file is not None:
            (root / block.file).parent.mkdir(parents=True, exist_ok=True)
            (root / block.file).write_text(block.text)
    return root


def _gpu_webhook(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(BIN / "gpu-webhook"), *args], cwd=cwd, capture_output=True, text=True, timeout=120, check=False
    )


def test_the_quota_status_sample_is_what_the_command_prints(quota_page: Path) -> None:
    (block,) = [
        b
        for b in blocks(QUOTA)
        if any(line.startswith("$ gpu-webhook quota status") for line in b.text.splitlines())
    ]
    command, *shown = block.text.splitlines()
    result = _gpu_webhook(quota_page, *shlex.split(command.removeprefix("$ "))[1:])
    assert result.returncode == 0, result.stderr
    assert [line.rstrip() for line in result.stdout.splitlines()] == [line.rstrip() for line in shown]


def test_the_refusal_sample_is_what_review_answers(quota_page: Path) -> None:
    """Two more GPUs in ml-team, on the page's policy and cluster."""
    (shown,) = [
        b for b in blocks(QUOTA) if b.lang == "" and b.text.startswith('GPU quota "ml-team" exceeded')
    ]
    pod = quota_page / "trainer-1.yaml"
    pod.write_text(
        "apiVersion: v1\nkind: Pod\nmetadata: {name: trainer-1, namespace: ml-team}\nspec:\n  containers:\n"
        "    - {name: main, image: registry.example.com/train:1, resources: {limits: {nvidia.com/gpu: 2}}}\n"
    )
    args = ["review", str(pod), "--policies", "quota-policies/", "--inventory", "cluster.yaml"]
    result = _gpu_webhook(quota_page, *args)
    assert result.returncode == 1, result.stdout + result.stderr
    assert " ".join(shown.text.split()) in " ".join(result.stdout.split())
