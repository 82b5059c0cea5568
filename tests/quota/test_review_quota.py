"""Quota inside review(): checked last, reserved only when admitting, and a stale cache handled by mode."""

from __future__ import annotations

import dataclasses
from typing import Any

import orjson
import pytest

from tests.support.reviews import make_review
from webhook.admission import parse_review
from webhook.config import FailureMode
from webhook.errors import WouldBlock
from webhook.inventory import Inventory, cache_from
from webhook.policy.loader import compile_documents
from webhook.policy.model import PolicySet
from webhook.policy.source import parse_documents
from webhook.quota.gate import LocalGate
from webhook.review import ReviewDeps, ReviewSettings, review

QUOTA = """apiVersion: gpuwebhook.io/v1alpha1
kind: GPUQuota
metadata: {name: team}
spec:
  match: {namespaces: [team]}
  limits: {gpus: 2}
  enforcementAction: deny
"""


def _policies() -> PolicySet:
    compiled, problems = compile_documents(parse_documents(QUOTA, "q.yaml"))
    assert not problems
    return compiled


def _pod(name: str, gpus: str, namespace: str = "team") -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "containers": [{"name": "c", "image": "x", "resources": {"limits": {"nvidia.com/gpu": gpus}}}]
        },
    }


def _deps(**overrides: Any) -> ReviewDeps:
    gate = LocalGate(cache_from(Inventory("test")))
    return ReviewDeps(**{"policies": _policies(), "quota_gate": gate, **overrides})


def _validate(
    deps: ReviewDeps, pod: dict[str, Any], endpoint: str = "validate", dry_run: bool = False
) -> Any:
    return review(parse_review(orjson.dumps(make_review(pod, dry_run=dry_run))), endpoint, deps)  # type: ignore[arg-type]


def test_admissions_are_reserved_until_the_quota_is_full() -> None:
    deps = _deps()
    assert _validate(deps, _pod("a", "1")).allowed
    assert _validate(deps, _pod("b", "1")).allowed
    third = _validate(deps, _pod("c", "1"))
    assert not third.allowed and "2 of 2 are in use" in third.message
    assert third.quota is not None and third.quota["namespace"] == "team"


def test_dry_runs_and_advisory_reviews_reserve_nothing() -> None:
    deps = _deps()
    for _ in range(3):
        assert _validate(deps, _pod("a", "2"), dry_run=True).allowed
        assert _validate(deps, _pod("b", "2"), endpoint="advisory").allowed
    assert _validate(deps, _pod("c", "2")).allowed


def test_a_pod_refused_by_a_built_in_check_is_never_counted() -> None:
    deps = _deps()
    assert not _validate(deps, _pod("bad", "0.5")).allowed
    assert _validate(deps, _pod("good", "2")).allowed


@pytest.mark.parametrize(("mode", "allowed"), [("closed", False), ("open", True)])
def test_a_stale_cache_follows_the_quota_failure_mode(mode: FailureMode, allowed: bool) -> None:
    deps = _deps(
        settings=ReviewSettings(quota_failure_mode=mode), quota_unavailable="the cache is 90s behind"
    )
    decision = _validate(deps, _pod("a", "1"))
    assert decision.allowed is allowed
    text = decision.message if not allowed else decision.warnings[0]
    assert "GPU quota cannot be checked: the cache is 90s behind" in text
    assert decision.code == (503 if not allowed else 200)
    assert _validate(deps, _pod("x", "1", namespace="free")).allowed  # no quota there: nothing to trust


DENY_EVIL = """apiVersion: templates.gatekeeper.sh/v1
kind: ConstraintTemplate
metadata: {name: noevil}
spec:
  crd: {spec: {names: {kind: NoEvil}}}
  targets:
  - target: admission.k8s.gatekeeper.sh
    rego: |
      package noevil
      violation[{"msg": "evil image"}] {
        input.review.object.spec.containers[_].image == "evil"
      }
---
apiVersion: constraints.gatekeeper.sh/v1beta1
kind: NoEvil
metadata: {name: no-evil}
spec:
  match: {kinds: [{apiGroups: [""], kinds: [Pod]}]}
"""


def test_a_review_that_may_not_block_stops_before_rego_and_reserves_nothing() -> None:
    """The server's first try on its event loop: a template without a precheck needs Rego, so the
    review stops there, and the retry on a thread finds the quota's room untouched."""
    compiled, problems = compile_documents(parse_documents(QUOTA + "---\n" + DENY_EVIL, "p.yaml"))
    assert not problems
    deps = _deps(policies=compiled, may_block=False)
    with pytest.raises(WouldBlock):
        _validate(deps, _pod("a", "2"))
    blocking = dataclasses.replace(deps, may_block=True)
    assert _validate(blocking, _pod("another", "2")).allowed  # a's 2 GPUs were never reserved
    assert not _validate(blocking, _pod("b", "1")).allowed
