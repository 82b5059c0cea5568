"""Kubernetes' CEL environment for DRA device selectors, evaluated in-process with cel-python. Pure.

Kubernetes' allocator compiles each `cel.expression` of a DeviceClass or a request once and
evaluates it against every device of the ResourceSlices it considers
(staging/src/k8s.io/dynamic-resource-allocation/cel/compile.go). This module does the same for a
published Device, with the environment of compile.go as the scheduler builds it (stored
expressions, so every feature-gated declaration is present):

- `device.driver`, `device.allowMultipleAllocations`, `device.attributes[domain][name]` and
  `device.capacity[domain][name]`, with field (`.name`) and index (`['name']`) access alike.
  Attribute values are CEL ints, bools, strings and semvers; capacities are quantities.
- A domain the device lacks reads as an empty map (compile.go's default map): so
  `device.attributes['x'].y` on such a device is a missing-key error, not an error about `x`;
  `has(device.attributes.x)` is true for any domain, `'x' in device.attributes` only for one the
  device has. A missing name in a present domain is a missing-key error.
- The libraries selectors use: Kubernetes' quantity and semver libraries (with the normalising
  `semver(s, true)`), the strings extension (version 2, without `format` and `strings.quote`),
  the regex library's `find` and `findAll`, Kubernetes' list functions (`isSorted`, `sum`,
  `min`, `max`, `indexOf`, `lastIndexOf`), `cel.bind`, and DRA's own `includes`.
- What Kubernetes' type checker refuses is refused here when compiling: unknown names,
  functions and `device` fields, misuse of macros, a result that cannot be a bool, literal lists
  and maps mixing types, invalid literal regular expressions. A result typed `dyn` (an attribute)
  is accepted and checked when evaluated, as Kubernetes does.

Expressions that Kubernetes accepts but this engine cannot evaluate raise UnsupportedSelector
(a SelectorError): optional syntax (`.?name`, `optional.of`), two-variable comprehensions,
`map` with a filter, the sets, lists-extension, URL, IP, CIDR and format libraries, leading-dot
names, and nesting deeper than MAX_DEPTH. Count such a selector conservatively.

Cost. Kubernetes bounds a selector's length (resource/v1 CELSelectorExpressionMaxLength, here
MAX_EXPRESSION_BYTES) and its runtime cost (CELSelectorExpressionMaxCost, 1,000,000 units).
cel-python tracks no cost, so an evaluation here may take at most MAX_STEPS steps (one per
syntax node visited, comprehension bodies once per element) and build strings and lists of at
most MAX_VALUE_LENGTH; beyond either the outcome is UNDECIDED, never a guess. Typical selectors
take tens of steps.

Outcomes (compile.go `DeviceMatches`; structured/internal/stable/allocator_stable.go
`selectorsMatch`, `isSelectable`): a CEL runtime error on a device does not skip that device:
the allocator returns the error and the whole allocation attempt fails. So `Selector.evaluate`
tells FAILED apart from NOT_MATCHED. The allocator evaluates a class's selectors, then the
request's, in order, and stops at the first that does not match: `match_all` does the same.

Known differences, each beyond what selectors use: quantities follow webhook.quantity's bounds
(exponents up to 30, 64 characters) and `isInteger()`/`asInteger()` accept every integral value
within int64, where Kubernetes refuses some integral values it keeps in arbitrary precision;
timestamp and duration functions are cel-python's.
"""

from __future__ import annotations

import enum
import functools
import itertools
import math
import operator
import re
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any, Final, TypeVar, cast

import lark
import re2  # type: ignore[import-untyped]
from celpy import celtypes
from celpy.celparser import CELParseError, CELParser
from celpy.evaluation import Activation, CELEvalError, Evaluator, Result, base_functions
from lark.exceptions import UnexpectedToken

from webhook import quantity
from webhook.dra.published import Attribute, Device, Version

MAX_EXPRESSION_BYTES: Final = 10 * 1024  # k8s.io/api resource/v1 CELSelectorExpressionMaxLength
MAX_DEPTH: Final = 100  # levels of nested operations: evaluation stays well inside the stack
MAX_STEPS: Final = 20_000
MAX_VALUE_LENGTH: Final = 100_000
_INT64: Final = 2**63
_SHOWN: Final = 60  # characters of an expression quoted in a message


class SelectorError(ValueError):
    """A selector that does not compile; the one-line message quotes it and says why."""


class UnsupportedSelector(SelectorError):
    """A selector Kubernetes may accept that this engine cannot evaluate."""


class Outcome(enum.Enum):
    MATCHED = "matched"
    NOT_MATCHED = "not matched"
    # A CEL runtime error: Kubernetes' allocator fails the whole allocation attempt when it
    # evaluates this selector on this device, whatever other devices would give.
    FAILED = "failed"
    # Beyond this engine's evaluation limits: Kubernetes may decide either way.
    UNDECIDED = "undecided"


@dataclass(frozen=True)
class Match:
    outcome: Outcome
    reason: str = ""  # why it FAILED or is UNDECIDED

    @property
    def matched(self) -> bool:
        return self.outcome is Outcome.MATCHED


MATCHED: Final = Match(Outcome.MATCHED)
NOT_MATCHED: Final = Match(Outcome.NOT_MATCHED)


@dataclass(frozen=True)
class Selector:
    """One compiled selector, immutable and shared: evaluate it on any number of devices."""

    expression: str
    _tree: lark.Tree[Any] = field(repr=False, compare=False)
    _literals: Mapping[int, Any] = field(repr=False, compare=False)

    def evaluate(self, device: Device) -> Match:
        """What Kubernetes' allocator makes of this selector on this device.

        MATCHED or NOT_MATCHED; FAILED for a CEL runtime error (a missing attribute, a type
        mismatch, a result that is not a bool, an unparsable version attribute of the device),
        which makes the allocator fail the whole allocation attempt rather than skip the device;
        UNDECIDED beyond MAX_STEPS or MAX_VALUE_LENGTH."""
        try:
            variables = {"device": _device_value(device)}
        except _DeviceError as e:
            return Match(Outcome.FAILED, str(e))
        try:
            return _verdict(_Interpreter(self._literals, variables, _Budget()).visit(self._tree))
        except _BeyondLimits as e:
            return Match(Outcome.UNDECIDED, str(e))
        except RecursionError:
            return Match(Outcome.UNDECIDED, "nested too deeply to evaluate here")
        except CELEvalError as e:
            return Match(Outcome.FAILED, _describe(e))
        except Exception as e:  # an engine defect must not take the request down with it
            return Match(Outcome.UNDECIDED, f"evaluation failed inside the engine: {type(e).__name__}")

    def matches(self, device: Device) -> bool:
        """True only when MATCHED: a FAILED or UNDECIDED device is not known to match."""
        return self.evaluate(device).matched


def match_all(selectors: Iterable[Selector], device: Device) -> Match:
    """Selectors in the allocator's order (the class's, then the request's): the first that does
    not match decides; a later selector is not evaluated (allocator_stable.go `selectorsMatch`)."""
    for selector in selectors:
        match = selector.evaluate(device)
        if not match.matched:
            return match
    return MATCHED


def compile_selector(expression: str) -> Selector:
    """The compiled selector, memoised; raises SelectorError (or UnsupportedSelector)."""
    if not isinstance(expression, str):
        raise SelectorError(f"a CEL selector must be a string, not {type(expression).__name__}")
    compiled = _compiled(expression)
    if isinstance(compiled, _Refusal):
        raise compiled.kind(compiled.message)
    return compiled


@dataclass(frozen=True)
class _Refusal:
    """A compile error, memoised as data: raising one stored exception again would keep
    growing its traceback."""

    kind: type[SelectorError]
    message: str


@functools.lru_cache(maxsize=1024)
def _compiled(expression: str) -> Selector | _Refusal:
    try:
        tree = _checked_tree(expression)
        return Selector(expression, tree, _literal_values(tree))
    except SelectorError as e:
        return _Refusal(type(e), f"CEL selector {_shown(expression)}: {e}")


def _checked_tree(expression: str) -> lark.Tree[Any]:
    size = len(expression.encode("utf-8", "surrogatepass"))
    if size > MAX_EXPRESSION_BYTES:
        raise SelectorError(f"too long: {size} bytes, the limit is {MAX_EXPRESSION_BYTES}")
    tree = _simplified(_parsed(expression))
    if _depth(tree) > MAX_DEPTH:
        raise UnsupportedSelector(f"nested more than {MAX_DEPTH} levels deep")
    try:
        result = _Checker().kind(tree)
    except RecursionError as e:
        raise UnsupportedSelector("nested too deeply to check here") from e
    if result not in (_BOOL, _DYN):
        raise SelectorError(f"must evaluate to bool, not {result}")
    return tree


def _shown(expression: str) -> str:
    line = " ".join(expression.split())
    return repr(line if len(line) <= _SHOWN else line[:_SHOWN] + "...")


# --- parsing -------------------------------------------------------------------------------

_PARSER: Final = CELParser()
# String literals and comments, so that optional syntax is looked for only in code.
_NOT_CODE: Final = re.compile(
    r"""[rRbB]{0,2}(?:\"\"\"[\s\S]*?\"\"\"|'''[\s\S]*?'''|"(?:\\.|[^"\\\n])*"|'(?:\\.|[^'\\\n])*')"""
    r"""|//[^\n]*"""
)
_OPTIONAL_SYNTAX: Final = re.compile(r"\.\s*\?|\[\s*\?|\{\s*\?|,\s*\?")


def _parsed(expression: str) -> lark.Tree[Any]:
    try:
        return _PARSER.parse(expression)
    except CELParseError as e:
        if _OPTIONAL_SYNTAX.search(_NOT_CODE.sub('""', expression)):
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


def _simplified(tree: lark.Tree[Any]) -> lark.Tree[Any]:
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


def _depth(tree: lark.Tree[Any]) -> int:
    deepest, stack = 0, [(tree, 1)]
    while stack:
        node, depth = stack.pop()
        deepest = max(deepest, depth)
        stack.extend((child, depth + 1) for child in node.children if isinstance(child, lark.Tree))
    return deepest


# --- the static check: what Kubernetes' type checker refuses -------------------------------

# Types as Kubernetes' messages name them; the device's own maps keep their declared shapes.
_BOOL, _INT, _UINT, _DOUBLE, _STRING, _BYTES = "bool", "int", "uint", "double", "string", "bytes"
_NULL, _LIST, _MAP, _TYPE, _DYN = "null_type", "list", "map", "type", "dyn"
_QUANTITY, _SEMVER = "kubernetes.Quantity", "kubernetes.Semver"
_TIMESTAMP, _DURATION = "google.protobuf.Timestamp", "google.protobuf.Duration"
_DEVICE = "kubernetes.DRADevice"
_ATTRIBUTES = "map(string, map(string, dyn))"
_ATTRIBUTE_DOMAIN = "map(string, dyn)"
_CAPACITY = "map(string, map(string, kubernetes.Quantity))"
_CAPACITY_DOMAIN = "map(string, kubernetes.Quantity)"
_MAPS: Final = frozenset({_MAP, _ATTRIBUTES, _ATTRIBUTE_DOMAIN, _CAPACITY, _CAPACITY_DOMAIN})
_NUMBERS: Final = frozenset({_INT, _UINT, _DOUBLE})
_ORDERED: Final = _NUMBERS | {_STRING, _BYTES, _BOOL, _TIMESTAMP, _DURATION}
_DEVICE_FIELDS: Final = {
    "driver": _STRING,
    "allowMultipleAllocations": _BOOL,
    "attributes": _ATTRIBUTES,
    "capacity": _CAPACITY,
}
# What selecting a field or an index of the device's maps gives.
_INSIDE: Final = {
    _ATTRIBUTES: _ATTRIBUTE_DOMAIN,
    _ATTRIBUTE_DOMAIN: _DYN,
    _CAPACITY: _CAPACITY_DOMAIN,
    _CAPACITY_DOMAIN: _QUANTITY,
    _MAP: _DYN,
    _DYN: _DYN,
}
_LITERALS: Final = {
    "INT_LIT": _INT,
    "UINT_LIT": _UINT,
    "FLOAT_LIT": _DOUBLE,
    "STRING_LIT": _STRING,
    "MLSTRING_LIT": _STRING,
    "BYTES_LIT": _BYTES,
    "BOOL_LIT": _BOOL,
    "NULL_LIT": _NULL,
}
_TYPE_NAMES: Final = frozenset(
    (
        "int",
        "uint",
        "double",
        "bool",
        "string",
        "bytes",
        "list",
        "map",
        "null_type",
        "type",
    )
)
_MACROS: Final = {"all": _BOOL, "exists": _BOOL, "exists_one": _BOOL, "map": _LIST, "filter": _LIST}
_ARITHMETIC: Final = {
    "addition_add": _NUMBERS | {_STRING, _BYTES, _LIST, _TIMESTAMP, _DURATION},
    "addition_sub": _NUMBERS | {_TIMESTAMP, _DURATION},
    "multiplication_mul": _NUMBERS,
    "multiplication_div": _NUMBERS,
    "multiplication_mod": frozenset({_INT, _UINT}),
}


@dataclass(frozen=True)
class _Function:
    """A function's overloads, as far as compiling needs them."""

    result: str
    member: frozenset[int] = frozenset()  # argument counts after the receiver, if a method
    free: frozenset[int] = frozenset()  # argument counts, if a plain function
    receivers: frozenset[str] | None = None  # None: any receiver


def _method(result: str, receivers: Iterable[str] | None, *counts: int) -> _Function:
    accepted = None if receivers is None else frozenset(receivers)
    return _Function(result, member=frozenset(counts), receivers=accepted)


def _free(result: str, *counts: int) -> _Function:
    return _Function(result, free=frozenset(counts))


_TIME_GETTERS: Final = (
    "getDate",
    "getDayOfMonth",
    "getDayOfWeek",
    "getDayOfYear",
    "getFullYear",
    "getMonth",
    "getHours",
    "getMinutes",
    "getSeconds",
    "getMilliseconds",
)
_TEXT = (_STRING,)
_SEQUENCE = (_LIST,)
_SIZED = (_STRING, _BYTES, _LIST, *_MAPS)
_COMPARABLE = (_QUANTITY, _SEMVER)
_TIME = (_TIMESTAMP, _DURATION)
_SIGNATURES: Final[Mapping[str, _Function]] = {
    "size": _Function(_INT, member=frozenset({0}), free=frozenset({1}), receivers=frozenset(_SIZED)),
    "contains": _method(_BOOL, _TEXT, 1),
    "startsWith": _method(_BOOL, _TEXT, 1),
    "endsWith": _method(_BOOL, _TEXT, 1),
    "matches": _Function(_BOOL, member=frozenset({1}), free=frozenset({2}), receivers=frozenset(_TEXT)),
    "find": _method(_STRING, _TEXT, 1),
    "findAll": _method(_LIST, _TEXT, 1, 2),
    "charAt": _method(_STRING, _TEXT, 1),
    "indexOf": _method(_INT, (_STRING, _LIST), 1, 2),
    "lastIndexOf": _method(_INT, (_STRING, _LIST), 1, 2),
    "lowerAscii": _method(_STRING, _TEXT, 0),
    "upperAscii": _method(_STRING, _TEXT, 0),
    "trim": _method(_STRING, _TEXT, 0),
    "replace": _method(_STRING, _TEXT, 2, 3),
    "split": _method(_LIST, _TEXT, 1, 2),
    "substring": _method(_STRING, _TEXT, 1, 2),
    "join": _method(_STRING, _SEQUENCE, 0, 1),
    "isSorted": _method(_BOOL, _SEQUENCE, 0),
    "sum": _method(_DYN, _SEQUENCE, 0),
    "min": _method(_DYN, _SEQUENCE, 0),
    "max": _method(_DYN, _SEQUENCE, 0),
    "includes": _method(_BOOL, None, 1),
    "quantity": _free(_QUANTITY, 1),
    "isQuantity": _free(_BOOL, 1),
    "sign": _free(_INT, 1),
    "semver": _free(_SEMVER, 1, 2),
    "isSemver": _free(_BOOL, 1, 2),
    "compareTo": _method(_INT, _COMPARABLE, 1),
    "isGreaterThan": _method(_BOOL, _COMPARABLE, 1),
    "isLessThan": _method(_BOOL, _COMPARABLE, 1),
    "asInteger": _method(_INT, (_QUANTITY,), 0),
    "asApproximateFloat": _method(_DOUBLE, (_QUANTITY,), 0),
    "isInteger": _method(_BOOL, (_QUANTITY,), 0),
    "add": _method(_QUANTITY, (_QUANTITY,), 1),
    "sub": _method(_QUANTITY, (_QUANTITY,), 1),
    "major": _method(_INT, (_SEMVER,), 0),
    "minor": _method(_INT, (_SEMVER,), 0),
    "patch": _method(_INT, (_SEMVER,), 0),
    "int": _free(_INT, 1),
    "uint": _free(_UINT, 1),
    "double": _free(_DOUBLE, 1),
    "string": _free(_STRING, 1),
    "bool": _free(_BOOL, 1),
    "bytes": _free(_BYTES, 1),
    "type": _free(_TYPE, 1),
    "duration": _free(_DURATION, 1),
    "timestamp": _free(_TIMESTAMP, 1),
    **{name: _method(_INT, _TIME, 0, 1) for name in _TIME_GETTERS},
}
# Declared in Kubernetes' base environment but not evaluated here.
_UNSUPPORTED_FUNCTIONS: Final = frozenset(
    (
        # the strings and lists extensions, optional values
        "format",
        "quote",
        "reverse",
        "slice",
        "flatten",
        "distinct",
        "sort",
        "sortBy",
        "first",
        "last",
        "range",
        "hasValue",
        "value",
        "orValue",
        "or",
        # the URL, IP and CIDR libraries
        "url",
        "isURL",
        "getScheme",
        "getHost",
        "getHostname",
        "getPort",
        "getEscapedPath",
        "getQuery",
        "ip",
        "isIP",
        "cidr",
        "isCIDR",
        "family",
        "isUnspecified",
        "isLoopback",
        "isLinkLocalMulticast",
        "isLinkLocalUnicast",
        "isGlobalUnicast",
        "masked",
        "prefixLength",
        "containsIP",
        "containsCIDR",
        "isCanonical",
        # two-variable comprehensions
        "existsOne",
        "transformList",
        "transformMap",
        "transformMapEntry",
    )
)
_NAMESPACES: Final = frozenset({"optional", "sets", "lists", "strings", "math", "format", "cel"})


class _Checker:
    """Infers each node's type the way Kubernetes' type checker would, as far as deciding
    whether a selector compiles needs: an attribute's value is `dyn`, checked when evaluated.
    It reads simplified trees: no one-child pass-through nodes."""

    def __init__(self) -> None:
        self._variables: list[str] = []

    def kind(self, tree: lark.Tree[Any]) -> str:
        check = getattr(self, "_" + str(tree.data), None)
        if check is None:
            raise SelectorError(f"unexpected syntax {tree.data!s}")
        return cast(str, check(tree))

    def _expr(self, tree: lark.Tree[Any]) -> str:
        condition, *branches = (self.kind(child) for child in tree.children)
        _require(condition, {_BOOL}, "the condition of ?:")
        return _same_type(branches, "the branches of ?:")

    def _conditionalor(self, tree: lark.Tree[Any]) -> str:
        return self._logic(tree, "||")

    def _conditionaland(self, tree: lark.Tree[Any]) -> str:
        return self._logic(tree, "&&")

    def _logic(self, tree: lark.Tree[Any], symbol: str) -> str:
        for child in tree.children:
            _require(self.kind(child), {_BOOL}, f"an operand of {symbol}")
        return _BOOL

    def _relation(self, tree: lark.Tree[Any]) -> str:
        operation, right_tree = tree.children
        left, right = self.kind(operation.children[0]), self.kind(right_tree)
        if operation.data == "relation_in":
            _require(_family(right), {_LIST, _MAP}, "the right side of 'in'")
        elif operation.data in ("relation_eq", "relation_ne"):
            _same_type([_family(left), _family(right)], "the sides of == and !=")
        else:
            _check_ordering(left, right)
        return _BOOL

    def _arithmetic(self, tree: lark.Tree[Any]) -> str:
        operation, right_tree = tree.children
        left, right = self.kind(operation.children[0]), self.kind(right_tree)
        allowed = _ARITHMETIC[operation.data]
        for side in (left, right):
            _require(_family(side), allowed, "an arithmetic operand")
        if {left, right} <= {_TIMESTAMP, _DURATION}:
            return _DYN
        _same_type([_family(left), _family(right)], "the sides of an arithmetic operator")
        # `dyn + 1` resolves to the one overload taking an int: the result is an int.
        return next((side for side in (left, right) if side != _DYN), _DYN)

    _addition = _multiplication = _arithmetic

    def _unary(self, tree: lark.Tree[Any]) -> str:
        operation, operand_tree = tree.children
        operand = self.kind(operand_tree)
        if operation.data == "unary_not":
            _require(operand, {_BOOL}, "the operand of !")
            return _BOOL
        _require(operand, {_INT, _DOUBLE}, "the operand of unary -")
        return operand

    def _member_dot(self, tree: lark.Tree[Any]) -> str:
        target, name = tree.children
        return _field(self.kind(target), str(name))

    def _member_index(self, tree: lark.Tree[Any]) -> str:
        target, index = (self.kind(child) for child in tree.children)
        if target == _LIST:
            _require(index, {_INT, _UINT}, "a list index")
            return _DYN
        if target in _INSIDE:
            return _INSIDE[target]
        raise SelectorError(f"no matching overload for [] applied to {target}")

    def _member_object(self, tree: lark.Tree[Any]) -> str:
        raise SelectorError("message construction: Kubernetes declares no message types for selectors")

    def _member_dot_arg(self, tree: lark.Tree[Any]) -> str:
        target, name_token, *rest = tree.children
        name, arguments = str(name_token), _arguments(rest)
        namespace = _bare_name(target)
        if namespace is not None and namespace not in self._variables and namespace != "device":
            return self._namespaced(namespace, name, arguments)
        if name in _MACROS:
            return self._macro(name, self.kind(target), arguments)
        return self._call(name, arguments, receiver=self.kind(target))

    def _namespaced(self, namespace: str, name: str, arguments: list[Any]) -> str:
        if (namespace, name) == ("cel", "bind"):
            return self._bind(arguments)
        if namespace in _NAMESPACES:
            raise UnsupportedSelector(f"{namespace}.{name}() is not supported")
        raise SelectorError(f"undeclared reference to '{namespace}'")

    def _bind(self, arguments: list[Any]) -> str:
        if len(arguments) != 3:
            raise SelectorError("cel.bind() takes a name, a value and an expression")
        variable = _variable(arguments[0], "cel.bind()")
        self.kind(arguments[1])
        return self._scoped(variable, arguments[2])

    def _macro(self, name: str, target: str, arguments: list[Any]) -> str:
        if len(arguments) == 3:
            raise UnsupportedSelector(f"{name}() with three arguments is not supported")
        if len(arguments) != 2:
            raise SelectorError(f"{name}() takes a variable and an expression")
        _require(_family(target), {_LIST, _MAP}, f"the target of {name}()")
        body = self._scoped(_variable(arguments[0], f"{name}()"), arguments[1])
        if name != "map":
            _require(body, {_BOOL}, f"the predicate of {name}()")
        return _MACROS[name]

    def _scoped(self, variable: str, body: lark.Tree[Any]) -> str:
        self._variables.append(variable)
        try:
            return self.kind(body)
        finally:
            self._variables.pop()

    def _ident_arg(self, tree: lark.Tree[Any]) -> str:
        name_token, *rest = tree.children
        name, arguments = str(name_token), _arguments(rest)
        if name == "has":
            return self._has(arguments)
        if name == "dyn" and len(arguments) == 1:
            self.kind(arguments[0])
            return _DYN
        return self._call(name, arguments, receiver=None)

    def _has(self, arguments: list[Any]) -> str:
        selection = _selection(arguments[0]) if len(arguments) == 1 else None
        if selection is None:
            raise SelectorError("invalid argument to has() macro: it takes one field selection")
        self._member_dot(selection)
        return _BOOL

    def _call(self, name: str, arguments: list[Any], receiver: str | None) -> str:
        function = _SIGNATURES.get(name)
        if function is None:
            if name in _UNSUPPORTED_FUNCTIONS:
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
            return _DYN
        if name == "device":
            return _DEVICE
        if name in _TYPE_NAMES:
            return _TYPE
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
        elements = [self.kind(child) for child in _arguments(tree.children)]
        _same_type([_family(element) for element in elements], "list literal elements")
        return _LIST

    def _map_lit(self, tree: lark.Tree[Any]) -> str:
        entries = tree.children[0].children if tree.children else []
        keys = [self.kind(key) for key in entries[::2]]
        values = [_family(self.kind(value)) for value in entries[1::2]]
        for key in keys:
            _require(key, {_INT, _UINT, _BOOL, _STRING}, "a map key")
        _same_type(keys, "map literal keys")
        _same_type(values, "map literal values")
        return _MAP


def _family(kind: str) -> str:
    return _MAP if kind in _MAPS else kind


def _require(kind: str, allowed: Iterable[str], what: str) -> None:
    if kind != _DYN and kind not in allowed:
        raise SelectorError(f"{what} cannot be {kind}")


def _same_type(kinds: Sequence[str], what: str) -> str:
    known = sorted({kind for kind in kinds if kind != _DYN})
    if len(known) > 1:
        raise SelectorError(f"{what} must have one type, not {' and '.join(known)}")
    if len(known) == 1 and len(known) == len(set(kinds)):
        return known[0]
    return _DYN


def _check_ordering(left: str, right: str) -> None:
    for side in (left, right):
        _require(side, _ORDERED, "a side of <, <=, >, >=")
    if left in _NUMBERS and right in _NUMBERS:
        return  # Kubernetes enables cross-type numeric comparisons
    _same_type([left, right], "the sides of <, <=, >, >=")


def _field(target: str, name: str) -> str:
    if target == _DEVICE:
        if name not in _DEVICE_FIELDS:
            raise SelectorError(f"undefined field '{name}' of device")
        return _DEVICE_FIELDS[name]
    if target in _INSIDE:
        return _INSIDE[target]
    raise SelectorError(f"type {target} does not support field selection")


def _arguments(rest: Sequence[Any]) -> list[Any]:
    return list(rest[0].children) if rest else []


def _descend(tree: Any) -> Any:
    """The node a chain of single-child nodes (expr -> ... -> primary) comes down to."""
    while isinstance(tree, lark.Tree) and len(tree.children) == 1 and isinstance(tree.children[0], lark.Tree):
        if tree.data in ("list_lit", "map_lit", "ident_arg", "member_object"):
            break
        tree = tree.children[0]
    return tree


def _bare_name(tree: Any) -> str | None:
    node = _descend(tree)
    if isinstance(node, lark.Tree) and node.data == "ident":
        return str(node.children[0])
    return None


def _variable(tree: Any, where: str) -> str:
    name = _bare_name(tree)
    if name is None:
        raise SelectorError(f"the variable of {where} must be a simple name")
    return name


def _selection(tree: Any) -> lark.Tree[Any] | None:
    node = _descend(tree)
    if isinstance(node, lark.Tree) and node.data == "member_dot":
        return node
    return None


def _check_literal_pattern(argument: Any) -> None:
    """Kubernetes refuses a literal regular expression that does not compile."""
    pattern = _descend(argument)
    if isinstance(pattern, lark.Tree) and pattern.data == "literal":
        text = Evaluator(pattern, Activation()).literal(pattern)
        if isinstance(text, celtypes.StringType) and _regex(text) is None:
            raise SelectorError(f"invalid regular expression {text[:40]!r}")


def _check_integer_literal(text: str, unsigned: bool) -> None:
    digits = text.rstrip("uU")
    negative = digits.startswith("-")
    digits = digits.lstrip("-")
    value = int(digits, 16) if digits[:2].lower() == "0x" else int(digits)
    value = -value if negative else value
    low, high = (0, 2 * _INT64) if unsigned else (-_INT64, _INT64)
    if not low <= value < high:
        raise SelectorError(f"integer literal {text} is out of range")


# --- values --------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Quantity:
    """A Kubernetes quantity (apiserver pkg/cel/quantity.go): its exact value."""

    value: Fraction


@dataclass(frozen=True)
class _Semver:
    """A semantic version (apiserver pkg/cel/semver.go, github.com/blang/semver/v4)."""

    major: int
    minor: int
    patch: int
    pre: tuple[int | str, ...]

    def compare(self, other: _Semver) -> int:
        core = _sign((self.major, self.minor, self.patch), (other.major, other.minor, other.patch))
        if core or self.pre == other.pre:
            return core
        if not self.pre or not other.pre:
            return 1 if not self.pre else -1  # a release ranks above its pre-releases
        for mine, theirs in zip(self.pre, other.pre, strict=False):
            if mine != theirs:
                return _pre_order(mine, theirs)
        return _sign(len(self.pre), len(other.pre))


def _pre_order(mine: int | str, theirs: int | str) -> int:
    if isinstance(mine, int) != isinstance(theirs, int):
        return -1 if isinstance(mine, int) else 1  # numeric identifiers rank below alphanumeric ones
    return _sign(mine, theirs)


def _sign(a: Any, b: Any) -> int:
    return int(a > b) - int(a < b)


class _Domains(celtypes.MapType):
    """`device.attributes` and `device.capacity`: an unknown domain is an empty map
    (compile.go `newStringInterfaceMapWithDefault`); membership and iteration see only the
    domains the device has."""

    def __getitem__(self, key: Any) -> Any:
        if not isinstance(key, str):
            raise TypeError(f"no such overload: map(string, ...) indexed by {_kind(key)}")
        return super().get(key) if key in self else _NO_NAMES


_NO_NAMES: Final = celtypes.MapType()


class _DeviceError(ValueError):
    pass


def _device_value(device: Device) -> celtypes.MapType:
    return _filled(
        celtypes.MapType(),
        {
            "driver": celtypes.StringType(device.driver),
            "allowMultipleAllocations": celtypes.BoolType(device.allow_multiple_allocations),
            "attributes": _domains(device.attributes, _attribute_value),
            "capacity": _domains(device.capacity, lambda _, value: _Quantity(value)),
        },
    )


def _domains(by_domain: Mapping[str, Mapping[str, Any]], convert: Callable[[str, Any], Any]) -> _Domains:
    entries = {
        domain: _filled(
            celtypes.MapType(), {name: convert(f"{domain}/{name}", value) for name, value in names.items()}
        )
        for domain, names in by_domain.items()
    }
    return _filled(_Domains(), entries)


_Map = TypeVar("_Map", bound=celtypes.MapType)


def _filled(empty: _Map, entries: Mapping[str, Any]) -> _Map:
    """A cel-python map without its constructor's per-entry checks; keys stay plain strings."""
    dict.update(empty, entries)
    return empty


def _attribute_value(name: str, value: Attribute) -> Any:
    """compile.go `getAttributeValue`: a version that does not parse fails every selector on
    the device, before any expression runs."""
    if isinstance(value, bool):
        return celtypes.BoolType(value)
    if isinstance(value, int):
        if not -_INT64 <= value < _INT64:
            raise _DeviceError(f"attribute {name}: {value} is out of the int64 range")
        return celtypes.IntType(value)
    if isinstance(value, Version):
        try:
            return _parse_semver(value.text)
        except _NotSemver as e:
            raise _DeviceError(f"attribute {name}: parse semantic version: {e}") from e
    return celtypes.StringType(value)


_ALPHANUMERIC: Final = re.compile(r"[0-9A-Za-z-]+")


class _NotSemver(ValueError):
    pass


@functools.lru_cache(maxsize=1024)
def _parse_semver(text: str) -> _Semver:
    """blang/semver `Parse`: strict semantic versions 2.0.0; raises _NotSemver."""
    parts = text.split(".", 2)
    if len(parts) != 3:
        raise _NotSemver(f"{text!r} has no major.minor.patch")
    rest, plus, build = parts[2].partition("+")
    patch, dash, pre = rest.partition("-")
    if plus and not all(_ALPHANUMERIC.fullmatch(part) for part in build.split(".")):
        raise _NotSemver(f"invalid build metadata in {text!r}")
    major, minor, patch_number = (_version_number(part) for part in (parts[0], parts[1], patch))
    identifiers = tuple(_pre_identifier(part) for part in pre.split(".")) if dash else ()
    return _Semver(major, minor, patch_number, identifiers)


def _version_number(part: str) -> int:
    if not part.isascii() or not part.isdigit():
        raise _NotSemver(f"invalid number {part!r}")
    if len(part) > 1 and part.startswith("0"):
        raise _NotSemver(f"number {part!r} has a leading zero")
    if int(part) >= 2 * _INT64:
        raise _NotSemver(f"number {part!r} is out of range")
    return int(part)


def _pre_identifier(part: str) -> int | str:
    if part.isascii() and part.isdigit():
        return _version_number(part)
    if not _ALPHANUMERIC.fullmatch(part):
        raise _NotSemver(f"invalid pre-release {part!r}")
    return part


def _normalized_semver(text: str) -> _Semver:
    """Kubernetes' `semver(s, true)` (semverlib.go `normalizeAndParse`): no leading "v", no
    leading zeros, missing minor and patch numbers filled in with 0."""
    parts = [_without_leading_zeros(part) for part in text.removeprefix("v").split(".", 2)]
    if len(parts) < 3:
        if any(sign in parts[-1] for sign in "+-"):
            raise _NotSemver("short version cannot contain PreRelease/Build meta data")
        parts += ["0"] * (3 - len(parts))
    return _parse_semver(".".join(parts))


def _without_leading_zeros(part: str) -> str:
    if len(part) <= 1:
        return part
    stripped = part.lstrip("0")
    return stripped if stripped[:1].isdigit() else "0" + stripped


def _parse_quantity(text: str) -> Fraction:
    """apimachinery `ParseQuantity`: exact, with a non-zero value's magnitude rounded up to a
    whole nano, and a binary-suffixed one capped at the int64 maximum."""
    if text != text.strip():
        raise quantity.QuantityError(f"{text!r} is not a valid quantity")
    value = quantity.parse(text)
    magnitude = abs(value)
    if (magnitude * 10**9).denominator != 1:
        magnitude = Fraction(math.ceil(magnitude * 10**9), 10**9)
    if text.endswith("i"):
        magnitude = min(magnitude, Fraction(_INT64 - 1))
    return magnitude if value >= 0 else -magnitude


# --- the evaluator -------------------------------------------------------------------------


class _BeyondLimits(Exception):
    """Raised, not returned, so that no CEL error handling absorbs it."""


class _Budget:
    __slots__ = ("left",)

    def __init__(self) -> None:
        self.left = MAX_STEPS

    def spend(self) -> None:
        self.left -= 1
        if self.left < 0:
            raise _BeyondLimits(f"more than {MAX_STEPS} evaluation steps")


class _Interpreter:
    """Evaluates cel-python's parse tree on cel-python's values, with cel-go's semantics: `&&`
    and `||` stop at a decisive operand and absorb errors on either side, macros absorb errors
    as cel-go's comprehensions do, `has()` tests only the last field, and `cel.bind` binds a
    name. (cel-python's own interpreter spends microseconds per node on runtime type casts.)"""

    def __init__(self, literals: Mapping[int, Any], variables: Mapping[str, Any], budget: _Budget) -> None:
        self._literals = literals
        self._variables = variables
        self._budget = budget

    def visit(self, tree: lark.Tree[Any]) -> Result:
        self._budget.spend()
        return _NODES[tree.data](self, tree)

    def expr(self, tree: lark.Tree[Any]) -> Result:
        condition = self.visit(tree.children[0])
        if isinstance(condition, CELEvalError):
            return condition
        if not isinstance(condition, celtypes.BoolType):
            return _error(f"no such overload: {_kind(condition)} as the condition of ?:")
        return self.visit(tree.children[1] if condition else tree.children[2])

    def either(self, tree: lark.Tree[Any]) -> Result:
        return self._logic(tree, decisive=True)

    def both(self, tree: lark.Tree[Any]) -> Result:
        return self._logic(tree, decisive=False)

    def _logic(self, tree: lark.Tree[Any], decisive: bool) -> Result:
        return _decide((self.visit(child) for child in tree.children), decisive, "||" if decisive else "&&")

    def operator(self, tree: lark.Tree[Any]) -> Result:
        """relation, addition, multiplication: `[operation([left]), right]`."""
        operation, right = tree.children
        left_value = self.visit(operation.children[0])
        name = _OPERATORS[operation.data]
        return _apply(_TABLE[name], (left_value, self.visit(right)), name)

    def unary(self, tree: lark.Tree[Any]) -> Result:
        operation, operand = tree.children
        name = "!_" if operation.data == "unary_not" else "-_"
        return _apply(_TABLE[name], (self.visit(operand),), name)

    def member_dot(self, tree: lark.Tree[Any]) -> Result:
        target = self.visit(tree.children[0])
        name = str(tree.children[1])
        if isinstance(target, CELEvalError):
            return target
        if not isinstance(target, dict):
            return _error(f"no such overload: field selection on {_kind(target)}")
        try:
            return cast(Result, target[name])
        except KeyError:
            return _error(f"no such key: {name}")

    def member_index(self, tree: lark.Tree[Any]) -> Result:
        return _apply(_index, (self.visit(tree.children[0]), self.visit(tree.children[1])), "_[_]")

    def member_dot_arg(self, tree: lark.Tree[Any]) -> Result:
        target, name_token, *rest = tree.children
        name, arguments = str(name_token), _arguments(rest)
        if name == "bind" and _bare_name(target) == "cel":
            variable, value, body = arguments
            return self._bound(body, _variable(variable, "cel.bind()"), self.visit(value))
        if name in _MACROS:
            return self._comprehension(name, target, arguments)
        return self._call(name, [target, *arguments])

    def ident_arg(self, tree: lark.Tree[Any]) -> Result:
        name_token, *rest = tree.children
        name, arguments = str(name_token), _arguments(rest)
        if name == "has":
            return self._has(cast("lark.Tree[Any]", _selection(arguments[0])))
        if name == "dyn":
            return self.visit(arguments[0])
        return self._call(name, arguments)

    def ident(self, tree: lark.Tree[Any]) -> Result:
        name = str(tree.children[0])
        if name in self._variables:
            return cast(Result, self._variables[name])
        if name in _TYPE_NAMES:
            return cast(Result, base_functions[name])  # cel-python's types, which type() returns
        return _error(f"undeclared reference to '{name}'")

    def literal(self, tree: lark.Tree[Any]) -> Result:
        return cast(Result, self._literals[id(tree)])

    def list_lit(self, tree: lark.Tree[Any]) -> Result:
        elements = [self.visit(child) for child in _arguments(tree.children)]
        failed = _first_error(elements)
        return failed if failed is not None else celtypes.ListType(cast(list[Any], elements))

    def map_lit(self, tree: lark.Tree[Any]) -> Result:
        entries = [self.visit(child) for child in (tree.children[0].children if tree.children else [])]
        failed = _first_error(entries)
        if failed is not None:
            return failed
        try:
            return celtypes.MapType(list(zip(entries[::2], entries[1::2], strict=True)))
        except (ValueError, TypeError) as e:
            return _error(f"invalid map literal: {e}")

    def refused(self, tree: lark.Tree[Any]) -> Result:
        return _error(f"unsupported syntax {tree.data!s}")  # the checker refuses these first

    def _call(self, name: str, arguments: list[Any]) -> Result:
        values = [self.visit(argument) for argument in arguments]
        failed = _first_error(values)
        return failed if failed is not None else _apply(_TABLE[name], values, name)

    def _has(self, selection: lark.Tree[Any]) -> Result:
        target = self.visit(selection.children[0])
        if isinstance(target, CELEvalError):
            return target
        if not isinstance(target, dict):
            return _error(f"no such overload: has() on {_kind(target)}")
        return celtypes.BoolType(isinstance(target, _Domains) or str(selection.children[1]) in target)

    def _bound(self, body: lark.Tree[Any], variable: str, value: Result) -> Result:
        variables = {**self._variables, variable: value}
        return _Interpreter(self._literals, variables, self._budget).visit(body)

    def _comprehension(self, name: str, target: lark.Tree[Any], arguments: list[Any]) -> Result:
        collection = self.visit(target)
        if isinstance(collection, CELEvalError):
            return collection
        if not isinstance(collection, (list, dict)):
            return _error(f"no such overload: {name}() on {_kind(collection)}")
        variable, body = _variable(arguments[0], f"{name}()"), arguments[1]
        results = ((item, self._bound(body, variable, item)) for item in list(collection))
        return _COMPREHENSIONS[name](results)


_NODES: Final[Mapping[str, Callable[[_Interpreter, lark.Tree[Any]], Result]]] = {
    "expr": _Interpreter.expr,
    "conditionalor": _Interpreter.either,
    "conditionaland": _Interpreter.both,
    "relation": _Interpreter.operator,
    "addition": _Interpreter.operator,
    "multiplication": _Interpreter.operator,
    "unary": _Interpreter.unary,
    "member_dot": _Interpreter.member_dot,
    "member_index": _Interpreter.member_index,
    "member_dot_arg": _Interpreter.member_dot_arg,
    "ident_arg": _Interpreter.ident_arg,
    "ident": _Interpreter.ident,
    "literal": _Interpreter.literal,
    "list_lit": _Interpreter.list_lit,
    "map_lit": _Interpreter.map_lit,
    "member_object": _Interpreter.refused,
    "dot_ident": _Interpreter.refused,
    "dot_ident_arg": _Interpreter.refused,
}
_OPERATORS: Final = {
    "relation_lt": "_<_",
    "relation_le": "_<=_",
    "relation_gt": "_>_",
    "relation_ge": "_>=_",
    "relation_eq": "_==_",
    "relation_ne": "_!=_",
    "relation_in": "_in_",
    "addition_add": "_+_",
    "addition_sub": "_-_",
    "multiplication_mul": "_*_",
    "multiplication_div": "_/_",
    "multiplication_mod": "_%_",
}


def _apply(function: Callable[..., Result], arguments: Sequence[Any], name: str) -> Result:
    """A CEL function's result, with Python's exceptions turned into CEL errors."""
    try:
        return function(*arguments)
    except (TypeError, AttributeError):
        return _error(f"no such overload: {name}({', '.join(_kind(value) for value in arguments)})")
    except ZeroDivisionError:
        return _error("division by zero")
    except (ValueError, OverflowError) as e:
        return _error(f"{name}: {e}")
    except KeyError as e:
        return _error(f"no such key: {e.args[0] if e.args else ''}")


def _first_error(values: Iterable[Any]) -> CELEvalError | None:
    return next((value for value in values if isinstance(value, CELEvalError)), None)


def _literal_values(tree: lark.Tree[Any]) -> dict[int, Any]:
    """Every literal's value, computed once: cel-python decodes escapes on every evaluation."""
    decoder = Evaluator(tree, Activation())
    values = {id(node): decoder.literal(node) for node in tree.iter_subtrees() if node.data == "literal"}
    invalid = next((value for value in values.values() if isinstance(value, CELEvalError)), None)
    if invalid is not None:
        raise SelectorError(f"invalid literal: {_describe(invalid)}")
    return values


def _decide(values: Iterator[Result], decisive: bool, symbol: str) -> Result:
    """cel-go's `||` (decisive true) and `&&` (decisive false): a decisive operand wins over
    errors on either side; otherwise the first error, or the other truth value."""
    failure: Result | None = None
    for value in values:
        if isinstance(value, celtypes.BoolType):
            if bool(value) is decisive:
                return value
        elif failure is None:
            failure = (
                value
                if isinstance(value, CELEvalError)
                else _error(f"no such overload: {symbol} on {_kind(value)}")
            )
    return failure if failure is not None else celtypes.BoolType(not decisive)


Results = Iterator[tuple[Any, Result]]


def _all(results: Results) -> Result:
    return _decide((value for _, value in results), False, "all()")


def _exists(results: Results) -> Result:
    return _decide((value for _, value in results), True, "exists()")


def _exists_one(results: Results) -> Result:
    count = 0
    for _, value in results:
        if not isinstance(value, celtypes.BoolType):
            return _as_error(value, "exists_one()")
        count += bool(value)
    return celtypes.BoolType(count == 1)


def _map(results: Results) -> Result:
    mapped: list[Any] = []
    for _, value in results:
        if isinstance(value, CELEvalError):
            return value
        mapped.append(value)
    return celtypes.ListType(mapped)


def _filter(results: Results) -> Result:
    kept = []
    for item, value in results:
        if not isinstance(value, celtypes.BoolType):
            return _as_error(value, "filter()")
        if value:
            kept.append(item)
    return celtypes.ListType(kept)


_COMPREHENSIONS: Final[Mapping[str, Callable[[Results], Result]]] = {
    "all": _all,
    "exists": _exists,
    "exists_one": _exists_one,
    "map": _map,
    "filter": _filter,
}


def _error(message: str) -> CELEvalError:
    return CELEvalError(message)


def _as_error(value: Result, where: str) -> CELEvalError:
    return (
        value if isinstance(value, CELEvalError) else _error(f"no such overload: {where} on {_kind(value)}")
    )


def _describe(error: CELEvalError) -> str:
    message = str(error.args[0]) if error.args else "CEL runtime error"
    detail = error.args[2] if len(error.args) > 2 else None
    if isinstance(detail, tuple) and detail and str(detail[0]) not in message:
        message = f"{message}: {detail[0]}"
    return " ".join(message.split())[:200]


def _verdict(result: Result) -> Match:
    if isinstance(result, celtypes.BoolType):
        return MATCHED if result else NOT_MATCHED
    if isinstance(result, CELEvalError):
        return Match(Outcome.FAILED, _describe(result))
    return Match(Outcome.FAILED, f"CEL result of type {_kind(result)} could not be converted to bool")


# --- functions -----------------------------------------------------------------------------

_KINDS: Final[Sequence[tuple[type, str]]] = (
    (celtypes.BoolType, _BOOL),
    (celtypes.UintType, _UINT),
    (celtypes.IntType, _INT),
    (celtypes.DoubleType, _DOUBLE),
    (str, _STRING),
    (bytes, _BYTES),
    (type(None), _NULL),
    (list, _LIST),
    (dict, _MAP),
    (_Quantity, _QUANTITY),
    (_Semver, _SEMVER),
    (celtypes.TimestampType, _TIMESTAMP),
    (celtypes.DurationType, _DURATION),
)


def _kind(value: object) -> str:
    return next((name for cls, name in _KINDS if isinstance(value, cls)), type(value).__name__)


def _is_number(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, (bool, celtypes.BoolType))


def _plain(value: Any) -> Any:
    """celpy's numbers refuse to meet another numeric type; cel-go compares them by value."""
    if isinstance(value, float):
        return float(value)
    return int(value) if _is_number(value) else value


def _same(a: object, b: object) -> bool:
    """cel-go's heterogeneous equality: numbers by value across int, uint and double, values of
    different types unequal, lists and maps element by element."""
    if _is_number(a) and _is_number(b):
        return bool(_plain(a) == _plain(b))
    if _kind(a) != _kind(b):
        return False
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same(a[key], b[key]) for key in a)
    if isinstance(a, _Semver) and isinstance(b, _Semver):
        return a.compare(b) == 0
    return a == b


def _failing(function: Callable[..., Result]) -> Callable[..., Result]:
    """Errors passed as arguments are the result, as in every CEL function."""

    @functools.wraps(function)
    def checked(*arguments: Any) -> Result:
        failed = next((value for value in arguments if isinstance(value, CELEvalError)), None)
        return failed if failed is not None else function(*arguments)

    return checked


def _overload(*arguments: Any) -> TypeError:
    return TypeError(f"no such overload: {', '.join(_kind(value) for value in arguments)}")


@_failing
def _equal(a: Any, b: Any) -> Result:
    _check_equality(a, b)
    return celtypes.BoolType(_same(a, b))


@_failing
def _not_equal(a: Any, b: Any) -> Result:
    _check_equality(a, b)
    return celtypes.BoolType(not _same(a, b))


def _check_equality(a: Any, b: Any) -> None:
    """cel-go asks the left side: its own types call a different type unequal, but Kubernetes'
    quantities and semvers (apiserver pkg/cel/quantity.go, semver.go `Equal`) answer no such
    overload. Null is compared before either is asked."""
    if isinstance(a, (_Quantity, _Semver)) and b is not None and type(a) is not type(b):
        raise _overload(a, b)


def _ordering(compare: Callable[[Any, Any], bool]) -> Callable[..., Result]:
    @_failing
    def ordered(a: Any, b: Any) -> Result:
        numbers = _is_number(a) and _is_number(b)
        if not numbers and (_kind(a) != _kind(b) or _kind(a) not in _ORDERED):
            raise _overload(a, b)
        return celtypes.BoolType(compare(_plain(a), _plain(b)))

    return ordered


@_failing
def _in(item: Any, container: Any) -> Result:
    if isinstance(container, (list, dict)):
        return celtypes.BoolType(any(_same(item, element) for element in container))
    raise _overload(item, container)


@_failing
def _index(container: Any, key: Any) -> Result:
    if isinstance(container, list):
        if not _is_number(key) or isinstance(key, float):
            raise _overload(container, key)
        if not 0 <= key < len(container):
            return _error(f"index out of range: {key}")
        return cast(Result, container[key])
    if isinstance(container, dict):
        return cast(Result, container[key])
    raise _overload(container, key)


def _arithmetic(name: str, compute: Callable[[Any, Any], Any]) -> Callable[..., Result]:
    allowed = _ARITHMETIC[name]

    @_failing
    def arithmetic(a: Any, b: Any) -> Result:
        kinds = {_kind(a), _kind(b)}
        if not kinds <= allowed or (len(kinds) > 1 and not kinds <= {_TIMESTAMP, _DURATION}):
            raise _overload(a, b)
        return cast(Result, _bounded(compute(a, b)))

    return arithmetic


def _bounded(value: Any) -> Any:
    """Strings, bytes and lists that expressions build stay within MAX_VALUE_LENGTH."""
    if isinstance(value, (str, bytes, list)) and len(value) > MAX_VALUE_LENGTH:
        raise _BeyondLimits(f"a value longer than {MAX_VALUE_LENGTH}")
    if isinstance(value, str) and not isinstance(value, celtypes.StringType):
        return celtypes.StringType(value)
    if isinstance(value, bytes) and not isinstance(value, celtypes.BytesType):
        return celtypes.BytesType(value)
    if isinstance(value, list) and not isinstance(value, celtypes.ListType):
        return celtypes.ListType(value)
    return value


@_failing
def _negate(value: Any) -> Result:
    if _kind(value) not in (_INT, _DOUBLE, _DURATION):
        raise _overload(value)
    return cast(Result, -value)


@_failing
def _size(value: Any) -> Result:
    if not isinstance(value, (str, bytes, list, dict)):
        raise _overload(value)
    return celtypes.IntType(len(value))


def _strings(function: Callable[..., Any]) -> Callable[..., Result]:
    """A string method: the receiver and every string argument must be strings."""

    @_failing
    @functools.wraps(function)
    def method(text: Any, *arguments: Any) -> Result:
        if not isinstance(text, str):
            raise _overload(text, *arguments)
        result = function(text, *arguments)
        return result if isinstance(result, CELEvalError) else cast(Result, _bounded(result))

    return method


def _text(value: Any) -> str:
    if not isinstance(value, str):
        raise _overload(value)
    return value


def _count(value: Any) -> int:
    if not isinstance(value, celtypes.IntType):
        raise _overload(value)
    return int(value)


_REGEX_OPTIONS: Final = re2.Options()
_REGEX_OPTIONS.log_errors = False  # patterns come from users: no stderr line per bad one


@functools.lru_cache(maxsize=256)
def _regex(pattern: str) -> Any:
    try:
        return re2.compile(pattern, _REGEX_OPTIONS)
    except re2.error:
        return None


def _compiled_regex(pattern: Any) -> Any:
    compiled = _regex(_text(pattern))
    if compiled is None:
        return _error(f"invalid regular expression {str(pattern)[:40]!r}")
    return compiled


@_strings
def _matches(text: str, pattern: Any) -> Any:
    regex = _compiled_regex(pattern)
    return regex if isinstance(regex, CELEvalError) else celtypes.BoolType(regex.search(text) is not None)


@_strings
def _find(text: str, pattern: Any) -> Any:
    regex = _compiled_regex(pattern)
    if isinstance(regex, CELEvalError):
        return regex
    found = regex.search(text)
    return celtypes.StringType(found.group(0) if found else "")


@_strings
def _find_all(text: str, pattern: Any, limit: Any = None) -> Any:
    regex, limit = _compiled_regex(pattern), -1 if limit is None else _count(limit)
    if isinstance(regex, CELEvalError):
        return regex
    found = [celtypes.StringType(match.group(0)) for match in regex.finditer(text)]
    return celtypes.ListType(found if limit < 0 else found[:limit])


@_strings
def _contains(text: str, part: Any) -> Any:
    return celtypes.BoolType(_text(part) in text)


@_strings
def _starts_with(text: str, prefix: Any) -> Any:
    return celtypes.BoolType(text.startswith(_text(prefix)))


@_strings
def _ends_with(text: str, suffix: Any) -> Any:
    return celtypes.BoolType(text.endswith(_text(suffix)))


_ASCII_LOWER: Final = str.maketrans("ABCDEFGHIJKLMNOPQRSTUVWXYZ", "abcdefghijklmnopqrstuvwxyz")
_ASCII_UPPER: Final = str.maketrans("abcdefghijklmnopqrstuvwxyz", "ABCDEFGHIJKLMNOPQRSTUVWXYZ")
# Go's unicode.IsSpace, which the strings extension's trim() uses.
_GO_SPACE: Final = (
    "\t\n\v\f\r \x85\xa0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009"
    "\u200a\u2028\u2029\u202f\u205f\u3000"
)


@_strings
def _lower_ascii(text: str) -> Any:
    return text.translate(_ASCII_LOWER)


@_strings
def _upper_ascii(text: str) -> Any:
    return text.translate(_ASCII_UPPER)


@_strings
def _trim(text: str) -> Any:
    return text.strip(_GO_SPACE)


@_strings
def _char_at(text: str, index: Any) -> Any:
    position = _count(index)
    if not 0 <= position <= len(text):
        return _error(f"index out of range: {position}")
    return text[position : position + 1]


@_strings
def _index_of(text: str, part: Any, start: Any = None) -> Any:
    """The strings extension's indexOf: code points; an offset must be inside the string."""
    part = _text(part)
    if start is None or part == "":
        return celtypes.IntType(text.find(part) if start is None else _count(start))
    position = _count(start)
    if not 0 <= position < len(text):
        return _error(f"index out of range: {position}")
    return celtypes.IntType(text.find(part, position))


@_strings
def _last_index_of(text: str, part: Any, end: Any = None) -> Any:
    """lastIndexOf: the last match starting at or before the offset."""
    part = _text(part)
    if end is None or part == "":
        return celtypes.IntType(text.rfind(part) if end is None else _count(end))
    position = _count(end)
    if not 0 <= position < len(text):
        return _error(f"index out of range: {position}")
    return celtypes.IntType(text.rfind(part, 0, position + len(part)))


@_strings
def _replace(text: str, old: Any, new: Any, limit: Any = None) -> Any:
    count, old, new = -1 if limit is None else _count(limit), _text(old), _text(new)
    if (
        count < 0
        and len(new) > len(old)
        and (len(text) + 1) * (len(new) - len(old) + 1) > MAX_VALUE_LENGTH * 2
    ):
        raise _BeyondLimits(f"a value longer than {MAX_VALUE_LENGTH}")
    return text.replace(old, new, count)


@_strings
def _split(text: str, separator: Any, limit: Any = None) -> Any:
    count, separator = -1 if limit is None else _count(limit), _text(separator)
    if count == 0:
        return celtypes.ListType()
    if separator == "":
        parts = list(text) if count < 0 or count > len(text) else [*text[: count - 1], text[count - 1 :]]
    else:
        parts = text.split(separator, count - 1 if count > 0 else -1)
    return celtypes.ListType(celtypes.StringType(part) for part in parts)


@_strings
def _substring(text: str, start: Any, end: Any = None) -> Any:
    first, last = _count(start), len(text) if end is None else _count(end)
    if not 0 <= first <= last <= len(text):
        return _error(f"substring out of range: [{first}:{last}] of {len(text)}")
    return text[first:last]


@_failing
def _join(items: Any, separator: Any = "") -> Result:
    if not isinstance(items, list) or not all(isinstance(item, str) for item in items):
        raise _overload(items, separator)
    return cast(Result, _bounded(_text(separator).join(items)))


def _list_method(function: Callable[..., Any]) -> Callable[..., Result]:
    @_failing
    @functools.wraps(function)
    def method(items: Any, *arguments: Any) -> Result:
        if not isinstance(items, list):
            raise _overload(items, *arguments)
        return cast(Result, function(items, *arguments))

    return method


def _ordered_items(items: list[Any]) -> None:
    kinds = {_kind(item) for item in items}
    numbers = all(_is_number(item) for item in items)
    if not numbers and (len(kinds) > 1 or not kinds <= _ORDERED):
        raise _overload(*items[:2])


@_list_method
def _is_sorted(items: list[Any]) -> Any:
    _ordered_items(items)
    plain = [_plain(item) for item in items]
    return celtypes.BoolType(all(a <= b for a, b in itertools.pairwise(plain)))


@_list_method
def _sum(items: list[Any]) -> Any:
    kinds = {_kind(item) for item in items}
    if len(kinds) > 1 or not kinds <= _NUMBERS | {_DURATION}:
        raise _overload(*items[:2])
    return functools.reduce(operator.add, items[1:], items[0]) if items else celtypes.IntType(0)


def _extreme(pick: Callable[..., Any], name: str) -> Callable[..., Result]:
    @_list_method
    def extreme(items: list[Any]) -> Any:
        if not items:
            return _error(f"{name}(list) argument must not be empty")
        _ordered_items(items)
        return pick(items, key=_plain)

    return extreme


@_failing
def _sequence_index_of(container: Any, item: Any, start: Any = None) -> Result:
    if isinstance(container, str):
        return _index_of(container, item, start)
    if not isinstance(container, list) or start is not None:
        raise _overload(container, item)
    return celtypes.IntType(next((i for i, element in enumerate(container) if _same(element, item)), -1))


@_failing
def _sequence_last_index_of(container: Any, item: Any, end: Any = None) -> Result:
    if isinstance(container, str):
        return _last_index_of(container, item, end)
    if not isinstance(container, list) or end is not None:
        raise _overload(container, item)
    found = [i for i, element in enumerate(container) if _same(element, item)]
    return celtypes.IntType(found[-1] if found else -1)


@_failing
def _includes(target: Any, item: Any) -> Result:
    """DRA's `includes` (compile.go `includesFunc`): membership in a list attribute, equality
    with a scalar one."""
    if isinstance(target, list):
        return celtypes.BoolType(any(_same(element, item) for element in target))
    return celtypes.BoolType(_same(target, item))


# Kubernetes' quantity library (apiserver pkg/cel/library/quantity.go).


@_failing
def _quantity(text: Any) -> Result:
    try:
        return cast(Result, _Quantity(_parse_quantity(_text(text))))
    except quantity.QuantityError as e:
        return _error(f"quantities: {e}")


@_failing
def _is_quantity(text: Any) -> Result:
    return celtypes.BoolType(not isinstance(_quantity(text), CELEvalError))


def _amount(value: Any) -> Fraction:
    if not isinstance(value, _Quantity):
        raise _overload(value)
    return value.value


@_failing
def _quantity_sign(value: Any) -> Result:
    return celtypes.IntType(_sign(_amount(value), 0))


@_failing
def _is_integer(value: Any) -> Result:
    amount = _amount(value)
    return celtypes.BoolType(amount.denominator == 1 and -_INT64 <= amount < _INT64)


@_failing
def _as_integer(value: Any) -> Result:
    if not _is_integer(value):
        return _error("cannot convert value to integer")
    return celtypes.IntType(int(_amount(value)))


@_failing
def _as_float(value: Any) -> Result:
    amount = _amount(value)
    try:
        return celtypes.DoubleType(float(amount))
    except OverflowError:
        return celtypes.DoubleType(math.copysign(math.inf, amount))


def _quantity_arithmetic(compute: Callable[[Fraction, Fraction], Fraction]) -> Callable[..., Result]:
    @_failing
    def arithmetic(value: Any, other: Any) -> Result:
        if isinstance(other, celtypes.IntType) and not isinstance(other, celtypes.BoolType):
            return cast(Result, _Quantity(compute(_amount(value), Fraction(int(other)))))
        return cast(Result, _Quantity(compute(_amount(value), _amount(other))))

    return arithmetic


# Kubernetes' semver library (apiserver pkg/cel/library/semverlib.go).


@_failing
def _semver(text: Any, normalize: Any = None) -> Result:
    if normalize is not None and not isinstance(normalize, celtypes.BoolType):
        raise _overload(text, normalize)
    try:
        return cast(Result, (_normalized_semver if normalize else _parse_semver)(_text(text)))
    except _NotSemver as e:
        return _error(f"semver: {e}")


@_failing
def _is_semver(text: Any, normalize: Any = None) -> Result:
    return celtypes.BoolType(not isinstance(_semver(text, normalize), CELEvalError))


def _version_part(part: str) -> Callable[..., Result]:
    @_failing
    def number(value: Any) -> Result:
        if not isinstance(value, _Semver):
            raise _overload(value)
        # Go converts the uint64 to an int64.
        return celtypes.IntType((getattr(value, part) + _INT64) % (2 * _INT64) - _INT64)

    return number


def _comparison(outcome: Callable[[int], Result]) -> Callable[..., Result]:
    """compareTo, isGreaterThan, isLessThan: quantities with quantities, versions with versions."""

    @_failing
    def compare(value: Any, other: Any) -> Result:
        if isinstance(value, _Quantity) and isinstance(other, _Quantity):
            return outcome(_sign(value.value, other.value))
        if isinstance(value, _Semver) and isinstance(other, _Semver):
            return outcome(value.compare(other))
        raise _overload(value, other)

    return compare


@_failing
def _string(value: Any) -> Result:
    if _kind(value) not in (_STRING, _INT, _UINT, _DOUBLE, _BOOL, _BYTES, _TIMESTAMP, _DURATION):
        raise _overload(value)
    if isinstance(value, celtypes.BoolType):
        return celtypes.StringType("true" if value else "false")
    return celtypes.StringType(value)


@_failing
def _bool(value: Any) -> Result:
    if isinstance(value, celtypes.BoolType):
        return value
    if isinstance(value, str) and value in _BOOL_TEXT:
        return celtypes.BoolType(_BOOL_TEXT[value])
    if isinstance(value, str):
        return _error(f"type conversion error from string {value[:20]!r} to bool")
    raise _overload(value)


_BOOL_TEXT: Final = {
    **dict.fromkeys(("1", "t", "T", "true", "TRUE", "True"), True),
    **dict.fromkeys(("0", "f", "F", "false", "FALSE", "False"), False),
}

_FUNCTIONS: Final[Mapping[str, Callable[..., Result]]] = {
    "!_": celtypes.logical_not,
    "_==_": _equal,
    "_!=_": _not_equal,
    "_<_": _ordering(operator.lt),
    "_<=_": _ordering(operator.le),
    "_>_": _ordering(operator.gt),
    "_>=_": _ordering(operator.ge),
    "_in_": _in,
    "_[_]": _index,
    "_+_": _arithmetic("addition_add", operator.add),
    "_-_": _arithmetic("addition_sub", operator.sub),
    "_*_": _arithmetic("multiplication_mul", operator.mul),
    "_/_": _arithmetic("multiplication_div", operator.truediv),
    "_%_": _arithmetic("multiplication_mod", operator.mod),
    "-_": _negate,
    "size": _size,
    "contains": _contains,
    "startsWith": _starts_with,
    "endsWith": _ends_with,
    "matches": _matches,
    "find": _find,
    "findAll": _find_all,
    "charAt": _char_at,
    "indexOf": _sequence_index_of,
    "lastIndexOf": _sequence_last_index_of,
    "lowerAscii": _lower_ascii,
    "upperAscii": _upper_ascii,
    "trim": _trim,
    "replace": _replace,
    "split": _split,
    "substring": _substring,
    "join": _join,
    "isSorted": _is_sorted,
    "sum": _sum,
    "min": _extreme(min, "min"),
    "max": _extreme(max, "max"),
    "includes": _includes,
    "quantity": _quantity,
    "isQuantity": _is_quantity,
    "sign": _quantity_sign,
    "isInteger": _is_integer,
    "asInteger": _as_integer,
    "asApproximateFloat": _as_float,
    "add": _quantity_arithmetic(operator.add),
    "sub": _quantity_arithmetic(operator.sub),
    "semver": _semver,
    "isSemver": _is_semver,
    "major": _version_part("major"),
    "minor": _version_part("minor"),
    "patch": _version_part("patch"),
    "compareTo": _comparison(celtypes.IntType),
    "isGreaterThan": _comparison(lambda order: celtypes.BoolType(order > 0)),
    "isLessThan": _comparison(lambda order: celtypes.BoolType(order < 0)),
    "string": _string,
    "bool": _bool,
}
# cel-python's functions (conversions, timestamps), with this module's in front.
_TABLE: Final[Mapping[str, Callable[..., Result]]] = {**base_functions, **_FUNCTIONS}
