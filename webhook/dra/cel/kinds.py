"""CEL types as Kubernetes' type checker names them in its messages.

The compile-time checker infers these names for syntax nodes, and the evaluator gives them to
values in its error messages, so both say `no such overload` about the same types. The device's
own maps keep their declared shapes, so that selecting into them infers what Kubernetes infers.
"""

from __future__ import annotations

from typing import Final

BOOL, INT, UINT, DOUBLE, STRING, BYTES = "bool", "int", "uint", "double", "string", "bytes"
NULL, LIST, MAP, TYPE, DYN = "null_type", "list", "map", "type", "dyn"
QUANTITY, SEMVER = "kubernetes.Quantity", "kubernetes.Semver"
TIMESTAMP, DURATION = "google.protobuf.Timestamp", "google.protobuf.Duration"
DEVICE = "kubernetes.DRADevice"
ATTRIBUTES = "map(string, map(string, dyn))"
ATTRIBUTE_DOMAIN = "map(string, dyn)"
CAPACITY = "map(string, map(string, kubernetes.Quantity))"
CAPACITY_DOMAIN = "map(string, kubernetes.Quantity)"
MAPS: Final = frozenset({MAP, ATTRIBUTES, ATTRIBUTE_DOMAIN, CAPACITY, CAPACITY_DOMAIN})
NUMBERS: Final = frozenset({INT, UINT, DOUBLE})
ORDERED: Final = NUMBERS | {STRING, BYTES, BOOL, TIMESTAMP, DURATION}
# The types null is not assignable to (cel-go checker/types.go internalIsAssignableNull): every
# other type but dyn (timestamps, durations, messages, opaque types) is nullable.
NOT_NULLABLE: Final = NUMBERS | MAPS | {BOOL, STRING, BYTES, LIST, TYPE}
# The identifiers that name a type, usable as values (`type(x) == int`).
TYPE_NAMES: Final = frozenset(
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
# What each arithmetic operator (by its grammar rule) takes.
ARITHMETIC: Final = {
    "addition_add": NUMBERS | {STRING, BYTES, LIST, TIMESTAMP, DURATION},
    "addition_sub": NUMBERS | {TIMESTAMP, DURATION},
    "multiplication_mul": NUMBERS,
    "multiplication_div": NUMBERS,
    "multiplication_mod": frozenset({INT, UINT}),
}
