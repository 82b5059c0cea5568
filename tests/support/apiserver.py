"""The checks kube-apiserver applies to a webhook's reply, and how it applies a patch.

Follows k8s.io/apiserver's admission webhook dispatchers: same apiVersion and kind,
matching uid, patchType only with patch and only JSONPatch, no patch from a
validating webhook, warnings as strings, audit annotation keys as qualified names.
"""

from __future__ import annotations

import base64
import copy
import re
from typing import Any

import jsonpatch
import orjson

from tests.support.tlsclient import Reply

QUALIFIED_NAME = re.compile(
    r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?"
    r"[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$"
)


def check_reply(review: dict[str, Any], reply: Reply, endpoint: str) -> dict[str, Any]:
    """Assert the reply is one kube-apiserver accepts; return its `response`."""
    assert reply.status == 200, (reply.status, reply.body[:300])
    assert reply.headers.get("content-type", "").startswith("application/json")
    document = orjson.loads(reply.body)
    assert document["apiVersion"] == review["apiVersion"]
    assert document["kind"] == "AdmissionReview"
    response = document["response"]
    assert response["uid"] == review["request"]["uid"]
    assert isinstance(response["allowed"], bool)
    _check_patch(response, endpoint)
    _check_status(response)
    _check_warnings(response)
    _check_audit_annotations(response)
    return dict(response)


def apply_patch(obj: dict[str, Any], response: dict[str, Any]) -> dict[str, Any]:
    """The object as the apiserver stores it after this webhook."""
    if "patch" not in response:
        return copy.deepcopy(obj)
    operations = orjson.loads(base64.b64decode(response["patch"]))
    result = jsonpatch.apply_patch(obj, operations, in_place=False)
    assert isinstance(result, dict)
    return result


def _check_patch(response: dict[str, Any], endpoint: str) -> None:
    has_patch, has_type = "patch" in response, "patchType" in response
    assert has_patch == has_type, "patch and patchType must come together"
    if not has_patch:
        return
    assert endpoint == "mutate", "a validating webhook must not return a patch"
    assert response["patchType"] == "JSONPatch"
    operations = orjson.loads(base64.b64decode(response["patch"], validate=True))
    assert isinstance(operations, list) and operations, "an empty patch must be omitted"
    for operation in operations:
        assert operation["op"] in {"add", "remove", "replace", "move", "copy", "test"}
        assert isinstance(operation["path"], str)


def _check_status(response: dict[str, Any]) -> None:
    if response["allowed"]:
        return
    status = response["status"]
    assert status["code"] >= 400
    assert isinstance(status["message"], str) and status["message"]


def _check_warnings(response: dict[str, Any]) -> None:
    warnings = response.get("warnings", [])
    assert isinstance(warnings, list)
    assert all(isinstance(w, str) and len(w) < 120 for w in warnings)
    assert sum(len(w) for w in warnings) <= 4096


def _check_audit_annotations(response: dict[str, Any]) -> None:
    for key, value in response.get("auditAnnotations", {}).items():
        assert QUALIFIED_NAME.match(key), key
        assert isinstance(value, str)
