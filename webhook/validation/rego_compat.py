"""Make Gatekeeper Rego evaluate correctly on regopy, which speaks only Rego v1. Pure.

Rewrites, each an edit of the original text that keeps line numbers:

* upgrade (v0 sources only), as `opa fmt --v0-v1` would: `violation[x] { … }` becomes
  `violation contains x if { … }` (regopy reads the v0 form as a partial *object*),
  bodies gain `if`, a rule with several bodies becomes several rules.
* builtins: the v0 spellings v1 dropped (`re_match`…) get their v1 names, and `sprintf`
  goes through COMPAT_MODULE, because regopy quotes some strings it formats and fails
  where Go prints `%!v(MISSING)`.
* hoisting (rego_hoist): references that iterate inside call arguments, which regopy
  refuses or silently mis-evaluates, are bound first; under `not`, references and
  nested calls are bound before the negation, as OPA's compiler does; `x` NEWLINE `(y)`
  gets the `;` OPA implies; `some k, v in xs` inside a comprehension, which regopy
  refuses, becomes `some k; v = xs[k]`.
* relocate: each template gets its own package and its own copy of its libs, as
  Gatekeeper isolates them; `data.inventory` and `input.parameters` become the refs the
  engine provides.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from webhook.validation.rego_hoist import Hoister
from webhook.validation.rego_syntax import (
    Body,
    Module,
    Rule,
    Token,
    parse,
    tokenize,
)

COMPAT_PACKAGE = "gkcompat"
# v0 builtins that v1 removed, and builtins regopy gets wrong, mapped to what works.
RENAMED_BUILTINS = {
    "re_match": "regex.match",
    "net.cidr_overlap": "net.cidr_contains",
    "sprintf": f"data.{COMPAT_PACKAGE}.format",
}
# regopy's sprintf prints some strings (literals bound to variables, results of string
# builtins) with their JSON quotes, and those quotes then break its JSON output;
# substring(…, 0, -1) hands it a plain copy (on OPA, the identity). It also fails where
# Go's fmt, and so OPA, prints `%!v(MISSING)` for a missing argument.
COMPAT_MODULE = f"""package {COMPAT_PACKAGE}

import rego.v1

format(pattern, values) := text if {{
	text := sprintf(pattern, [plain(v) | some v in values])
}} else := sprintf(pattern, [plain(v) | some v in padded(pattern, values)])

plain(v) := substring(v, 0, -1) if is_string(v)

plain(v) := v if not is_string(v)

padded(pattern, values) := array.concat(values, missing) if {{
	verbs := regex.find_n(`%[-+# 0]*[0-9]*(\\.[0-9]+)?[a-zA-Z]`, replace(pattern, "%%", ""), -1)
	gap := count(verbs) - count(values)
	gap > 0
	missing := [m | some _ in numbers.range(1, gap); m := "%!v(MISSING)"]
}}
"""
_FUTURE = "future.keywords"


@dataclass(frozen=True)
class Edit:
    start: int
    end: int
    text: str


def apply_edits(source: str, edits: list[Edit]) -> str:
    out: list[str] = []
    position = 0
    for edit in sorted(edits, key=lambda e: (e.start, e.end)):
        out.append(source[position : edit.start])
        out.append(edit.text)
        position = edit.end
    out.append(source[position:])
    return "".join(out)


def is_v0(module: Module) -> bool:
    """True unless the module is written in Rego v1 (or in the subset both versions share)."""
    imports = [_text(module.tokens, first + 1, last) for first, last in module.imports]
    if "rego.v1" in imports:
        return False
    if any(name.startswith(_FUTURE) for name in imports):
        return True
    return any(not _has_if(module.tokens, body) for rule in module.rules for body in rule.bodies)


def for_regopy(source: str, *, v0: bool | None = None) -> str:
    """Rewrite one module for regopy; `v0=None` detects the version from the source."""
    module = parse(source)
    if v0 is None:
        v0 = is_v0(module)
    edits = list(_upgrade_edits(module)) if v0 else []
    source = apply_edits(source, edits + list(_builtin_edits(module.tokens)))
    hoisted = [Edit(start, end, text) for start, end, text in Hoister(source, parse(source)).edits()]
    return apply_edits(source, hoisted)


def relocate(
    source: str,
    *,
    package: str | None,
    lib_root: str,
    inventory: str = "data.inventory",
    parameters: str = "input.parameters",
) -> str:
    """Move the module to `package` (or under `lib_root` for a lib), with `data.lib` refs.

    `data.inventory` and `input.parameters` become the refs the engine provides; a bare
    `input` (as in `object.get(input, "parameters", {})`) becomes Gatekeeper's input
    rebuilt from those parts and our `gpu` reading, so it still sees all three.
    """
    tokens = tokenize(source)
    module = parse(source)
    first, last = module.package
    new = package if package is not None else f"{lib_root}.{_text(tokens, first, last)}"
    edits = [Edit(tokens[first].start, tokens[last].end, new)]
    imports = {i for start, end in module.imports for i in range(start, end + 1)}
    for i, tok in enumerate(tokens[:-2]):
        if tok.kind != "ident" or (i and tokens[i - 1].text == "."):
            continue
        following = [t.text for t in tokens[i + 1 : i + 4]]
        if tok.text == "data" and following[:2] == [".", "lib"]:
            edits.append(Edit(tok.start, tokens[i + 2].end, f"data.{lib_root}.lib"))
        elif tok.text == "data" and following[:2] == [".", "inventory"]:
            edits.append(Edit(tok.start, tokens[i + 2].end, inventory))
        elif tok.text == "input" and parameters != "input.parameters" and i not in imports:
            edits += _parameter_edits(tokens, i, parameters)
    return apply_edits(source, edits)


def _parameter_edits(tokens: list[Token], i: int, parameters: str) -> list[Edit]:
    following = [t.text for t in tokens[i + 1 : i + 4]]
    if following[:2] == [".", "parameters"]:
        return [Edit(tokens[i].start, tokens[i + 2].end, parameters)]
    if following == ["[", '"parameters"', "]"]:
        return [Edit(tokens[i].start, tokens[i + 3].end, parameters)]
    if following[0] not in (".", "[") and tokens[i - 1].text != "with":
        # input.gpu is this engine's reading of the pod's accelerators (no key under Gatekeeper):
        # templates that read it through a bare `input` must still see it.
        gpu = 'object.get(input, "gpu", {})'
        whole = f'{{"review": input.review, "parameters": {parameters}, "gpu": {gpu}}}'
        return [Edit(tokens[i].start, tokens[i].end, whole)]
    return []


def package_of(source: str) -> str:
    module = parse(source)
    first, last = module.package
    return _text(module.tokens, first, last)


# -- v0 -> v1 -----------------------------------------------------------------


def _upgrade_edits(module: Module) -> Iterator[Edit]:
    tokens = module.tokens
    for rule in module.rules:
        if rule.default:
            continue
        head_end = rule.bodies[0].first - 1 if rule.bodies else rule.last
        head = " ".join(_render(tokens, rule.first, head_end).split())
        if rule.key is not None and rule.assign < 0 and rule.contains < 0:
            opening, closing = rule.key
            yield Edit(tokens[opening].start, tokens[opening].end, " contains ")
            yield Edit(tokens[closing].start, tokens[closing].end, "")
            name = _render(tokens, rule.name_first, rule.name_last)
            head = f"{name} contains {' '.join(_render(tokens, opening + 1, closing - 1).split())}"
        yield from _body_edits(tokens, rule, head)


def _body_edits(tokens: list[Token], rule: Rule, head: str) -> Iterator[Edit]:
    for n, body in enumerate(rule.bodies):
        if body.brace < 0 or _has_if(tokens, body):
            continue
        brace = tokens[body.brace]
        if body.keyword == "" and n > 0:
            # A v0 rule with several bodies: v1 wants each as its own rule, on its own line.
            yield Edit(brace.start, brace.start, f"\n{head} if ")
        else:
            yield Edit(brace.start, brace.start, "if ")


def _builtin_edits(tokens: list[Token]) -> Iterator[Edit]:
    for i, tok in enumerate(tokens):
        if tok.kind != "ident" or (i and tokens[i - 1].text == "."):
            continue
        dotted = tok.text
        last = i
        while tokens[last + 1].text == "." and tokens[last + 2].kind == "ident":
            last += 2
            dotted += "." + tokens[last].text
        if dotted in RENAMED_BUILTINS and tokens[last + 1].text == "(":
            yield Edit(tok.start, tokens[last].end, RENAMED_BUILTINS[dotted])


def _has_if(tokens: list[Token], body: Body) -> bool:
    if body.keyword == "if":
        return True
    return body.brace > 0 and tokens[body.brace - 1].text == "if"


def _text(tokens: list[Token], first: int, last: int) -> str:
    return "".join(t.text for t in tokens[first : last + 1])


def _render(tokens: list[Token], first: int, last: int) -> str:
    """Tokens first..last on one line, spaced where the source had space."""
    parts: list[str] = []
    for k in range(first, last + 1):
        if k > first and tokens[k].start > tokens[k - 1].end:
            parts.append(" ")
        parts.append(tokens[k].text)
    return "".join(parts)
