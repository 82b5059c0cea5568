"""The journal helper's record (facts sent over the socket, rebuilt from the request body) is the
record the worker used to build, for generated requests and decisions (tests/audit/reference_record.py).

One definition changed on purpose: the webhook's own warnings (Decision.own_warnings) neither
are scanned for secrets nor make the record scan the request. The generated own warnings quote
no secret, so the reference, which scans them, leaves them as they are; a decision whose only
free text is own warnings has its audit annotations and quota figures clipped, not scrubbed,
as the reference does for a decision without warnings. The table below pins the change.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import replace
from fractions import Fraction
from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.audit.reference_record import reference_record
from webhook.admission import parse_review
from webhook.audit.facts import decode_record, encode_facts
from webhook.audit.record import decision_record
from webhook.decision import Decision, Finding
from webhook.types import AdmissionRequest, Endpoint

# Secrets come from an alphabet that own warnings never use, so an own warning quotes none.
SECRETS = st.text(alphabet="ABCDEFGHJKLMNPQRSTUVWXYZ0123456789=+/", min_size=4, max_size=12)
OWN_TEXT = st.text(alphabet="abcdefghijklmnopqrstuvwxyz ->:.()", min_size=1, max_size=60)
TEXT = st.text(max_size=40)
NAMES = st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789-", min_size=1, max_size=20)
NOW = dt.datetime(2025, 3, 1, 12, 0, 0, 123456, tzinfo=dt.UTC)


@st.composite
def pods(draw: st.DrawFn) -> dict[str, Any]:
    secrets = draw(st.lists(SECRETS, max_size=4))
    containers = [
        {
            "name": draw(NAMES),
            "image": "trainer:1",
            "env": [{"name": f"E{i}", "value": value} for i, value in enumerate(secrets)],
            "resources": {"limits": {"nvidia.com/gpu": draw(st.integers(0, 8))}},
        }
        for _ in range(draw(st.integers(1, 3)))
    ]
    annotations = draw(st.dictionaries(st.sampled_from(["a.io/x", "b.io/y", "gpuwebhook.io/mode"]), SECRETS))
    if draw(st.booleans()):
        applied = {"kind": "Pod", "spec": {"containers": [{"env": [{"value": draw(SECRETS)}]}]}}
        annotations["kubectl.kubernetes.io/last-applied-configuration"] = orjson.dumps(applied).decode()
    metadata: dict[str, Any] = {"namespace": draw(NAMES), "annotations": annotations}
    metadata["name" if draw(st.booleans()) else "generateName"] = draw(NAMES)
    return {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": {"containers": containers}}


@st.composite
def requests(draw: st.DrawFn) -> AdmissionRequest:
    pod = draw(pods())
    operation = draw(st.sampled_from(["CREATE", "UPDATE", "DELETE"]))
    request: dict[str, Any] = {
        "uid": draw(NAMES),
        "kind": {"group": "", "version": "v1", "kind": "Pod"},
        "resource": {"group": "", "version": "v1", "resource": "pods"},
        "namespace": pod["metadata"]["namespace"],
        "name": pod["metadata"].get("name", ""),
        "operation": operation,
        "userInfo": {"username": draw(NAMES), "groups": draw(st.lists(NAMES, max_size=3))},
        "object": None if operation == "DELETE" else pod,
        "dryRun": draw(st.booleans()),
    }
    if operation != "CREATE":
        request["oldObject"] = draw(pods())
    if draw(st.booleans()):
        request["subResource"] = "status"
    return request  # type: ignore[return-value]


def quoting(request: AdmissionRequest) -> st.SearchStrategy[str]:
    """Policy-written text: anything, sometimes quoting a value the request carries."""
    found = [
        item["value"]
        for pod in (request.get("object"), request.get("oldObject"))
        if pod
        for container in pod["spec"]["containers"]
        for item in container["env"]
    ]
    if not found:
        return TEXT
    return st.one_of(TEXT, st.builds(lambda a, s, b: a + s + b, TEXT, st.sampled_from(found), TEXT))


FIGURES: st.SearchStrategy[Any] = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**63), 2**63 - 1)
    | st.floats(allow_nan=False, allow_infinity=False)
    | TEXT
    | st.fractions(max_denominator=100).map(Fraction),
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.dictionaries(TEXT, inner, max_size=4)
        | st.tuples(inner, inner)
        | st.frozensets(st.integers(0, 9), max_size=3)
    ),
    max_leaves=20,
)


@st.composite
def decisions(draw: st.DrawFn, request: AdmissionRequest) -> Decision:
    policy_text = quoting(request)
    own = draw(st.lists(OWN_TEXT, max_size=3, unique=True))
    policy_warnings = draw(st.lists(policy_text, max_size=2))
    warnings = tuple(dict.fromkeys(draw(st.permutations(own + policy_warnings))))
    findings = draw(
        st.lists(
            st.builds(Finding, NAMES, st.sampled_from(["deny", "warn", "dryrun"]), policy_text), max_size=3
        )
    )
    patch = draw(
        st.lists(
            st.fixed_dictionaries(
                {"op": st.sampled_from(["add", "replace", "remove"]), "path": TEXT},
                optional={"value": FIGURES, "from": TEXT},
            ),
            max_size=4,
        )
    )
    return Decision(
        allowed=draw(st.booleans()),
        code=draw(st.sampled_from([200, 403, 413, 500, 503])),
        message=draw(st.one_of(st.just(""), policy_text)),
        warnings=warnings,
        own_warnings=frozenset(own),
        patch=tuple(patch),  # type: ignore[arg-type]
        audit_annotations=draw(st.dictionaries(NAMES, policy_text, max_size=2)),
        findings=tuple(findings),
        sharing_mode=draw(st.sampled_from([None, "mig", "time-slicing"])),
        quota=draw(st.none() | st.dictionaries(TEXT, FIGURES, max_size=4)),
        gpus=draw(st.none() | st.fractions(min_value=0, max_value=64, max_denominator=7)),
        unreviewed=draw(st.sampled_from([None, "overload", "timeout", "internal"])),
    )


def by_the_helper(
    request: AdmissionRequest, decision: Decision, endpoint: Endpoint, latency_ms: float
) -> Any:
    """What the helper builds: the facts as sent, and the request as parsed from the body sent
    (which review() read through admission.parse_review: the same dict)."""
    body = orjson.dumps({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": request})
    facts = encode_facts(
        decision, endpoint=endpoint, latency_ms=latency_ms, now=NOW, instance="pod-0/7", policy_version="p1"
    )
    assert parse_review(body) == request  # what review() saw is what the helper reads
    return decode_record(facts, orjson.loads(body)["request"])


@settings(max_examples=300, deadline=None)
@given(
    st.data(),
    requests(),
    st.sampled_from(["mutate", "validate"]),
    st.floats(min_value=0, max_value=10_000, allow_nan=False),
)
def test_the_helpers_record_is_the_straightforward_one(
    data: st.DataObject, request: AdmissionRequest, endpoint: Endpoint, latency_ms: float
) -> None:
    decision = data.draw(decisions(request))
    fields: dict[str, Any] = {
        "endpoint": endpoint,
        "latency_ms": latency_ms,
        "now": NOW,
        "instance": "pod-0/7",
        "policy_version": "p1",
    }
    expected = reference_record(request, decision, **fields)
    if not policy_written(decision):
        # Only own warnings: no walk, so the audit annotations and quota figures are clipped, as
        # the reference does for a decision without any warning.
        unscanned = reference_record(request, replace(decision, warnings=()), **fields)
        expected.update({key: unscanned[key] for key in ("auditAnnotations", "quota") if key in unscanned})
    assert by_the_helper(request, decision, endpoint, latency_ms) == expected


def policy_written(decision: Decision) -> bool:
    """Whether the decision carries text a policy wrote, which makes the record scan the request."""
    return bool(decision.message or decision.findings or set(decision.warnings) - decision.own_warnings)


def test_quota_figures_json_cannot_carry_are_left_to_the_worker() -> None:
    """A key that is not a string: the recorder builds that record itself (recorder._write)."""
    figures: Any = {1: "one"}
    decision = Decision(allowed=True, quota=figures)
    with pytest.raises(TypeError):
        encode_facts(decision, endpoint="validate", latency_ms=1.0, now=NOW, instance="i", policy_version="p")


SECRET = "S3CR3T-VALUE"
OWN_OR_NOT = [
    ("a warning of ours quotes it as it is", frozenset({f"asked {SECRET}"}), f"asked {SECRET}"),
    ("a policy's warning is scrubbed", frozenset(), "asked [redacted]"),
]


@pytest.mark.parametrize(("case", "own", "recorded"), OWN_OR_NOT, ids=[c[0] for c in OWN_OR_NOT])
def test_only_policy_written_warnings_are_scanned_for_secrets(
    case: str, own: frozenset[str], recorded: str
) -> None:
    pod = {"kind": "Pod", "metadata": {"name": "p"}, "spec": {"containers": [{"env": [{"value": SECRET}]}]}}
    request: Any = {
        "uid": "u",
        "kind": {"group": "", "version": "v1", "kind": "Pod"},
        "operation": "CREATE",
        "object": pod,
    }
    decision = Decision(allowed=True, warnings=(f"asked {SECRET}",), own_warnings=own)
    fields: dict[str, Any] = {
        "endpoint": "mutate",
        "latency_ms": 1.0,
        "now": NOW,
        "instance": "i",
        "policy_version": "p",
    }
    assert decision_record(request, decision, **fields)["warnings"] == [recorded]
    assert by_the_helper(request, decision, "mutate", 1.0)["warnings"] == [recorded]
