"""Records never hold env values, Secret data, foreign annotation values or whole objects.

Each case hides a canary where a secret could sit, then builds the record from a
decision whose every free-text field quotes the canary.
"""

from __future__ import annotations

import base64
import copy
import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.audit.logs import request
from webhook.audit.chain import line_of, seal
from webhook.audit.record import decision_record, json_safe
from webhook.audit.redact import REDACTED
from webhook.decision import Decision, Finding
from webhook.types import KubeObject

CANARY = "canary-Zx81-s3cr3t-token"
B64 = base64.b64encode(CANARY.encode()).decode()


def pod(**spec: Any) -> KubeObject:
    base: KubeObject = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": "trainer",
            "namespace": "team-a",
            "annotations": {"gpuwebhook.io/sharing": "mig"},
        },
        "spec": {"containers": [{"name": "main", "image": "pytorch:2"}]},
    }
    base["spec"].update(spec)
    return base


def with_env(env: list[dict[str, Any]], field: str = "containers") -> KubeObject:
    return pod(**{field: [{"name": "c", "image": "x", "env": env}]})


def annotated(key: str, value: str) -> KubeObject:
    obj = pod()
    obj["metadata"]["annotations"][key] = value
    return obj


def deployment() -> KubeObject:
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "d", "namespace": "team-a"},
        "spec": {
            "template": {
                "metadata": {"annotations": {"token": CANARY}},
                "spec": with_env([{"name": "K", "value": CANARY}])["spec"],
            }
        },
    }


def secret(field: str) -> KubeObject:
    value = B64 if field == "data" else CANARY
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": "s", "namespace": "team-a"},
        field: {"token": value},
    }


CASES: list[tuple[str, KubeObject]] = [
    ("container env value", with_env([{"name": "API_TOKEN", "value": CANARY}])),
    ("init container env value", with_env([{"name": "T", "value": CANARY}], "initContainers")),
    ("ephemeral container env value", with_env([{"name": "T", "value": CANARY}], "ephemeralContainers")),
    (
        "env next to envFrom",
        pod(
            containers=[
                {
                    "name": "c",
                    "envFrom": [{"secretRef": {"name": "creds"}}],
                    "env": [{"name": "A", "value": CANARY}],
                }
            ]
        ),
    ),
    ("NVIDIA_VISIBLE_DEVICES escape", with_env([{"name": "NVIDIA_VISIBLE_DEVICES", "value": CANARY}])),
    ("vault token annotation", annotated("vault.hashicorp.com/agent-inject-token", CANARY)),
    (
        "last-applied-configuration annotation",
        annotated(
            "kubectl.kubernetes.io/last-applied-configuration",
            orjson.dumps(with_env([{"name": "A", "value": CANARY}])).decode(),
        ),
    ),
    ("deployment template", deployment()),
    ("Secret data", secret("data")),
    ("Secret stringData", secret("stringData")),
    (
        "Secret in last-applied-configuration",
        annotated("kubectl.kubernetes.io/last-applied-configuration", orjson.dumps(secret("data")).decode()),
    ),
]


@dataclass(frozen=True)
class QuotaDecision(Decision):
    quota: Any = None


def quoting_decision(allowed: bool) -> Decision:
    text = f"value {CANARY} is not allowed (base64 {B64})"
    return QuotaDecision(
        allowed=allowed,
        code=200 if allowed else 403,
        message="" if allowed else text,
        warnings=(text,) if allowed else (),
        findings=(Finding("no-secrets", "deny" if not allowed else "warn", text),),
        audit_annotations={"reason": text},
        quota={"namespace": "team-a", "note": text, "before": {"gpus": 1}, "after": {"gpus": 2}},
    )


@pytest.mark.parametrize(("case", "obj"), CASES, ids=[c[0] for c in CASES])
@pytest.mark.parametrize("allowed", [True, False])
def test_no_secret_reaches_the_record(case: str, obj: KubeObject, allowed: bool) -> None:
    review = request("uid-1", obj=copy.deepcopy(obj), kind=obj["kind"])
    record = decision_record(
        review,
        quoting_decision(allowed),
        endpoint="validate",
        latency_ms=1.0,
        now=__import__("datetime").datetime.now(__import__("datetime").UTC),
        instance="i",
        policy_version="p",
    )
    line = line_of(seal(record, 1, "0" * 64)).decode()
    assert CANARY not in line, case
    assert B64 not in line, case
    assert REDACTED in line
    assert record["objectDigest"].startswith("sha256:")
    assert review["object"] == obj, "the request must not be modified"


def test_only_our_own_annotation_values_are_kept() -> None:
    obj = annotated("example.com/owner", "someone")
    record = decision_record(
        request("u", obj=obj),
        Decision(allowed=True),
        endpoint="mutate",
        latency_ms=0.5,
        now=__import__("datetime").datetime.now(__import__("datetime").UTC),
        instance="i",
        policy_version="p",
    )
    assert record["annotations"] == {"gpuwebhook.io/sharing": "mig"}
    assert "someone" not in orjson.dumps(record).decode()


def test_patch_paths_are_kept_but_not_values() -> None:
    decision = Decision(
        allowed=True,
        patch=(
            {"op": "add", "path": "/spec/containers/0/env/-", "value": {"name": "X", "value": CANARY}},
            {"op": "move", "path": "/a", "from": "/b"},
        ),
    )
    record = decision_record(
        request("u", obj=pod()),
        decision,
        endpoint="mutate",
        latency_ms=0.5,
        now=__import__("datetime").datetime.now(__import__("datetime").UTC),
        instance="i",
        policy_version="p",
    )
    assert record["patch"] == [
        {"op": "add", "path": "/spec/containers/0/env/-"},
        {"op": "move", "path": "/a", "from": "/b"},
    ]
    assert CANARY not in orjson.dumps(record).decode()


def _reference_json_safe(value: Any, scrub: Any, depth: int = 0) -> Any:
    """json_safe as first written, without its exact-type fast path: the rendering must not change."""
    if depth > 6:
        return None
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        value = {f.name: getattr(value, f.name) for f in dataclasses.fields(value)}
    if isinstance(value, Mapping):
        return {str(k): _reference_json_safe(v, scrub, depth + 1) for k, v in list(value.items())[:100]}
    if isinstance(value, list | tuple | set | frozenset):
        return [_reference_json_safe(v, scrub, depth + 1) for v in list(value)[:100]]
    if value is None or isinstance(value, bool | int):
        return value
    if isinstance(value, float):
        return round(value, 4)
    if isinstance(value, str):
        return scrub(value)
    try:
        return round(float(value), 4)
    except (TypeError, ValueError):
        return scrub(str(value))


@dataclass(frozen=True)
class _Figure:
    name: str
    amount: Fraction


_quota_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False)
    | st.text(max_size=12)
    | st.fractions(max_denominator=8)
    | st.builds(_Figure, st.text(max_size=6), st.fractions(max_denominator=8)),
    lambda children: (
        st.lists(children, max_size=120)
        | st.tuples(children, children)
        | st.dictionaries(st.text(max_size=6) | st.integers(), children, max_size=5)
    ),
    max_leaves=150,
)


def _scrub(text: str) -> str:
    return text.replace("a", "[redacted]")


def _nested(depth: int) -> Any:
    value: Any = "a leaf"
    for level in range(depth):
        value = [value] if level % 2 else {"k": value}
    return value


# The bounds Hypothesis rarely reaches: long lists and maps, deep nesting.
BOUNDS = [
    ("long list", list(range(150))),
    ("long map", {f"k{n}": n for n in range(150)}),
    ("long tuple", tuple(range(150))),
    ("deep", _nested(10)),
    ("dataclass", _Figure("a", Fraction(1, 3))),
]


@pytest.mark.parametrize("value", [c[1] for c in BOUNDS], ids=[c[0] for c in BOUNDS])
def test_json_safe_keeps_its_bounds(value: Any) -> None:
    assert json_safe(value, _scrub) == _reference_json_safe(value, _scrub)


@given(value=_quota_values)
def test_json_safe_renders_as_the_general_walk_does(value: Any) -> None:
    assert json_safe(value, _scrub) == _reference_json_safe(value, _scrub)
