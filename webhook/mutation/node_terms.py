"""Whether a pod's own node constraints admit a node, judged on the few labels we know. Pure.

We know a node's name (`kubernetes.io/hostname`, and `metadata.name` for
matchFields) and, from DCGM, its GPU product (`nvidia.com/gpu.product`). A
requirement on any other key cannot be judged here and is taken to hold: the
scheduler filters on it anyway, and a preference toward a node it rules out is
simply ignored. The semantics are Kubernetes': nodeSelector entries and the
expressions of one term are ANDed, terms are ORed, and an empty term matches nothing.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

HOSTNAME = "kubernetes.io/hostname"
PRODUCT = "nvidia.com/gpu.product"
NODE_NAME_FIELD = "metadata.name"
REQUIRED = "requiredDuringSchedulingIgnoredDuringExecution"


def node_facts(node: str, products: tuple[str, ...]) -> dict[str, str]:
    facts = {HOSTNAME: node}
    if len(products) == 1:  # a node with mixed GPUs has no single product label
        facts[PRODUCT] = products[0]
    return facts


def admits(spec: Mapping[str, Any], node: str, facts: Mapping[str, str]) -> bool:
    if spec.get("nodeName") not in (None, "", node):
        return False
    selector = spec.get("nodeSelector")
    if isinstance(selector, dict) and any(k in facts and facts[k] != v for k, v in selector.items()):
        return False
    terms = _required_terms(spec)
    if terms is None:
        return True
    fields = {NODE_NAME_FIELD: node}
    return any(_term_holds(term, facts, fields) for term in terms)


def _required_terms(spec: Mapping[str, Any]) -> list[Any] | None:
    affinity = spec.get("affinity")
    node_affinity = affinity.get("nodeAffinity") if isinstance(affinity, dict) else None
    required = node_affinity.get(REQUIRED) if isinstance(node_affinity, dict) else None
    terms = required.get("nodeSelectorTerms") if isinstance(required, dict) else None
    return terms if isinstance(terms, list) and terms else None


def _term_holds(term: Any, facts: Mapping[str, str], fields: Mapping[str, str]) -> bool:
    if not isinstance(term, dict):
        return False
    expressions = term.get("matchExpressions") or []
    field_expressions = term.get("matchFields") or []
    if not expressions and not field_expressions:
        return False
    return all(_holds(e, facts) for e in expressions) and all(_holds(e, fields) for e in field_expressions)


def _holds(expression: Any, facts: Mapping[str, str]) -> bool:
    if not isinstance(expression, dict) or expression.get("key") not in facts:
        return True
    value = facts[expression["key"]]
    operator, values = expression.get("operator"), expression.get("values") or []
    if operator == "In":
        return value in values
    if operator == "NotIn":
        return value not in values
    if operator == "Exists":
        return True
    if operator == "DoesNotExist":
        return False
    return _compare(operator, value, values)


def _compare(operator: Any, value: str, values: list[Any]) -> bool:
    try:
        have, bound = int(value), int(values[0])
    except (ValueError, IndexError, TypeError):
        return operator not in ("Gt", "Lt")  # Gt/Lt on a non-integer never matches
    return have > bound if operator == "Gt" else have < bound if operator == "Lt" else True
