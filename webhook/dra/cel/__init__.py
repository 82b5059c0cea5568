"""Kubernetes' CEL environment for DRA device selectors, evaluated in-process with cel-python. Pure.

Kubernetes' allocator compiles each `cel.expression` of a DeviceClass or a request once and
evaluates it against every device of the ResourceSlices it considers
(staging/src/k8s.io/dynamic-resource-allocation/cel/compile.go). This package does the same
for a published Device, with the environment of compile.go as the scheduler builds it (stored
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

The package, each module depending only on those listed before it:

- limits, errors, kinds: the bounds, the refusals and CEL errors, the type names of messages;
- syntax: the parse, made shallow, and the shapes the checker and the evaluator read;
- values: a device as CEL values, quantities, semvers, cel-go's equality;
- calls, standard, strings, library, functions: the functions a selector can call, by name;
- environment, check: Kubernetes' declarations, and the compile-time checks and refusals;
- interpreter: the evaluator and its step budget;
- selector: compile_selector, Selector, Outcome and match_all, re-exported here.
"""

from webhook.dra.cel.errors import SelectorError, UnsupportedSelector
from webhook.dra.cel.limits import MAX_DEPTH, MAX_EXPRESSION_BYTES, MAX_STEPS, MAX_VALUE_LENGTH
from webhook.dra.cel.selector import (
    MATCHED,
    NOT_MATCHED,
    Match,
    Outcome,
    Selector,
    compile_selector,
    match_all,
)

__all__ = [
    "MATCHED",
    "MAX_DEPTH",
    "MAX_EXPRESSION_BYTES",
    "MAX_STEPS",
    "MAX_VALUE_LENGTH",
    "NOT_MATCHED",
    "Match",
    "Outcome",
    "Selector",
    "SelectorError",
    "UnsupportedSelector",
    "compile_selector",
    "match_all",
]
