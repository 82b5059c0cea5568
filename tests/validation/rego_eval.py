"""Evaluate one rewritten module on real regopy, the way the engine does (bundle + JSON input)."""

from __future__ import annotations

from typing import Any

import orjson

from webhook.policy.engines.regopy import new_interpreter, query_entrypoint
from webhook.validation.rego_compat import COMPAT_MODULE, for_regopy


def evaluate(source: str, rule: str, input_value: Any = None, *, v0: bool | None = None) -> Any:
    """The value of `data.t.<rule>` after rewriting `source` (package t); None when undefined."""
    builder = new_interpreter()
    builder.add_module("gkcompat.rego", COMPAT_MODULE)
    builder.add_module("t.rego", for_regopy(source, v0=v0))
    bundle = builder.build(None, [f"t/{rule}"])
    runner = new_interpreter()
    runner.set_input_term(orjson.dumps(input_value or {}).decode())
    return query_entrypoint(runner, bundle, f"t/{rule}")


def as_set(value: Any) -> set[str]:
    """A Rego set as comparable JSON strings."""
    assert isinstance(value, list), value
    return {orjson.dumps(item, option=orjson.OPT_SORT_KEYS).decode() for item in value}
