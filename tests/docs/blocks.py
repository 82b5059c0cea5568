"""The fenced blocks of the user documentation, and what a test does with each.

Conventions the docs follow so that every example can be checked:
- a YAML block whose first line is `# file: PATH` is written to PATH before the page's commands
  run (a policy directory, a suite, an inventory), and is loaded like any other block;
- a YAML block whose first line starts with `# excerpt` is part of a larger object (what a
  mutation adds, a piece of an overlay): it must parse, nothing more;
- an `sh` block is a list of commands, run in order in one directory per page; lines starting
  with `#` show output;
- an untagged block shows output or a layout; its lines starting with `$ ` are commands.
"""

from __future__ import annotations

import re
import textwrap
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
PAGES = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md")), REPO / "policies" / "README.md"]
_FENCE = re.compile(r"^([ \t]*)```(\w*)\n(.*?)^[ \t]*```", re.M | re.S)
FILE_MARK = "# file: "
EXCERPT_MARK = "# excerpt"


@dataclass(frozen=True)
class Block:
    page: Path
    line: int
    lang: str
    text: str

    @property
    def where(self) -> str:
        return f"{self.page.relative_to(REPO)}:{self.line}"

    @property
    def file(self) -> str | None:
        first = self.text.split("\n", 1)[0]
        return first.removeprefix(FILE_MARK).strip() if first.startswith(FILE_MARK) else None

    @property
    def excerpt(self) -> bool:
        return self.text.startswith(EXCERPT_MARK)

    def commands(self) -> list[str]:
        """Shell commands, continuation lines joined; output lines and comments left out."""
        lines = self.text.splitlines()
        if self.lang == "":
            lines = [line[2:] for line in lines if line.startswith("$ ")]
        elif self.lang != "sh":
            return []
        commands: list[str] = []
        pending = ""
        for line in lines:
            if not pending and (not line.strip() or line.lstrip().startswith("#")):
                continue
            pending += line.rstrip()
            if pending.endswith("\\"):
                pending = pending[:-1] + " "
                continue
            commands.append(pending.strip())
            pending = ""
        return commands


def blocks(page: Path) -> list[Block]:
    text = page.read_text()
    return [
        Block(page, text[: m.start()].count("\n") + 1, m.group(2), textwrap.dedent(m.group(3)))
        for m in _FENCE.finditer(text)
    ]


def every_block() -> list[Block]:
    return [block for page in PAGES for block in blocks(page)]
