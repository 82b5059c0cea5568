"""The request path against a straightforward review(), on generated GPU pods.

What the server runs is review() with its shortcuts: the size bounds the heavy-lane estimate
measured (webhook.measured), mutators writing through a draft (webhook.mutation.draft), the
security bundle's prechecks clearing constraints without Rego, the quota's integer tallies and
running usage, and the audit record built from the decision's facts. The reference is the same
review() without them: each object measured where review() needs it, the clone-and-diff mutation
engine (tests/mutation/old_engine), every applicable constraint evaluated by Rego, and the record
as the worker used to build it (tests/audit/reference_record.py). On every generated pod, both
give the same /mutate decision and patch, the same /validate decision for the pod /mutate made,
and the same audit records.
"""

from __future__ import annotations

import copy
import dataclasses
import datetime as dt
import shutil
from pathlib import Path
from typing import Any, cast

import orjson
import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.audit.reference_record import reference_record
from tests.mutation.old_engine.engine import mutate_object as old_mutate_object
from tests.mutation.test_draft_equivalence import gpu_objects
from tests.support.reviews import make_review
from webhook import review as review_module
from webhook.audit.record import decision_record
from webhook.decision import Decision
from webhook.inventory import EMPTY, cache_from
from webhook.measured import Measured
from webhook.offline import offline_deps
from webhook.policy.engines.regopy import RegoEngine
from webhook.policy.loader import load_directory, single_parameter_sets
from webhook.policy.model import PolicySet
from webhook.quota.gate import LocalGate
from webhook.review import ReviewDeps, review
from webhook.types import AdmissionRequest, Endpoint
from webhook.validation.gatekeeper import Constraint, ConstraintTemplate

REPO = Path(__file__).resolve().parents[2]
NAMESPACES = ("bench-mig", "team")  # the MIG policy's namespace, and one no sharing policy selects
QUOTA = """apiVersion: gpuwebhook.io/v1alpha1
kind: GPUQuota
metadata: {name: tight}
spec:
  match: {namespaces: ["bench-*", "team"]}
  limits: {gpus: 3, gpuMemory: 100Gi}
  enforcementAction: deny
"""
NOW = dt.datetime(2026, 12, 1, tzinfo=dt.UTC)
FIELDS = tuple(f.name for f in dataclasses.fields(Decision) if f.name not in ("object", "own_warnings"))


def _rego_only(templates: list[ConstraintTemplate], constraints: list[Constraint]) -> RegoEngine:
    fixed = single_parameter_sets(constraints)
    return RegoEngine.compile(templates, isolated=True, fixed=fixed, prechecks=False)


@pytest.fixture(scope="module")
def policy_sets(tmp_path_factory: pytest.TempPathFactory) -> tuple[PolicySet, PolicySet]:
    """The benchmark's reference setup (the security bundle, a MIG policy with tolerations,
    affinity and a checkpoint sidecar, a quota), compiled with and without prechecks."""
    directory = tmp_path_factory.mktemp("policies")
    shutil.copytree(REPO / "policies" / "security", directory / "security")
    shutil.copy(REPO / "bench" / "policies" / "mig.yaml", directory / "mig.yaml")
    (directory / "quota.yaml").write_text(QUOTA)
    return load_directory(directory), load_directory(directory, _rego_only)  # type: ignore[arg-type]


def _deps(policies: PolicySet) -> ReviewDeps:
    """A fresh cluster state for each path: the quota reserves what it admits."""
    deps = offline_deps(policies, EMPTY)
    return dataclasses.replace(deps, quota_gate=LocalGate(cache_from(EMPTY)))


def _request(obj: dict[str, Any], namespace: str) -> tuple[AdmissionRequest, bytes]:
    placed = copy.deepcopy(obj)
    placed["metadata"]["namespace"] = namespace
    body = orjson.dumps(make_review(placed, namespace=namespace, uid="u-1"))
    return cast(AdmissionRequest, orjson.loads(body)["request"]), body


def _served(request: AdmissionRequest, body: bytes, endpoint: Endpoint, deps: ReviewDeps) -> Decision:
    """As the server runs it: the heavy-lane estimate first, then review() given its measure."""
    measured = Measured()
    measured.is_heavy(request, len(body))
    return review(request, endpoint, dataclasses.replace(deps, within_bounds=measured.checked(request)))


def _record(request: AdmissionRequest, decision: Decision, endpoint: Endpoint, *, reference: bool) -> Any:
    build = reference_record if reference else decision_record
    record = build(
        request, decision, endpoint=endpoint, latency_ms=1.0, now=NOW, instance="i", policy_version="v"
    )
    if not (decision.message or decision.findings):
        # The one rule changed on purpose: the webhook's own warnings are not scanned for secrets
        # (and what else the record holds is then clipped, not scrubbed). The decisions' own
        # fields are compared whole above.
        for key in ("warnings", "auditAnnotations", "quota"):
            record.pop(key, None)
    return record


def _same(new: Decision, old: Decision) -> None:
    assert {f: getattr(new, f) for f in FIELDS} == {f: getattr(old, f) for f in FIELDS}
    assert new.object == old.object


def _validation(obj: dict[str, Any], mutated: Decision, namespace: str) -> tuple[AdmissionRequest, bytes]:
    admitted = mutated.object if mutated.allowed and mutated.object is not None else obj
    return _request(admitted, namespace)


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(obj=gpu_objects(), namespace=st.sampled_from(NAMESPACES))
def test_the_served_path_equals_the_reference_review(
    policy_sets: tuple[PolicySet, PolicySet], obj: dict[str, Any], namespace: str
) -> None:
    fast, rego_only = policy_sets
    new_deps, old_deps = _deps(fast), _deps(rego_only)
    request, body = _request(obj, namespace)
    new = _served(request, body, "mutate", new_deps)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(review_module, "mutate_object", old_mutate_object)
        old = review(copy.deepcopy(request), "mutate", old_deps)
    _same(new, old)
    assert _record(request, new, "mutate", reference=False) == _record(request, old, "mutate", reference=True)

    request, body = _validation(obj, new, namespace)
    new = _served(request, body, "validate", new_deps)
    old = review(copy.deepcopy(request), "validate", old_deps)
    _same(new, old)
    new_record = _record(request, new, "validate", reference=False)
    assert new_record == _record(request, old, "validate", reference=True)


def test_the_comparison_sees_the_benchmarks_pod_rewritten_and_counted(
    policy_sets: tuple[PolicySet, PolicySet],
) -> None:
    """The reference setup does act on a GPU pod in its namespace: a patch, and quota figures."""
    obj = yaml.safe_load((REPO / "examples" / "pod-gpu-training.yaml").read_text())
    deps = _deps(policy_sets[0])
    request, body = _request(obj, "bench-mig")
    mutated = _served(request, body, "mutate", deps)
    assert mutated.allowed and mutated.patch and mutated.sharing_mode == "mig"
    request, body = _validation(obj, mutated, "bench-mig")
    validated = _served(request, body, "validate", deps)
    assert validated.allowed and validated.quota is not None and validated.gpus
