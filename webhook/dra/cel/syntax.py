"""A selector's syntax tree: cel-python's parse, made shallow, and the shapes read from it.

The checker and the evaluator both read the simplified tree this module makes, and both find
a macro's variable, a call's arguments and has()'s field selection the same way, here.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Sequence
from typing import Any, Final

import lark
from celpy.celparser import CELParseError, CELParser
from lark.exceptions import UnexpectedToken

from webhook.dra.cel.errors import SelectorError, UnsupportedSelector
from webhook.dra.cel.kinds import BOOL, LIST

# The macros and what they give.
MACROS: Final = {"all": BOOL, "exists": BOOL, "exists_one": BOOL, "map": LIST, "filter": LIST}


@functools.cache
def _parser() -> CELParser:
    """Built on first use: building the grammar's tables takes a third of a second, which every
    command would otherwise pay at import, judged a selector or not."""
    return CELParser()


# String literals and comments, so that optional syntax is looked for only in code.
NOT_CODE: Final = re.compile(
    r"""[rRbB]{0,2}(?:\"\"\"[\s\S]*?\"\"\"|'''[\s\S]*?'''|"(?:\\.|[^"\\\n])*"|'(?:\\.|[^'\\\n])*')"""
    r"""|//[^\n]*"""
)
_OPTIONAL_SYNTAX: Final = re.compile(r"\.\s*\?|\[\s*\?|\{\s*\?|,\s*\?")


def parsed(expression: str) -> lark.Tree[Any]:
    try:
        return _parser().parse(expression)
    except CELParseError as e:
        if _OPTIONAL_SYNTAX.search(NOT_CODE.sub('""', expression)):
            raise UnsupportedSelector("optional field syntax is not supported") from e
        raise SelectorError(_syntax_error(expression, e)) from e


def _syntax_error(expression: str, error: CELParseError) -> str:
    cause = error.__context__
    if isinstance(cause, UnexpectedToken) and cause.token.type == "$END":
        return "syntax error: the expression ends too early"
    if error.line is None or error.column is None:
        return "syntax error"
    lines = expression.splitlines() or [""]
    rest = lines[min(error.line, len(lines)) - 1][error.column - 1 :]
    return f"syntax error at line {error.line}, column {error.column} near {rest[:20]!r}"


_PASS_THROUGH: Final = frozenset(
    {"expr", "conditionalor", "conditionaland", "relation", "addition", "multiplication", "unary", "member"}
    | {"primary", "paren_expr"}
)


def simplified(tree: lark.Tree[Any]) -> lark.Tree[Any]:
    """The grammar wraps every operand in a chain of one-child rules (expr, conditionalor, ...,
    primary) and parses `a || b || c` as a left-leaning chain: dropping the one and making the
    other n-ary keeps the tree shallow and its evaluation short. Rule names become plain
    strings, cheaper to look up than lark's tokens."""
    root: lark.Tree[Any] = _through(tree)
    stack = [root]
    while stack:
        node = stack.pop()
        node.data = str(node.data)
        if node.data in ("conditionalor", "conditionaland") and len(node.children) == 2:
            node.children = _chain(node)
        node.children = [_through(child) for child in node.children]
        stack.extend(child for child in node.children if isinstance(child, lark.Tree))
    return root


def _through(node: Any) -> Any:
    while (
        isinstance(node, lark.Tree)
        and node.data in _PASS_THROUGH
        and len(node.children) == 1
        and isinstance(node.children[0], lark.Tree)
    ):
        node = node.children[0]
    return node


def _chain(node: lark.Tree[Any]) -> list[Any]:
    operands: list[Any] = []
    while node.data in ("conditionalor", "conditionaland") and len(node.children) == 2:
        operands.append(node.children[1])
        node = node.children[0]
    operands.append(node.children[0])
    return operands[::-1]


def depth(tree: lark.Tree[Any]) -> int:
    deepest, stack = 0, [(tree, 1)]
    while stack:
        node, level = stack.pop()
        deepest = max(deepest, level)
        stack.extend((child, level + 1) for child in node.children if isinstance(child, lark.Tree))
    return deepest


def arguments(rest: Sequence[Any]) -> list[Any]:
    return list(rest[0].children) if rest else []


def descend(tree: Any) -> Any:
    """The node a chain of single-child nodes (expr -> ... -> primary) comes down to."""
    while isinstance(tree, lark.Tree) and len(tree.children) == 1 and isinstance(tree.children[0], lark.Tree):
        if tree.data in ("list_lit", "map_lit", "ident_arg", "member_object"):
            break
        tree = tree.children[0]
    return tree


def bare_name(tree: Any) -> str | None:
    node = descend(tree)
    if isinstance(node, lark.Tree) and node.data == "ident":
        return str(node.children[0])
    return None


def qualified_name(tree: Any) -> str | None:
    """`a.b.c` as a dotted name, None for anything but plain names and field selections."""
    parts: list[str] = []
    node = descend(tree)
    while isinstance(node, lark.Tree) and node.data == "member_dot":
        parts.append(str(node.children[1]))
        node = descend(node.children[0])
    name = bare_name(node)
    return None if name is None else ".".join([name, *reversed(parts)])


def variable(tree: Any, where: str) -> str:
    name = bare_name(tree)
    if name is None:
        raise SelectorError(f"the variable of {where} must be a simple name")
    return name


def selection(tree: Any) -> lark.Tree[Any] | None:
    node = descend(tree)
    if isinstance(node, lark.Tree) and node.data == "member_dot":
        return node
    return None
