"""Bind references to variables before the expression that uses them, as OPA's compiler does. Pure.

Two reasons, one mechanism:

* regopy refuses, or silently mis-evaluates, a reference that iterates (`xs[_]`,
  `xs[i]`) inside a call argument, a collection literal or arithmetic. Binding it
  first (`__h1 := xs[_]; startswith(x, __h1)`) means the same and works.
* Under `not`, OPA's compiler (stage RewriteDynamicTerms, and RewriteExprTerms for
  nested calls) binds every reference and nested call in the arguments *before* the
  negation: `not f(p.missing)` makes the whole body fail rather than succeed.
  Gatekeeper's templates rely on that, so it is reproduced here.

The rewrite renders each body literal again from the syntax tree, keeping the
original text and line breaks outside what moved.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from webhook.validation.rego_syntax import (
    SCALAR_WORDS,
    Composite,
    Comprehension,
    Infix,
    Literal,
    Module,
    Node,
    Query,
    Ref,
    Scalar,
    Token,
    Unary,
    Var,
)

_ASSIGN = frozenset({":=", "="})
_COMPARE = frozenset({"==", "!=", "<", ">", "<=", ">="})
_TOP, _CALL = 0, 1
_COMMENT = re.compile(r"#[^\n]*")


class Hoister:
    def __init__(self, source: str, module: Module) -> None:
        self.source = source
        self.module = module
        self.tokens: list[Token] = module.tokens
        self.counter = 0
        self.marked: set[int] = set()
        # Names that OPA resolves to refs (rules of this package, imports), so a bare
        # name in an argument is a ref too.
        self.documents = {"input", "data"} | {self.tokens[r.name_first].text for r in module.rules}
        self.documents |= {self.tokens[last].text for _, last in module.imports}

    def edits(self) -> Iterator[tuple[int, int, str]]:
        """(start, end, text) replacements for every body literal that changes."""
        for rule in self.module.rules:
            for value in rule.values:
                yield from self._head_comprehensions(value)
            for body in rule.bodies:
                if body.query is None:
                    continue
                braces = body.brace < 0
                for n, literal in enumerate(body.query.literals):
                    text = self.literal(literal, flatten=False)
                    start, end = self._chars(literal)
                    if n + 1 < len(body.query.literals) and self._needs_separator(literal, body.query, n):
                        text += ";"
                    if text != self.source[start:end]:
                        yield start, end, "{ " + text + " }" if braces else text

    def _head_comprehensions(self, node: Node) -> Iterator[tuple[int, int, str]]:
        """Comprehensions in a rule head have bodies too; rewrite those (heads get no bindings)."""
        if isinstance(node, Comprehension):
            bindings: list[str] = []
            text = self._render(node, False, bindings)
            start, end = self._chars(node)
            if not bindings and text != self.source[start:end]:
                yield start, end, text
            return
        for child in _children(node):
            yield from self._head_comprehensions(child)

    def _needs_separator(self, literal: Literal, query: Query, n: int) -> bool:
        # regopy reads `x` NEWLINE `(y)` as the call `x(y)`; OPA ends the literal at the newline.
        following = self.tokens[query.literals[n + 1].first]
        return (
            following.text in ("(", "[")
            and following.newline_before
            and self.tokens[literal.last + 1].text != ";"
        )

    # -- planning: which nodes move -----------------------------------------------

    def literal(self, literal: Literal, *, flatten: bool, nested: bool = False) -> str:
        if nested and len(literal.names) == 2 and literal.domain is not None:
            return self._some_key_value(literal, flatten)
        if literal.negated and literal.expr is not None and not literal.modifiers:
            self._plan_negated(literal.expr)
        for node in (literal.expr, literal.domain):
            if node is not None:
                self._plan(node, _TOP)
        bindings: list[str] = []
        text = self._render(literal, flatten, bindings)
        return "".join(f"{b}; " for b in bindings) + text

    def _plan(self, node: Node, context: int) -> None:
        """Mark refs that iterate where regopy cannot evaluate them."""
        if isinstance(node, Ref):
            if context == _CALL and _iterates(node):
                self.marked.add(id(node))
            self._plan(node.base, context)
            for suffix in node.suffixes:
                if suffix.index is not None:
                    self._plan(suffix.index, context)
                for arg in suffix.args:
                    self._plan(arg, _CALL)
        elif isinstance(node, Composite):
            for item in node.items:
                self._plan(item, context if node.kind == "paren" else _CALL)
        elif isinstance(node, Infix):
            side = context if node.op in _ASSIGN or node.op in _COMPARE else _CALL
            self._plan(node.left, side)
            self._plan(node.right, side)
        elif isinstance(node, Unary):
            self._plan(node.operand, _CALL)

    def _plan_negated(self, expr: Node) -> None:
        """Mark what OPA binds before a negated expression: refs and calls in its arguments."""
        if isinstance(expr, Ref) and expr.suffixes and expr.suffixes[-1].kind == "call":
            for arg in expr.suffixes[-1].args:
                self._plan_argument(arg)
        elif isinstance(expr, Ref):
            for suffix in expr.suffixes:
                if suffix.index is not None:
                    self._plan_argument(suffix.index)
        elif isinstance(expr, Infix) and expr.op not in _ASSIGN:
            self._plan_argument(expr.left)
            self._plan_argument(expr.right)
        elif isinstance(expr, Unary):
            self._plan_argument(expr.operand)

    def _plan_argument(self, node: Node) -> None:
        if isinstance(node, Ref | Infix | Unary) or (isinstance(node, Var) and node.name in self.documents):
            self.marked.add(id(node))
        elif isinstance(node, Composite):
            for item in node.items:
                self._plan_argument(item)

    # -- rendering ------------------------------------------------------------------

    def _render(self, node: Node, flatten: bool, bindings: list[str]) -> str:
        if id(node) in self.marked and not isinstance(node, Literal):
            return self._bind(node, flatten, bindings)
        if isinstance(node, Query):
            return self._render_query(node, flatten)
        pieces: list[str] = []
        position = self._chars(node)[0]
        for child in _children(node):
            start, end = self._chars(child)
            pieces.append(self._raw(position, start, flatten))
            pieces.append(self._render(child, flatten, bindings))
            position = end
        pieces.append(self._raw(position, self._chars(node)[1], flatten))
        return "".join(pieces)

    def _bind(self, node: Node, flatten: bool, bindings: list[str]) -> str:
        self.marked.discard(id(node))
        self._plan(node, _TOP)
        value = self._render(node, True, bindings)
        self.counter += 1
        name = f"__h{self.counter}"
        bindings.append(f"{name} := {value}")
        start, end = self._chars(node)
        return name if flatten else name + "\n" * self.source.count("\n", start, end)

    def _render_query(self, query: Query, flatten: bool) -> str:
        pieces: list[str] = []
        for n, literal in enumerate(query.literals):
            if n:
                gap = self._raw(self._chars(query.literals[n - 1])[1], self._chars(literal)[0], flatten)
                pieces.append("; " if flatten else gap if ";" in gap or "\n" not in gap else ";" + gap)
            pieces.append(self.literal(literal, flatten=flatten, nested=True))
        return "".join(pieces)

    def _some_key_value(self, literal: Literal, flatten: bool) -> str:
        """regopy refuses `some k, v in xs` inside a comprehension; `some k; v = xs[k]` is the same."""
        assert literal.domain is not None
        bindings: list[str] = []
        self._plan(literal.domain, _TOP)
        collection = self._render(literal.domain, True, bindings)
        key, value = (self._render(name, True, bindings) for name in literal.names)
        self.counter += 1
        name = f"__h{self.counter}"
        if key == "_":
            key = f"{name}k"
        text = f"{name} := {collection}; some {key}; {value} = {name}[{key}]"
        start, end = self._chars(literal)
        lines = "" if flatten else "\n" * self.source.count("\n", start, end)
        return "".join(f"{b}; " for b in bindings) + text + lines

    def _raw(self, start: int, end: int, flatten: bool) -> str:
        text = self.source[start:end]
        if not flatten:
            return text
        return re.sub(r"\s+", " ", _COMMENT.sub(" ", text))

    def _chars(self, node: Node) -> tuple[int, int]:
        return self.tokens[node.first].start, self.tokens[node.last].end


def _children(node: Node) -> list[Node]:
    found: list[Node | None] = []
    if isinstance(node, Ref):
        found.append(node.base)
        for suffix in node.suffixes:
            found.append(suffix.index)
            found.extend(suffix.args)
    elif isinstance(node, Composite):
        found.extend(node.items)
    elif isinstance(node, Comprehension):
        found.extend(node.heads)
        found.append(node.body)
    elif isinstance(node, Infix):
        found += [node.left, node.right]
    elif isinstance(node, Unary):
        found.append(node.operand)
    elif isinstance(node, Literal):
        found += [node.expr, node.domain, node.body, *node.modifiers]
    elif isinstance(node, Query):
        found.extend(node.literals)
    return sorted((n for n in found if n is not None and not isinstance(n, Scalar)), key=lambda n: n.first)


def _iterates(ref: Ref) -> bool:
    return any(
        isinstance(s.index, Var) and s.index.name not in SCALAR_WORDS
        for s in ref.suffixes
        if s.kind == "index"
    )
