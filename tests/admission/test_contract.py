"""The admission contract, checked the way kube-apiserver checks it, without HTTP."""

from __future__ import annotations

from typing import Any

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.support.apiserver import apply_patch, check_reply
from tests.support.reviews import load_example, make_review
from tests.support.tlsclient import Reply
from webhook.admission import encode_response, parse_review
from webhook.decision import (
    WARNING_MAX_CHARS,
    WARNINGS_TOTAL_MAX_CHARS,
    Decision,
    clamp_warnings,
    deny,
)
from webhook.policy.model import PolicySet
from webhook.review import ReviewDeps, review
from webhook.types import Endpoint, PatchOperation

PATCH: tuple[PatchOperation, ...] = ({"op": "add", "path": "/metadata/labels/gpu", "value": "shared"},)
GPU_POD = load_example("pod-gpu-training.yaml")


def _reply(review_doc: dict[str, Any], decision: Decision, endpoint: Endpoint) -> dict[str, Any]:
    body = encode_response(review_doc["request"]["uid"], decision, endpoint)
    return check_reply(review_doc, Reply(200, {"content-type": "application/json"}, body), endpoint)


CASES = [
    # (name, decision, endpoint, expected keys present, expected keys absent)
    (
        "allow",
        Decision(allowed=True),
        "validate",
        {"uid", "allowed"},
        {"patch", "patchType", "status"},
    ),
    (
        "mutate with patch",
        Decision(allowed=True, patch=PATCH),
        "mutate",
        {"patch", "patchType"},
        {"status"},
    ),
    (
        "validate never patches",
        Decision(allowed=True, patch=PATCH),
        "validate",
        set(),
        {"patch", "patchType"},
    ),
    (
        "empty patch is omitted",
        Decision(allowed=True, patch=()),
        "mutate",
        set(),
        {"patch", "patchType"},
    ),
    ("deny carries status", deny("no GPUs for you"), "validate", {"status"}, {"patch"}),
    (
        "deny drops the patch",
        Decision(allowed=False, code=403, message="x", patch=PATCH),
        "mutate",
        {"status"},
        {"patch", "patchType"},
    ),
    ("warnings", Decision(allowed=True, warnings=("careful",)), "validate", {"warnings"}, set()),
    (
        "audit annotations",
        Decision(allowed=True, audit_annotations={"gpu-policy": "p1"}),
        "mutate",
        {"auditAnnotations"},
        set(),
    ),
]


@pytest.mark.parametrize(
    ("decision", "endpoint", "present", "absent"), [c[1:] for c in CASES], ids=[c[0] for c in CASES]
)
def test_response_shape(decision: Decision, endpoint: Endpoint, present: set[str], absent: set[str]) -> None:
    response = _reply(make_review(GPU_POD), decision, endpoint)
    assert present <= response.keys()
    assert not absent & response.keys()


def test_denial_status_has_code_reason_and_message() -> None:
    response = _reply(make_review(GPU_POD), deny("GPU quota exceeded"), "validate")
    assert response["status"] == {
        "code": 403,
        "reason": "Forbidden",
        "message": "GPU quota exceeded",
    }


def test_the_patch_applies_to_the_object() -> None:
    doc = make_review(GPU_POD)
    response = _reply(doc, Decision(allowed=True, patch=PATCH), "mutate")
    assert apply_patch(GPU_POD, response)["metadata"]["labels"]["gpu"] == "shared"


@given(st.lists(st.text(max_size=400), max_size=80))
def test_warnings_always_fit_the_apiserver_limits(warnings: list[str]) -> None:
    kept = clamp_warnings(warnings)
    assert all(0 < len(w) < WARNING_MAX_CHARS and w.isprintable() for w in kept)
    assert sum(len(w) for w in kept) <= WARNINGS_TOTAL_MAX_CHARS
    assert len(set(kept)) == len(kept)


@given(st.text(max_size=10_000))
def test_denial_messages_are_printable_lines(message: str) -> None:
    decision = deny(message)
    assert decision.message and all(line.isprintable() and line for line in decision.message.split("\n"))
    assert len(decision.message) <= 4096
    assert decision.code >= 400


def test_each_reason_keeps_its_own_line() -> None:
    assert deny("[a] first\n[b] second\r\n").message == "[a] first\n[b] second"


REVIEWS = [
    ("gpu pod", load_example("pod-gpu-training.yaml")),
    ("cpu pod", load_example("pod-cpu.yaml")),
]


@pytest.mark.parametrize("endpoint", ["mutate", "validate"])
@pytest.mark.parametrize("obj", [r[1] for r in REVIEWS], ids=[r[0] for r in REVIEWS])
def test_review_answers_every_pod_within_the_contract(obj: dict[str, Any], endpoint: Endpoint) -> None:
    doc = make_review(obj)
    request = parse_review(orjson.dumps(doc))
    decision = review(request, endpoint, ReviewDeps(policies=PolicySet()))
    response = _reply(doc, decision, endpoint)
    assert response["allowed"] is True
    if endpoint == "validate":
        assert "patch" not in response
        return
    # With no policy, the only change is `void` for the containers that get no GPU.
    patched = apply_patch(obj, response) if "patch" in response else obj
    for container in patched["spec"]["containers"]:
        env = {e["name"]: e.get("value") for e in container.get("env", [])}
        gets_gpu = "nvidia.com/gpu" in container.get("resources", {}).get("limits", {})
        assert (env.get("NVIDIA_VISIBLE_DEVICES") == "void") is not gets_gpu, container["name"]
    assert {k: v for k, v in patched.items() if k != "spec"} == {k: v for k, v in obj.items() if k != "spec"}
