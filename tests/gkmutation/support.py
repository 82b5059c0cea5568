"""Mutation policies compiled through the real loader, and requests through review()."""

from __future__ import annotations

from typing import Any, cast

import yaml

from tests.support.reviews import make_review
from webhook.decision import Decision
from webhook.errors import PolicyError
from webhook.policy.loader import load_sources
from webhook.policy.model import PolicySet
from webhook.review import ReviewDeps, review
from webhook.types import AdmissionRequest


def policies(*documents: str) -> PolicySet:
    return load_sources([("mutations.yaml", "\n---\n".join(documents).encode())])


def problems(*documents: str) -> list[str]:
    try:
        policies(*documents)
    except PolicyError as e:
        return [str(p) for p in e.problems]
    raise AssertionError("the documents loaded")


def mutated(policy_set: PolicySet, obj: dict[str, Any], **request: Any) -> Decision:
    made = cast(AdmissionRequest, make_review(obj, **request)["request"])
    return review(made, "mutate", ReviewDeps(policies=policy_set))


def assign(name: str, location: str, parameters: str, *, kind: str = "Pod", extra: str = "") -> str:
    group = "" if kind in ("Pod", "Namespace") else "apps"
    return f"""apiVersion: mutations.gatekeeper.sh/v1
kind: Assign
metadata: {{name: {name}}}
spec:
  applyTo: [{{groups: ["{group}"], versions: ["v1"], kinds: ["{kind}"]}}]
  location: "{location}"
  parameters: {parameters}
{extra}"""


def pod(**spec: Any) -> dict[str, Any]:
    made: dict[str, Any] = yaml.safe_load(
        "apiVersion: v1\nkind: Pod\nmetadata: {name: p, namespace: default}\n"
        "spec: {containers: [{name: main, image: nginx}]}"
    )
    return made | ({"spec": spec} if spec else {})
