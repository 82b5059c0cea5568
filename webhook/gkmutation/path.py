"""Mutation locations: `spec.containers[name: *].securityContext.privileged`. Pure.

The grammar and its tokens are Gatekeeper's (pkg/mutation/path/token/scanner.go and
pkg/mutation/path/parser/parser.go): dot-separated field names, each optionally followed by
one `[key: value]` list selector whose value is a name, a non-negative integer or the glob
`*`; names with other characters are quoted with ' or " (a backslash escapes the next
character); blanks between tokens are skipped.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

# Locations are written by administrators, but a policy file is still input: bound its parse.
MAX_PATH_CHARS = 1024
_INT64_MAX = 2**63 - 1
_IDENT_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-")
_DIGITS = frozenset("0123456789")
_BLANKS = frozenset(" \t\r\n")
_PUNCTUATION = {".": "SEPARATOR", "[": "LBRACKET", "]": "RBRACKET", "*": "GLOB", ":": "COLON"}

TokenType = Literal["IDENT", "INT", "SEPARATOR", "LBRACKET", "RBRACKET", "GLOB", "COLON", "EOF"]


class PathError(ValueError):
    """A location or subPath that does not parse, or that a mutator kind does not accept."""


@dataclass(frozen=True)
class Field:
    """An object's field."""

    name: str

    def __str__(self) -> str:
        return _quote(self.name)


@dataclass(frozen=True)
class ListKey:
    """The elements of a list whose `key` field equals `value` (a str or an int), or all (`glob`)."""

    key: str
    value: str | int | None = None
    glob: bool = False

    def __str__(self) -> str:
        if self.glob:
            return f"[{_quote(self.key)}: *]"
        value = _quote(self.value) if isinstance(self.value, str) else str(self.value)
        return f"[{_quote(self.key)}: {value}]"


Node = Field | ListKey
Path = tuple[Node, ...]


def render(path: Path) -> str:
    text = ""
    for position, node in enumerate(path):
        if isinstance(node, Field) and position:
            text += "."
        text += str(node)
    return text


def _quote(name: str) -> str:
    """As Gatekeeper prints a name (parser/node.go quote)."""
    if not name:
        return '""'
    if any(c in name for c in "'\"\t\n \\*[]:.") or name[0] in _DIGITS:
        return '"' + name.replace("\\", "\\\\").replace('"', '\\"') + '"'
    return name


@dataclass(frozen=True)
class _Token:
    type: TokenType
    text: str
    position: int


def _tokens(text: str) -> list[_Token]:
    found: list[_Token] = []
    i = 0
    while True:
        while i < len(text) and text[i] in _BLANKS:
            i += 1
        if i == len(text):
            found.append(_Token("EOF", "", i))
            return found
        start, char = i, text[i]
        if char in _DIGITS:
            while i < len(text) and text[i] in _DIGITS:
                i += 1
            found.append(_Token("INT", text[start:i], start))
        elif char in _IDENT_CHARS:
            while i < len(text) and text[i] in _IDENT_CHARS:
                i += 1
            found.append(_Token("IDENT", text[start:i], start))
        elif char in _PUNCTUATION:
            found.append(_Token(_PUNCTUATION[char], char, start))  # type: ignore[arg-type]
            i += 1
        elif char in "'\"":
            value, i = _quoted(text, i)
            found.append(_Token("IDENT", value, start))
        else:
            raise PathError(f"invalid character {char!r} at position {start}")


def _quoted(text: str, start: int) -> tuple[str, int]:
    quote, i = text[start], start + 1
    value: list[str] = []
    while i < len(text):
        char = text[i]
        if char == quote:
            return "".join(value), i + 1
        if char == "\\":
            i += 1
            if i == len(text):
                break
            char = text[i]
        value.append(char)
        i += 1
    raise PathError(f"unterminated string starting at position {start}")


def parse(text: str) -> Path:
    """The nodes of a location; PathError says what is wrong and where."""
    if len(text) > MAX_PATH_CHARS:
        raise PathError(f"longer than {MAX_PATH_CHARS} characters")
    tokens = _tokens(text)
    nodes: list[Node] = []
    i = 0
    while tokens[i].type == "IDENT":
        nodes.append(Field(tokens[i].text))
        i += 1
        if tokens[i].type == "LBRACKET":
            node, i = _list(tokens, i + 1)
            nodes.append(node)
        if tokens[i].type == "SEPARATOR":
            if tokens[i + 1].type == "EOF":
                raise PathError("trailing separator")
            i += 1
        elif tokens[i].type != "EOF":
            raise PathError(_unexpected("'.' or the end", tokens[i]))
    if tokens[i].type != "EOF":
        raise PathError(_unexpected("a field name or the end", tokens[i]))
    return tuple(nodes)


def _list(tokens: list[_Token], i: int) -> tuple[ListKey, int]:
    if tokens[i].type != "IDENT":
        raise PathError(_unexpected("a key field in the list selector", tokens[i]))
    key = tokens[i].text
    if tokens[i + 1].type != "COLON":
        raise PathError(_unexpected(f"':' after key field {key!r}", tokens[i + 1]))
    value = tokens[i + 2]
    if value.type == "GLOB":
        node = ListKey(key, glob=True)
    elif value.type == "IDENT":
        node = ListKey(key, value.text)
    elif value.type == "INT":
        if int(value.text) > _INT64_MAX:
            raise PathError(f"integer key value {value.text} overflows 64 bits")
        node = ListKey(key, int(value.text))
    else:
        raise PathError(_unexpected("a key value or '*' in the list selector", value))
    if tokens[i + 3].type != "RBRACKET":
        raise PathError(_unexpected("']' after the list selector", tokens[i + 3]))
    return node, i + 4


def _unexpected(expected: str, token: _Token) -> str:
    got = "the end" if token.type == "EOF" else repr(token.text)
    return f"expected {expected} at position {token.position}, got {got}"


def is_prefix(short: Path, long: Path) -> bool:
    return len(short) <= len(long) and long[: len(short)] == short
