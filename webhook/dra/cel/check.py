"""What Kubernetes' type checker refuses, refused here when a selector compiles.

Kubernetes compiles a selector against its declared environment (dynamic-resource-allocation
cel/compile.go): the `device` variable and its fields, the declared functions and their
overloads, the macros. This module infers each node's type as far as deciding whether a
selector compiles needs, and raises SelectorError for what the type checker refuses:
unknown names, functions and `device` fields, misuse of macros, a result that cannot be a bool,
literal lists and maps mixing types, invalid literal regular expressions, integer literals out
of range. A result typed `dyn` (an attribute) is accepted and checked when evaluated, as
Kubernetes does. What Kubernetes declares but this engine cannot evaluate (optional values, the
sets, lists-extension, URL, IP and CIDR libraries, two-variable comprehensions, leading-dot
names, deep nesting) raises UnsupportedSelector.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final, cast

import lark
from celpy import celtypes
from celpy.evaluation import Activation, Evaluator

from webhook.dra.cel import syntax
from webhook.dra.cel.environment import DEVICE_FIELDS, NAMESPACES, SIGNATURES, UNSUPPORTED_FUNCTIONS
from webhook.dra.cel.errors import SelectorError, UnsupportedSelector
from webhook.dra.cel.kinds import (
    ARITHMETIC,
    ATTRIBUTE_DOMAIN,
    ATTRIBUTES,
    BOOL,
    BYTES,
    CAPACITY,
    CAPACITY_DOMAIN,
    DEVICE,
    DOUBLE,
    DURATION,
    DYN,
    INT,
    LIST,
    MAP,
    MAPS,
    NOT_NULLABLE,
    NULL,
    NUMBERS,
    ORDERED,
    QUANTITY,
    SEMVER,
    STRING,
    TIMESTAMP,
    TYPE,
    TYPE_NAMES,
    UINT,
)
from webhook.dra.cel.limits import INT64, MAX_DEPTH, MAX_EXPRESSION_BYTES
from webhook.dra.cel.strings import compile_regex


@dataclass(frozen=True)
class MessageType:
    """A type that `Name{field: value, ...}` constructs: its fields and their types, or None when
    any field name is allowed, typed dyn."""

    fields: Mapping[str, str] | None = None


@dataclass(frozen=True)
class Environment:
    """The names an expression may use, and what its environment adds to the selectors' one.

    `roots` are the top-level variables with their types; `results` the types the whole
    expression may have, None for any (DYN is always accepted, checked when evaluated); `excluded` the
    functions of SIGNATURES this environment does not declare; `filtered_map` allows the
    three-argument `map(x, filter, transform)`; `messages` resolves a qualified type name to the
    message type that `Name{...}` constructs (None: no message types, as for selectors)."""

    roots: Mapping[str, str]
    results: frozenset[str] | None = frozenset({BOOL})
    excluded: frozenset[str] = frozenset()
    filtered_map: bool = False
    max_bytes: int = MAX_EXPRESSION_BYTES
    messages: Callable[[str], MessageType | None] | None = None


SELECTORS: Final = Environment(roots={"device": DEVICE})


def checked_tree(expression: str, environment: Environment = SELECTORS) -> lark.Tree[Any]:
    """The simplified tree of an expression that compiles; raises SelectorError otherwise."""
    size = len(expression.encode("utf-8", "surrogatepass"))
    if size > environment.max_bytes:
        raise SelectorError(f"too long: {size} bytes, the limit is {environment.max_bytes}")
    tree = syntax.simplified(syntax.parsed(expression))
    if syntax.depth(tree) > MAX_DEPTH:
        raise UnsupportedSelector(f"nested more than {MAX_DEPTH} levels deep")
    try:
        result = _Checker(environment).kind(tree)
    except RecursionError as e:
        raise UnsupportedSelector("nested too deeply to check here") from e
    if environment.results is not None and result != DYN and result not in environment.results:
        wanted = " or ".join(sorted(environment.results))
        raise SelectorError(f"must evaluate to {wanted}, not {result}")
    return tree


# What selecting a field or an index of the device's maps gives.
_INSIDE: Final = {
    ATTRIBUTES: ATTRIBUTE_DOMAIN,
    ATTRIBUTE_DOMAIN: DYN,
    CAPACITY: CAPACITY_DOMAIN,
    CAPACITY_DOMAIN: QUANTITY,
    MAP: DYN,
    DYN: DYN,
}
# The checker's own types: any other type name is a message type of the environment.
_BUILT_IN: Final = NOT_NULLABLE | {NULL, DYN, TIMESTAMP, DURATION, QUANTITY, SEMVER, DEVICE}
_LITERALS: Final = {
    "INT_LIT": INT,
    "UINT_LIT": UINT,
    "FLOAT_LIT": DOUBLE,
    "STRING_LIT": STRING,
    "MLSTRING_LIT": STRING,
    "BYTES_LIT": BYTES,
    "BOOL_LIT": BOOL,
    "NULL_LIT": NULL,
}


class _Checker:
    """Infers each node's type the way Kubernetes' type checker would, as far as deciding
    whether a selector compiles needs: an attribute's value is `dyn`, checked when evaluated.
    It reads simplified trees: no one-child pass-through nodes."""

    def __init__(self, environment: Environment) -> None:
        self._environment = environment
        self._variables: list[str] = []

    def kind(self, tree: lark.Tree[Any]) -> str:
        check = getattr(self, "_" + str(tree.data), None)
        if check is None:
            raise SelectorError(f"unexpected syntax {tree.data!s}")
        return cast(str, check(tree))

    def _expr(self, tree: lark.Tree[Any]) -> str:
        condition, *branches = (self.kind(child) for child in tree.children)
        _require(condition, {BOOL}, "the condition of ?:")
        return _same_type(branches, "the branches of ?:")

    def _conditionalor(self, tree: lark.Tree[Any]) -> str:
        return self._logic(tree, "||")

    def _conditionaland(self, tree: lark.Tree[Any]) -> str:
        return self._logic(tree, "&&")

    def _logic(self, tree: lark.Tree[Any], symbol: str) -> str:
        for child in tree.children:
            _require(self.kind(child), {BOOL}, f"an operand of {symbol}")
        return BOOL

    def _relation(self, tree: lark.Tree[Any]) -> str:
        operation, right_tree = tree.children
        left, right = self.kind(operation.children[0]), self.kind(right_tree)
        if operation.data == "relation_in":
            _require(_family(right), {LIST, MAP}, "the right side of 'in'")
        elif operation.data in ("relation_eq", "relation_ne"):
            _same_type([_family(left), _family(right)], "the sides of == and !=")
        else:
            _check_ordering(left, right)
        return BOOL

    def _arithmetic(self, tree: lark.Tree[Any]) -> str:
        operation, right_tree = tree.children
        left, right = self.kind(operation.children[0]), self.kind(right_tree)
        allowed = ARITHMETIC[operation.data]
        for side in (left, right):
            _require(_family(side), allowed, "an arithmetic operand")
        if {left, right} <= {TIMESTAMP, DURATION}:
            return DYN
        _same_type([_family(left), _family(right)], "the sides of an arithmetic operator")
        # `dyn + 1` resolves to the one overload taking an int: the result is an int.
        return next((side for side in (left, right) if side != DYN), DYN)

    _addition = _multiplication = _arithmetic

    def _unary(self, tree: lark.Tree[Any]) -> str:
        operation, operand_tree = tree.children
        operand = self.kind(operand_tree)
        if operation.data == "unary_not":
            _require(operand, {BOOL}, "the operand of !")
            return BOOL
        _require(operand, {INT, DOUBLE}, "the operand of unary -")
        return operand

    def _member_dot(self, tree: lark.Tree[Any]) -> str:
        target, name = tree.children
        kind = self.kind(target)
        message = self._message(kind)
        return _field(kind, str(name)) if message is None else _message_field(message, kind, str(name))

    def _member_index(self, tree: lark.Tree[Any]) -> str:
        target, index = (self.kind(child) for child in tree.children)
        if target == LIST:
            _require(index, {INT, UINT}, "a list index")
            return DYN
        if target in _INSIDE:
            return _INSIDE[target]
        raise SelectorError(f"no matching overload for [] applied to {target}")

    def _member_object(self, tree: lark.Tree[Any]) -> str:
        """`Name{field: value, ...}`, where the environment declares message types (cel-go
        checker/checker.go checkCreateStruct): the type name must resolve, each field be one of
        its fields (any, when it declares none) and each value assignable to the field's type."""
        if self._environment.messages is None:
            raise SelectorError("message construction: Kubernetes declares no message types here")
        target, *inits = tree.children
        name = syntax.qualified_name(target)
        message = None if name is None else self._environment.messages(name)
        if name is None or message is None:
            raise SelectorError(f"undeclared reference to '{name or 'a message type'}'")
        entries = inits[0].children if inits else []
        for field_name, value in zip(entries[::2], entries[1::2], strict=True):
            wanted = _message_field(message, name, str(field_name))
            kind = self.kind(value)
            if wanted != DYN:
                _require(kind, {wanted}, f"field '{field_name}' of {name}")
        return name

    def _message(self, kind: str) -> MessageType | None:
        if self._environment.messages is None or kind in _BUILT_IN:
            return None
        return self._environment.messages(kind)

    def _member_dot_arg(self, tree: lark.Tree[Any]) -> str:
        target, name_token, *rest = tree.children
        name, arguments = str(name_token), syntax.arguments(rest)
        namespace = syntax.bare_name(target)
        roots = self._environment.roots
        if namespace is not None and namespace not in self._variables and namespace not in roots:
            return self._namespaced(namespace, name, arguments)
        if name in syntax.MACROS:
            return self._macro(name, self.kind(target), arguments)
        return self._call(name, arguments, receiver=self.kind(target))

    def _namespaced(self, namespace: str, name: str, arguments: list[Any]) -> str:
        if (namespace, name) == ("cel", "bind"):
            return self._bind(arguments)
        if namespace in NAMESPACES:
            raise UnsupportedSelector(f"{namespace}.{name}() is not supported")
        raise SelectorError(f"undeclared reference to '{namespace}'")

    def _bind(self, arguments: list[Any]) -> str:
        if len(arguments) != 3:
            raise SelectorError("cel.bind() takes a name, a value and an expression")
        variable = syntax.variable(arguments[0], "cel.bind()")
        self.kind(arguments[1])
        return self._scoped(variable, arguments[2])

    def _macro(self, name: str, target: str, arguments: list[Any]) -> str:
        if len(arguments) == 3 and name == "map" and self._environment.filtered_map:
            return self._filtered_map(target, arguments)
        if len(arguments) == 3:
            raise UnsupportedSelector(f"{name}() with three arguments is not supported")
        if len(arguments) != 2:
            raise SelectorError(f"{name}() takes a variable and an expression")
        _require(_family(target), {LIST, MAP}, f"the target of {name}()")
        body = self._scoped(syntax.variable(arguments[0], f"{name}()"), arguments[1])
        if name != "map":
            _require(body, {BOOL}, f"the predicate of {name}()")
        return syntax.MACROS[name]

    def _filtered_map(self, target: str, arguments: list[Any]) -> str:
        _require(_family(target), {LIST, MAP}, "the target of map()")
        variable = syntax.variable(arguments[0], "map()")
        _require(self._scoped(variable, arguments[1]), {BOOL}, "the filter of map()")
        self._scoped(variable, arguments[2])
        return LIST

    def _scoped(self, variable: str, body: lark.Tree[Any]) -> str:
        self._variables.append(variable)
        try:
            return self.kind(body)
        finally:
            self._variables.pop()

    def _ident_arg(self, tree: lark.Tree[Any]) -> str:
        name_token, *rest = tree.children
        name, arguments = str(name_token), syntax.arguments(rest)
        if name == "has":
            return self._has(arguments)
        if name == "dyn" and len(arguments) == 1:
            self.kind(arguments[0])
            return DYN
        return self._call(name, arguments, receiver=None)

    def _has(self, arguments: list[Any]) -> str:
        selection = syntax.selection(arguments[0]) if len(arguments) == 1 else None
        if selection is None:
            raise SelectorError("invalid argument to has() macro: it takes one field selection")
        self._member_dot(selection)
        return BOOL

    def _call(self, name: str, arguments: list[Any], receiver: str | None) -> str:
        function = None if name in self._environment.excluded else SIGNATURES.get(name)
        if function is None:
            if name in UNSUPPORTED_FUNCTIONS:
                raise UnsupportedSelector(f"{name}() is not supported")
            raise SelectorError(f"undeclared reference to '{name}'")
        method = receiver is not None
        if len(arguments) not in (function.member if method else function.free):
            style = "method" if method else "function"
            raise SelectorError(f"no matching overload for {style} {name}() with {len(arguments)} arguments")
        kinds = [self.kind(argument) for argument in arguments]
        if not method and function.member and kinds:
            receiver = kinds[0]  # size(x), matches(s, re): the first argument is the receiver
        if receiver is not None and function.receivers is not None:
            _require(receiver, function.receivers, f"the receiver of {name}()")
        if name in ("matches", "find", "findAll"):
            _check_literal_pattern(arguments[0] if method else arguments[-1])
        return function.result

    def _ident(self, tree: lark.Tree[Any]) -> str:
        name = str(tree.children[0])
        if name in self._variables:
            return DYN
        if name in self._environment.roots:
            return self._environment.roots[name]
        if name in TYPE_NAMES:
            return TYPE
        raise SelectorError(f"undeclared reference to '{name}'")

    def _dot_ident(self, tree: lark.Tree[Any]) -> str:
        raise UnsupportedSelector("leading-dot names are not supported")

    _dot_ident_arg = _dot_ident

    def _literal(self, tree: lark.Tree[Any]) -> str:
        token = cast(lark.Token, tree.children[0])
        if token.type in ("INT_LIT", "UINT_LIT"):
            _check_integer_literal(str(token), unsigned=token.type == "UINT_LIT")
        return _LITERALS[token.type]

    def _list_lit(self, tree: lark.Tree[Any]) -> str:
        elements = [self.kind(child) for child in syntax.arguments(tree.children)]
        _same_type([_family(element) for element in elements], "list literal elements")
        return LIST

    def _map_lit(self, tree: lark.Tree[Any]) -> str:
        entries = tree.children[0].children if tree.children else []
        keys = [self.kind(key) for key in entries[::2]]
        values = [_family(self.kind(value)) for value in entries[1::2]]
        for key in keys:
            _require(key, {INT, UINT, BOOL, STRING}, "a map key")
        _same_type(keys, "map literal keys")
        _same_type(values, "map literal values")
        return MAP


def _message_field(message: MessageType, type_name: str, name: str) -> str:
    if message.fields is None:
        return DYN
    if name not in message.fields:
        raise SelectorError(f"undefined field '{name}' of {type_name}")
    return message.fields[name]


def _family(kind: str) -> str:
    return MAP if kind in MAPS else kind


def _require(kind: str, allowed: Iterable[str], what: str) -> None:
    if kind != DYN and kind not in allowed:
        raise SelectorError(f"{what} cannot be {kind}")


def _same_type(kinds: Sequence[str], what: str) -> str:
    """The one type `kinds` unify to, DYN when one of them is DYN. null unifies with the types
    cel-go keeps nullable (checker/types.go internalIsAssignableNull: timestamps, durations,
    messages and opaque types such as kubernetes.Quantity), to that type."""
    distinct = set(kinds)
    if NULL in distinct and len(distinct) > 1 and not distinct & NOT_NULLABLE:
        distinct.discard(NULL)
    known = sorted(distinct - {DYN})
    if len(known) > 1:
        raise SelectorError(f"{what} must have one type, not {' and '.join(known)}")
    if len(known) == 1 and DYN not in distinct:
        return known[0]
    return DYN


def _check_ordering(left: str, right: str) -> None:
    for side in (left, right):
        _require(side, ORDERED, "a side of <, <=, >, >=")
    if left in NUMBERS and right in NUMBERS:
        return  # Kubernetes enables cross-type numeric comparisons
    _same_type([left, right], "the sides of <, <=, >, >=")


def _field(target: str, name: str) -> str:
    if target == DEVICE:
        if name not in DEVICE_FIELDS:
            raise SelectorError(f"undefined field '{name}' of device")
        return DEVICE_FIELDS[name]
    if target in _INSIDE:
        return _INSIDE[target]
    raise SelectorError(f"type {target} does not support field selection")


def _check_literal_pattern(argument: Any) -> None:
    """Kubernetes refuses a literal regular expression that does not compile."""
    pattern = syntax.descend(argument)
    if isinstance(pattern, lark.Tree) and pattern.data == "literal":
        text = Evaluator(pattern, Activation()).literal(pattern)
        if isinstance(text, celtypes.StringType) and compile_regex(text) is None:
            raise SelectorError(f"invalid regular expression {text[:40]!r}")


def _check_integer_literal(text: str, unsigned: bool) -> None:
    digits = text.rstrip("uU")
    negative = digits.startswith("-")
    digits = digits.lstrip("-")
    value = int(digits, 16) if digits[:2].lower() == "0x" else int(digits)
    value = -value if negative else value
    low, high = (0, 2 * INT64) if unsigned else (-INT64, INT64)
    if not low <= value < high:
        raise SelectorError(f"integer literal {text} is out of range")
