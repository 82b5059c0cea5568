"""The evaluator: a compiled selector's tree on one device's values, within a step budget.

Interpreter reads the tree syntax.simplified leaves, with its literals decoded once when the
selector compiles (literal_values). Every node visited, and a comprehension's body once per
element, spends one step of a Budget of MAX_STEPS; past it BeyondLimits is raised, never a
guess. A CEL runtime error is a value, passed on as cel-go passes it, and a function raising a
Python exception gives the CEL error cel-go would (no such overload, division by zero, ...).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any, Final, cast

import lark
from celpy import celtypes
from celpy.evaluation import Activation, CELEvalError, Evaluator, Result, base_functions

from webhook.dra.cel import syntax
from webhook.dra.cel.errors import SelectorError, describe, runtime_error
from webhook.dra.cel.functions import TABLE
from webhook.dra.cel.kinds import TYPE_NAMES
from webhook.dra.cel.limits import MAX_STEPS, BeyondLimits
from webhook.dra.cel.values import Domains, Message, kind_of


class Budget:
    """The steps left to one evaluation, shared by every scope it opens."""

    __slots__ = ("left", "limit")

    def __init__(self, limit: int = MAX_STEPS) -> None:
        self.left = self.limit = limit

    def spend(self) -> None:
        self.left -= 1
        if self.left < 0:
            raise BeyondLimits(f"more than {self.limit} evaluation steps")


class Interpreter:
    """Evaluates cel-python's parse tree on cel-python's values, with cel-go's semantics: `&&`
    and `||` stop at a decisive operand and absorb errors on either side, macros absorb errors
    as cel-go's comprehensions do, `has()` tests only the last field, and `cel.bind` binds a
    name. (cel-python's own interpreter spends microseconds per node on runtime type casts.)"""

    def __init__(self, literals: Mapping[int, Any], variables: Mapping[str, Any], budget: Budget) -> None:
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
            return runtime_error(f"no such overload: {kind_of(condition)} as the condition of ?:")
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
        return _apply(TABLE[name], (left_value, self.visit(right)), name)

    def unary(self, tree: lark.Tree[Any]) -> Result:
        operation, operand = tree.children
        name = "!_" if operation.data == "unary_not" else "-_"
        return _apply(TABLE[name], (self.visit(operand),), name)

    def member_dot(self, tree: lark.Tree[Any]) -> Result:
        target = self.visit(tree.children[0])
        name = str(tree.children[1])
        if isinstance(target, CELEvalError):
            return target
        if not isinstance(target, dict):
            return runtime_error(f"no such overload: field selection on {kind_of(target)}")
        try:
            return cast(Result, target[name])
        except KeyError:
            return runtime_error(f"no such key: {name}")

    def member_index(self, tree: lark.Tree[Any]) -> Result:
        return _apply(TABLE["_[_]"], (self.visit(tree.children[0]), self.visit(tree.children[1])), "_[_]")

    def member_dot_arg(self, tree: lark.Tree[Any]) -> Result:
        target, name_token, *rest = tree.children
        name, arguments = str(name_token), syntax.arguments(rest)
        if name == "bind" and syntax.bare_name(target) == "cel":
            variable, value, body = arguments
            return self._bound(body, syntax.variable(variable, "cel.bind()"), self.visit(value))
        if name in syntax.MACROS:
            return self._comprehension(name, target, arguments)
        return self._call(name, [target, *arguments])

    def ident_arg(self, tree: lark.Tree[Any]) -> Result:
        name_token, *rest = tree.children
        name, arguments = str(name_token), syntax.arguments(rest)
        if name == "has":
            return self._has(cast("lark.Tree[Any]", syntax.selection(arguments[0])))
        if name == "dyn":
            return self.visit(arguments[0])
        return self._call(name, arguments)

    def ident(self, tree: lark.Tree[Any]) -> Result:
        name = str(tree.children[0])
        if name in self._variables:
            return cast(Result, self._variables[name])
        if name in TYPE_NAMES:
            return cast(Result, base_functions[name])  # cel-python's types, which type() returns
        return runtime_error(f"undeclared reference to '{name}'")

    def literal(self, tree: lark.Tree[Any]) -> Result:
        return cast(Result, self._literals[id(tree)])

    def list_lit(self, tree: lark.Tree[Any]) -> Result:
        elements = [self.visit(child) for child in syntax.arguments(tree.children)]
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
            return runtime_error(f"invalid map literal: {e}")

    def member_object(self, tree: lark.Tree[Any]) -> Result:
        """`Name{field: value, ...}`, which the checker allows only where its environment
        declares message types; a repeated field keeps its last value, as cel-go's does."""
        target, *inits = tree.children
        entries = inits[0].children if inits else []
        values = [self.visit(value) for value in entries[1::2]]
        failed = _first_error(values)
        if failed is not None:
            return failed
        names = (celtypes.StringType(str(name)) for name in entries[::2])
        return Message(cast(str, syntax.qualified_name(target)), dict(zip(names, values, strict=True)))

    def refused(self, tree: lark.Tree[Any]) -> Result:
        return runtime_error(f"unsupported syntax {tree.data!s}")  # the checker refuses these first

    def _call(self, name: str, arguments: list[Any]) -> Result:
        values = [self.visit(argument) for argument in arguments]
        failed = _first_error(values)
        return failed if failed is not None else _apply(TABLE[name], values, name)

    def _has(self, selection: lark.Tree[Any]) -> Result:
        target = self.visit(selection.children[0])
        if isinstance(target, CELEvalError):
            return target
        if not isinstance(target, dict):
            return runtime_error(f"no such overload: has() on {kind_of(target)}")
        return celtypes.BoolType(isinstance(target, Domains) or str(selection.children[1]) in target)

    def _bound(self, body: lark.Tree[Any], variable: str, value: Result) -> Result:
        variables = {**self._variables, variable: value}
        return Interpreter(self._literals, variables, self._budget).visit(body)

    def _comprehension(self, name: str, target: lark.Tree[Any], arguments: list[Any]) -> Result:
        collection = self.visit(target)
        if isinstance(collection, CELEvalError):
            return collection
        if not isinstance(collection, (list, dict)):
            return runtime_error(f"no such overload: {name}() on {kind_of(collection)}")
        variable, body = syntax.variable(arguments[0], f"{name}()"), arguments[-1]
        items = list(collection)
        if len(arguments) == 3:  # map(x, filter, transform): the checker allows it where declared
            kept = _filter((item, self._bound(arguments[1], variable, item)) for item in items)
            if isinstance(kept, CELEvalError):
                return kept
            items = list(cast(list[Any], kept))
        results = ((item, self._bound(body, variable, item)) for item in items)
        return _COMPREHENSIONS[name](results)


_NODES: Final[Mapping[str, Callable[[Interpreter, lark.Tree[Any]], Result]]] = {
    "expr": Interpreter.expr,
    "conditionalor": Interpreter.either,
    "conditionaland": Interpreter.both,
    "relation": Interpreter.operator,
    "addition": Interpreter.operator,
    "multiplication": Interpreter.operator,
    "unary": Interpreter.unary,
    "member_dot": Interpreter.member_dot,
    "member_index": Interpreter.member_index,
    "member_dot_arg": Interpreter.member_dot_arg,
    "ident_arg": Interpreter.ident_arg,
    "ident": Interpreter.ident,
    "literal": Interpreter.literal,
    "list_lit": Interpreter.list_lit,
    "map_lit": Interpreter.map_lit,
    "member_object": Interpreter.member_object,
    "dot_ident": Interpreter.refused,
    "dot_ident_arg": Interpreter.refused,
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
        return runtime_error(f"no such overload: {name}({', '.join(kind_of(value) for value in arguments)})")
    except ZeroDivisionError:
        return runtime_error("division by zero")
    except (ValueError, OverflowError) as e:
        return runtime_error(f"{name}: {e}")
    except KeyError as e:
        return runtime_error(f"no such key: {e.args[0] if e.args else ''}")


def _first_error(values: Iterable[Any]) -> CELEvalError | None:
    return next((value for value in values if isinstance(value, CELEvalError)), None)


def literal_values(tree: lark.Tree[Any]) -> dict[int, Any]:
    """Every literal's value, computed once: cel-python decodes escapes on every evaluation."""
    decoder = Evaluator(tree, Activation())
    values = {id(node): decoder.literal(node) for node in tree.iter_subtrees() if node.data == "literal"}
    invalid = next((value for value in values.values() if isinstance(value, CELEvalError)), None)
    if invalid is not None:
        raise SelectorError(f"invalid literal: {describe(invalid)}")
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
                else runtime_error(f"no such overload: {symbol} on {kind_of(value)}")
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


def _as_error(value: Result, where: str) -> CELEvalError:
    return (
        value
        if isinstance(value, CELEvalError)
        else runtime_error(f"no such overload: {where} on {kind_of(value)}")
    )
