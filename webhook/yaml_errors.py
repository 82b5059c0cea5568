"""PyYAML's errors in plain words, with the line to look at.

PyYAML reports what its scanner or parser expected ("expected <block end>, but found
'<block mapping start>'"), which tells a policy author little. Each rule below names the
usual cause instead and the line where it is, which for some errors is where the broken
construct began (`context_mark`) rather than where the parser gave up.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import yaml


@dataclass(frozen=True)
class YamlTrouble:
    line: int  # 1-based; 0 when unknown
    column: int  # 1-based; 0 when unknown
    reason: str

    def __str__(self) -> str:
        where = f"line {self.line}" + (f", column {self.column}" if self.column else "") if self.line else ""
        return f"{self.reason} ({where})" if where else self.reason


@dataclass(frozen=True)
class _Rule:
    pattern: str  # searched in PyYAML's "problem" text
    reason: str  # may use the pattern's groups
    at_start: bool = False  # report the line where the construct began, not where parsing stopped


_RULES = (
    _Rule(
        r"mapping values are not allowed here",
        "a second ':' on this line, or a line indented deeper than the key above it; "
        "quote a value that contains ': ', or fix the indentation",
    ),
    _Rule(
        r"could not find expected ':'",
        "a line inside a mapping that is not `key: value`; add the missing ':' or fix the indentation",
        at_start=True,
    ),
    _Rule(r"found character '\\t'", "a tab character: YAML indents with spaces only"),
    _Rule(
        r"found character '(.)' that cannot start any token",
        "a value cannot start with '\\1'; put the value in quotes",
    ),
    _Rule(
        r"expected <block end>, but found '<block (mapping|sequence) start>'",
        "this line is indented differently from the lines above it at the same level",
    ),
    _Rule(
        r"expected <block end>, but found '-'",
        "a list item ('- ') where a `key: value` was expected; indent it under its key",
    ),
    _Rule(
        r"expected <block end>, but found",
        "this line does not fit the structure above it; check the indentation",
    ),
    _Rule(r"did not find expected '-' indicator", "a list item is not indented like the items above it"),
    _Rule(r"did not find expected key", "this line is not indented like the keys above it"),
    _Rule(
        r"found undefined alias '([^']*)'", "'*\\1' refers to an anchor '&\\1' that is not defined above it"
    ),
    _Rule(r"second occurrence", "an anchor name is used twice; rename one of them"),
    _Rule(
        r"found unexpected end of stream",
        "a quoted string that is never closed (it starts on this line)",
        at_start=True,
    ),
    _Rule(
        r"found unknown escape character '(.)'",
        "'\\\\\\1' is not an escape YAML knows in a double-quoted string; use single quotes instead",
    ),
    _Rule(
        r"expected ',' or '\]'",
        "a '[...]' list that is not closed, or whose items are not separated by commas "
        "(it starts on this line)",
        at_start=True,
    ),
    _Rule(
        r"expected ',' or '\}'",
        "a '{...}' mapping that is not closed, or whose entries are not separated by commas "
        "(it starts on this line)",
        at_start=True,
    ),
    _Rule(
        r"could not determine a constructor for the tag '([^']*)'",
        "the tag '\\1' is not allowed here; remove it or quote the value",
    ),
    _Rule(
        r"expected the node content, but found '<stream end>'",
        "the file ends where a value was expected: a '[' or '{' that is never closed, or a key "
        "with nothing after it",
    ),
    _Rule(
        r"expected the node content, but found '(.)'",
        "a value cannot start with '\\1' here; put the value in quotes",
    ),
    _Rule(r"found unhashable key", "a list or mapping used as a key; keys must be plain values"),
    _Rule(r"found duplicate key", "a key appears twice in the same mapping"),
)


def describe(error: yaml.YAMLError, text: str = "") -> YamlTrouble:
    """What went wrong, in words a policy author can act on, and where (`text`, the document
    that was read, locates the characters YAML refuses to read at all)."""
    if isinstance(error, yaml.reader.ReaderError):
        before = text[: error.position]
        line, column = before.count("\n") + 1, len(before) - before.rfind("\n")
        return YamlTrouble(line if text else 0, column if text else 0, _reader_reason(error))
    problem = str(getattr(error, "problem", None) or error)
    problem_mark = getattr(error, "problem_mark", None)
    context_mark = getattr(error, "context_mark", None)
    for rule in _RULES:
        found = re.search(rule.pattern, problem)
        if found is None:
            continue
        mark = context_mark if rule.at_start and context_mark is not None else problem_mark
        return _trouble(mark, found.expand(rule.reason))
    return _trouble(problem_mark, f"YAML cannot read this: {problem}")


def _trouble(mark: yaml.Mark | None, reason: str) -> YamlTrouble:
    if mark is None:
        return YamlTrouble(0, 0, reason)
    return YamlTrouble(mark.line + 1, mark.column + 1, reason)


def _reader_reason(error: yaml.reader.ReaderError) -> str:
    if isinstance(error.character, int):
        return f"the file holds a control character (code {error.character:#x}) that YAML does not allow"
    return "the file is not UTF-8 text"
