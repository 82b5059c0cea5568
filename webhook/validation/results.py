"""What evaluating one constraint on one request produced: violations, or why it could not run."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from webhook.types import EnforcementAction
from webhook.validation.gatekeeper import Constraint


@dataclass(frozen=True)
class Violation:
    msg: str
    details: Any = None


@dataclass(frozen=True)
class ConstraintResult:
    """One constraint's verdict on one request. `error` set means it could not be evaluated."""

    constraint: Constraint
    violations: tuple[Violation, ...] = ()
    error: str | None = None
    fail_open: bool = False  # the engine could not be reached and is set to fail open

    @property
    def action(self) -> EnforcementAction:
        return self.constraint.action

    @property
    def error_ignored(self) -> bool:
        return self.error is not None and (self.fail_open or self.constraint.failure_policy == "Ignore")

    @property
    def denies(self) -> bool:
        """True if this result refuses the request: a deny constraint violated, or failed closed."""
        failed_closed = self.error is not None and not self.error_ignored
        return self.action == "deny" and (bool(self.violations) or failed_closed)

    def messages(self) -> list[str]:
        """One line per violation, prefixed with the constraint name, as Gatekeeper reports them."""
        if self.error is not None:
            return [f"[{self.constraint.name}] constraint {self.constraint.id} failed: {self.error}"]
        return [f"[{self.constraint.name}] {v.msg}" for v in self.violations]


def violations_from_rego(value: Any) -> tuple[Violation, ...]:
    """Read a template's `violation` set; raise ValueError if it is not Gatekeeper's shape."""
    if isinstance(value, Mapping):
        # A v0 partial set read by a v1 engine comes back as {"<json>": true}; take the keys.
        value = list(value)
    if not isinstance(value, list):
        raise ValueError(f"violation must be a set of objects, got {type(value).__name__}")
    found = []
    for item in value:
        if isinstance(item, str) and item.startswith("{"):
            item = json.loads(item)
        if not isinstance(item, Mapping) or not isinstance(item.get("msg"), str):
            raise ValueError("each violation must be an object with a string msg")
        found.append(Violation(item["msg"], item.get("details")))
    return tuple(sorted(found, key=lambda v: v.msg))
