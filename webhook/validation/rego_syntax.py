"""A small Rego reader: tokens with source offsets and a tree of rules, queries and terms.

Just enough of the language to rewrite Gatekeeper's Rego v0 for an engine that only
speaks v1 (see rego_compat). Every node keeps the token indexes it spans, so rewrites
are edits to the original text and line numbers survive. Pure.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

_TOKEN = re.compile(
    r"""(?P<ws>[ \t\r\n]+|\#[^\n]*)
      | (?P<string>"(?:\\.|[^"\\\n])*")
      | (?P<raw>`[^`]*`)
      | (?P<number>\d+(?:\.\d+)?(?:[eE][+-]?\d+)?)
      | (?P<ident>[A-Za-z_][A-Za-z0-9_]*)
      | (?P<op>:=|==|!=|<=|>=|[-+*/%&|<>=()\[\]{},;.:])""",
    re.VERBOSE,
)
SCALAR_WORDS = frozenset({"true", "false", "null"})
_INFIX_LEVELS: tuple[frozenset[str], ...] = (
    frozenset({":=", "="}),
    frozenset({"in"}),
    frozenset({"==", "!=", "<", ">", "<=", ">="}),
    frozenset({"|"}),
    frozenset({"&"}),
    frozenset({"+", "-"}),
    frozenset({"*", "/", "%"}),
)


class RegoSyntaxError(ValueError):
    def __init__(self, line: int, reason: str) -> None:
        super().__init__(f"line {line}: {reason}")
        self.line = line
        self.reason = reason


@dataclass(frozen=True)
class Token:
    kind: str
    text: str
    start: int
    end: int
    line: int
    newline_before: bool


def tokenize(source: str) -> list[Token]:
    tokens: list[Token] = []
    position, line, newline = 0, 1, False
    while position < len(source):
        found = _TOKEN.match(source, position)
        if found is None:
            raise RegoSyntaxError(line, f"unexpected character {source[position]!r}")
        kind, text = found.lastgroup or "", found.group()
        if kind == "ws":
            newline = newline or "\n" in text
        else:
            tokens.append(Token(kind, text, position, found.end(), line, newline))
            newline = False
        line += text.count("\n")
        position = found.end()
    tokens.append(Token("eof", "", len(source), len(source), line, True))
    return tokens


@dataclass
class Node:
    first: int
    last: int


@dataclass
class Scalar(Node):
    pass


@dataclass
class Var(Node):
    name: str


@dataclass
class Suffix:
    kind: str  # "dot", "index" or "call"
    name: str = ""
    index: Node | None = None
    args: list[Node] = field(default_factory=list)


@dataclass
class Ref(Node):
    base: Node
    suffixes: list[Suffix]


@dataclass
class Composite(Node):
    kind: str  # "array", "set", "object" or "paren"
    items: list[Node]


@dataclass
class Comprehension(Node):
    heads: list[Node]
    body: Query


@dataclass
class Infix(Node):
    op: str
    left: Node
    right: Node


@dataclass
class Unary(Node):
    operand: Node


@dataclass
class Literal(Node):
    negated: bool
    expr: Node | None  # None for `some x, y` declarations
    domain: Node | None = None  # `some x in domain` / `every x in domain`
    body: Query | None = None  # `every … { body }`
    modifiers: list[Node] = field(default_factory=list)
    names: list[Node] = field(default_factory=list)  # `some k, v …`


@dataclass
class Query(Node):
    literals: list[Literal]


@dataclass
class Body(Node):
    keyword: str  # "if", "else" or "" (a v0 body, or an extra body of a multi-body rule)
    query: Query | None  # None for an `else` without a body
    brace: int  # token index of "{", or -1 for `if` followed by a single literal


@dataclass
class Rule(Node):
    name_first: int
    name_last: int
    default: bool = False
    key: tuple[int, int] | None = None  # token indexes of `[` and `]` of a v0 partial rule
    contains: int = -1
    assign: int = -1
    bodies: list[Body] = field(default_factory=list)
    values: list[Node] = field(default_factory=list)  # head terms: key, contains, value, else values


@dataclass
class Module:
    tokens: list[Token]
    package: tuple[int, int]
    imports: list[tuple[int, int]]
    rules: list[Rule]


class _Parser:
    def __init__(self, tokens: list[Token]) -> None:
        self.t = tokens
        self.i = 0
        self.newlines_matter = [False]
        self.in_collection_head = False

    @property
    def tok(self) -> Token:
        return self.t[self.i]

    def at(self, *texts: str) -> bool:
        return self.tok.kind in ("op", "ident") and self.tok.text in texts

    def at_line_break(self) -> bool:
        return self.newlines_matter[-1] and self.tok.newline_before

    def take(self, text: str | None = None) -> int:
        if text is not None and self.tok.text != text:
            raise RegoSyntaxError(
                self.tok.line, f"expected {text!r}, found {self.tok.text or 'end of input'!r}"
            )
        self.i += 1
        return self.i - 1

    def error(self, reason: str) -> RegoSyntaxError:
        return RegoSyntaxError(self.tok.line, reason)

    # -- module level -------------------------------------------------------
    def module(self) -> Module:
        self.take("package")
        package = self.dotted()
        imports: list[tuple[int, int]] = []
        while self.at("import"):
            first = self.take()
            self.dotted()
            if self.at("as"):
                self.take()
                self.take()
            imports.append((first, self.i - 1))
        rules: list[Rule] = []
        while self.tok.kind != "eof":
            rules.append(self.rule())
        return Module(self.t, package, imports, rules)

    def dotted(self) -> tuple[int, int]:
        first = self.i
        self.take()
        while not self.tok.newline_before and (self.at(".") or self.at("[")):
            if self.at("["):
                self.take()
                self.take()
                self.take("]")
            else:
                self.take()
                self.take()
        return first, self.i - 1

    def rule(self) -> Rule:
        first = self.i
        default = self.at("default")
        if default:
            self.take()
        if self.tok.kind != "ident":
            raise self.error(f"expected a rule, found {self.tok.text!r}")
        rule = Rule(first, first, self.i, self.i, default=default)
        self.take()
        self.head_ref(rule)
        if self.at("("):
            self.call_args()
        if self.at("contains"):
            rule.contains = self.take()
            rule.values.append(self.expr(1))
        if self.at("=", ":="):
            rule.assign = self.take()
            rule.values.append(self.expr(1))
        self.bodies(rule)
        rule.last = self.i - 1
        return rule

    def head_ref(self, rule: Rule) -> None:
        while not self.tok.newline_before and self.at(".", "["):
            if self.at("."):
                self.take()
                self.take()
                rule.name_last = self.i - 1
                continue
            opening = self.take()
            self.newlines_matter.append(False)
            self.expr(0)
            self.newlines_matter.pop()
            rule.key = (opening, self.take("]"))

    def bodies(self, rule: Rule) -> None:
        if self.at("if"):
            rule.bodies.append(self.body(self.take(), "if"))
        elif self.at("{"):
            rule.bodies.append(self.body(self.i, ""))
        while self.at("else", "{"):
            if self.at("{"):
                rule.bodies.append(self.body(self.i, ""))
                continue
            first = self.take()
            if self.at("=", ":="):
                self.take()
                rule.values.append(self.expr(1))
            if self.at("if"):
                self.take()
            elif not self.at("{"):
                rule.bodies.append(Body(first, self.i - 1, "else", None, -1))
                continue
            rule.bodies.append(self.body(first, "else"))

    def body(self, first: int, keyword: str) -> Body:
        if not self.at("{"):
            self.newlines_matter.append(True)
            literal = self.literal()
            self.newlines_matter.pop()
            return Body(first, literal.last, keyword, Query(literal.first, literal.last, [literal]), -1)
        brace = self.take()
        query = self.query("}")
        self.take("}")
        return Body(first, self.i - 1, keyword, query, brace)

    # -- queries ------------------------------------------------------------
    def query(self, closer: str) -> Query:
        first = self.i
        literals: list[Literal] = []
        self.newlines_matter.append(True)
        while not self.at(closer):
            if self.tok.kind == "eof":
                raise self.error(f"missing {closer!r}")
            literals.append(self.literal())
            if self.at(";"):
                self.take()
            elif not self.at(closer) and not self.tok.newline_before:
                raise self.error(f"unexpected {self.tok.text!r}")
        self.newlines_matter.pop()
        return Query(first, self.i - 1, literals)

    def literal(self) -> Literal:
        first = self.i
        if self.at("some"):
            return self.some(first)
        if self.at("every"):
            return self.every(first)
        negated = self.at("not")
        if negated:
            self.take()
        expr = self.expr(0)
        modifiers: list[Node] = []
        while self.at("with") and not self.tok.newline_before:
            self.take()
            modifiers.append(self.expr(3))
            self.take("as")
            modifiers.append(self.expr(1))
        return Literal(first, self.i - 1, negated, expr, modifiers=modifiers)

    def some(self, first: int) -> Literal:
        self.take()
        names = [self.expr(2)]
        while self.at(",") and not self.at_line_break():
            self.take()
            names.append(self.expr(2))
        domain = None
        if self.at("in") and not self.at_line_break():
            self.take()
            domain = self.expr(2)
        return Literal(first, self.i - 1, False, None, domain=domain, names=names)

    def every(self, first: int) -> Literal:
        self.take()
        self.take()
        if self.at(","):
            self.take()
            self.take()
        self.take("in")
        domain = self.expr(2)
        self.take("{")
        body = self.query("}")
        self.take("}")
        return Literal(first, self.i - 1, False, None, domain=domain, body=body)

    # -- expressions ----------------------------------------------------------
    def expr(self, level: int) -> Node:
        if level >= len(_INFIX_LEVELS):
            return self.unary()
        left = self.expr(level + 1)
        while self.tok.text in _INFIX_LEVELS[level] and self.tok.kind in ("op", "ident"):
            if self.at_line_break() or (self.at("|") and self.in_collection_head):
                break
            op = self.take()
            right = self.expr(level + 1)
            left = Infix(left.first, right.last, self.t[op].text, left, right)
        return left

    def unary(self) -> Node:
        if self.at("-"):
            first = self.take()
            operand = self.unary()
            return Unary(first, operand.last, operand)
        return self.suffixed(self.primary())

    def primary(self) -> Node:
        tok = self.tok
        if tok.kind in ("string", "raw", "number") or tok.text in SCALAR_WORDS:
            self.take()
            return Scalar(self.i - 1, self.i - 1)
        if tok.kind == "ident":
            self.take()
            return Var(self.i - 1, self.i - 1, tok.text)
        if tok.text in ("(", "[", "{"):
            return self.collection()
        raise self.error(f"unexpected {tok.text or 'end of input'!r}")

    def suffixed(self, base: Node) -> Node:
        suffixes: list[Suffix] = []
        while not self.tok.newline_before or not self.newlines_matter[-1]:
            if self.at(".") and self.t[self.i + 1].kind == "ident":
                self.take()
                suffixes.append(Suffix("dot", name=self.t[self.take()].text))
            elif self.at("["):
                self.take()
                self.newlines_matter.append(False)
                index = self.expr(0)
                self.newlines_matter.pop()
                self.take("]")
                suffixes.append(Suffix("index", index=index))
            elif self.at("(") and isinstance(base, Var | Ref):
                suffixes.append(Suffix("call", args=self.call_args()))
            else:
                break
        return Ref(base.first, self.i - 1, base, suffixes) if suffixes else base

    def call_args(self) -> list[Node]:
        self.take("(")
        self.newlines_matter.append(False)
        args: list[Node] = []
        while not self.at(")"):
            args.append(self.expr(0))
            if not self.at(")"):
                self.take(",")
        self.newlines_matter.pop()
        self.take(")")
        return args

    def collection(self) -> Node:
        first = self.i
        opening = self.t[self.take()].text
        closer = {"(": ")", "[": "]", "{": "}"}[opening]
        self.newlines_matter.append(False)
        outer, self.in_collection_head = self.in_collection_head, opening != "("
        items: list[Node] = []
        is_object = False
        comprehension: Query | None = None
        while not self.at(closer):
            items.append(self.expr(1))
            if self.at(":") and opening == "{":
                is_object = True
                self.take()
                items.append(self.expr(1))
            if self.at("|") and opening != "(":
                self.take()
                self.in_collection_head = False
                comprehension = self.query(closer)
                break
            if not self.at(closer):
                self.take(",")
        self.in_collection_head = outer
        self.newlines_matter.pop()
        self.take(closer)
        if comprehension is not None:
            return Comprehension(first, self.i - 1, items, comprehension)
        kind = {"(": "paren", "[": "array", "{": "object" if is_object else "set"}[opening]
        return Composite(first, self.i - 1, kind, items)


def parse(source: str) -> Module:
    """Parse one Rego module; raise RegoSyntaxError with the line at fault."""
    return _Parser(tokenize(source)).module()
