"""Find calls to functions that exist nowhere, before regopy sees them. Pure.

OPA rejects such a module at compile time; regopy accepts it and fails when the call
is reached, sometimes by crashing the process. So every call must name a builtin,
a rule of its own package, or a rule of a module compiled with it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

from webhook.validation.rego_syntax import Module, Token, parse

_KEYWORDS = frozenset(
    {"not", "if", "some", "every", "in", "with", "as", "else", "contains", "default", "import", "package"}
)


@dataclass(frozen=True)
class UnknownCall:
    module: str
    offset: int
    name: str


def unknown_calls(modules: Iterable[tuple[str, str]], is_builtin: Callable[[str], bool]) -> list[UnknownCall]:
    """Calls in `modules` ((name, text) pairs) that resolve to no builtin and no rule."""
    parsed = [(name, parse(text)) for name, text in modules]
    rules = {f"data.{_package(m)}.{m.tokens[r.name_first].text}" for _, m in parsed for r in m.rules}
    found: list[UnknownCall] = []
    for name, module in parsed:
        local = {module.tokens[r.name_first].text for r in module.rules}
        aliases = _aliases(module)
        heads = {r.name_first for r in module.rules}
        for start, callee in _calls(module.tokens, heads):
            first, _, rest = callee.partition(".")
            if first in local or is_builtin(callee):
                continue
            full = (
                callee
                if first == "data"
                else f"{aliases[first]}.{rest}"
                if first in aliases and rest
                else None
            )
            if first in aliases and not rest:
                full = aliases[first]
            if full is None or full not in rules:
                found.append(UnknownCall(name, start, callee))
    return found


def _package(module: Module) -> str:
    first, last = module.package
    return "".join(t.text for t in module.tokens[first : last + 1])


def _aliases(module: Module) -> dict[str, str]:
    aliases: dict[str, str] = {}
    for first, last in module.imports:
        texts = [t.text for t in module.tokens[first + 1 : last + 1]]
        if "as" in texts:
            at = texts.index("as")
            aliases[texts[at + 1]] = "".join(texts[:at])
        else:
            aliases[texts[-1]] = "".join(texts)
    return aliases


def _calls(tokens: list[Token], heads: set[int]) -> Iterable[tuple[int, str]]:
    """(offset, dotted name) of each `a.b.c(` that is a call, not a function's own head."""
    i = 0
    while i < len(tokens) - 1:
        tok = tokens[i]
        if tok.kind != "ident" or tok.text in _KEYWORDS or (i and tokens[i - 1].text == "."):
            i += 1
            continue
        j, name = i, tok.text
        while tokens[j + 1].text == "." and tokens[j + 2].kind == "ident":
            j += 2
            name += "." + tokens[j].text
        if tokens[j + 1].text == "(" and i not in heads:
            yield tok.start, name
        i = j + 1
