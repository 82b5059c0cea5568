"""Kubernetes' admission CEL, evaluated in-process with cel-python. Pure.

Gatekeeper's K8sNativeValidation templates and Kubernetes' ValidatingAdmissionPolicy compile
each expression once against their declared names (`object`, `oldObject`, `request`, `params`,
`variables`, ...) and evaluate it per admission request. This package does the same:

    program = compile_program('object.metadata.name.startsWith("gpu-")', {"object"})
    program.evaluate({"object": pod})  # -> True / False; JSON-ish values in and out

- compile_program raises CelCompileError, a one-line reason (with line and column for syntax
  errors): unknown names, functions or variables, misused macros, invalid literal regular
  expressions, what this engine does not support (optional syntax `?.`/`orValue`, the URL, IP,
  CIDR, format, sets and lists-extension libraries, the authorizer, two-variable
  comprehensions). An unsupported function is a compile error, never a wrong answer.
- Program.evaluate raises CelEvaluationError for a runtime error (no such key, no such
  overload, division by zero, ...) or past the evaluation budget (limits.MAX_STEPS steps,
  webhook.dra.cel's MAX_VALUE_LENGTH for built strings and lists).
- Variables gives `variables.NAME` evaluated lazily and memoised per activation; to_cel
  converts an object once for many evaluations (Program.evaluate_cel).

The language is webhook.dra.cel's: its parser, checker and interpreter, with cel-go's semantics
(heterogeneous equality, error-absorbing `&&`/`||` and macros), has(), the macros all, exists,
exists_one, filter and map (with two and three arguments), cel.bind, dyn, type conversions,
the strings extension (lowerAscii, upperAscii, replace, split, join, trim, indexOf,
lastIndexOf, substring, charAt, startsWith, endsWith, contains), regex matches/find/findAll on
RE2, Kubernetes' list library (isSorted, sum, min, max, indexOf, lastIndexOf), quantity and
semver libraries. Every name is typed `dyn`, so type errors inside objects are runtime errors.
With `patch_types` (mutations only) `Object{...}` and `JSONPatch{...}` construct messages, which
patch_types.apply_configuration and json_patch turn into an apply configuration and a patch.
"""

from webhook.admission_cel.errors import CelCompileError, CelEvaluationError
from webhook.admission_cel.limits import MAX_EXPRESSION_BYTES, MAX_STEPS
from webhook.admission_cel.program import Program, compile_program
from webhook.admission_cel.values import to_cel, to_python
from webhook.admission_cel.variables import Variables

__all__ = [
    "MAX_EXPRESSION_BYTES",
    "MAX_STEPS",
    "CelCompileError",
    "CelEvaluationError",
    "Program",
    "Variables",
    "compile_program",
    "to_cel",
    "to_python",
]
