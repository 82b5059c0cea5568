"""AdmissionReview admission.k8s.io/v1 on the wire: parse untrusted bodies, encode responses.

Pure: bytes in, typed dicts out. Every shape check that kube-apiserver relies on
lives here, so `review()` can trust the request it is given.
"""

from __future__ import annotations

import base64
from typing import Any, cast

import orjson

from webhook.decision import Decision
from webhook.errors import MalformedReview
from webhook.types import (
    ADMISSION_API_VERSION,
    ADMISSION_KIND,
    AdmissionRequest,
    AdmissionResponse,
    AdmissionReviewResponse,
    Endpoint,
)

MAX_DEPTH = 128
OPERATIONS = frozenset({"CREATE", "UPDATE", "DELETE", "CONNECT"})
_OPTIONAL_STRINGS = ("name", "namespace", "subResource")
_OPTIONAL_OBJECTS = ("oldObject", "options")
_GVK_KEYS = ("group", "version", "kind")
_GVR_KEYS = ("group", "version", "resource")


def parse_review(body: bytes) -> AdmissionRequest:
    """Decode and shape-check an AdmissionReview; raise MalformedReview with one clear line."""
    try:
        document = orjson.loads(body)
    except orjson.JSONDecodeError as e:
        raise MalformedReview(f"body is not valid JSON: {e}") from e
    _require(isinstance(document, dict), "body must be a JSON object")
    _check_envelope(document)
    # Each level of nesting opens a bracket: a body with few brackets cannot be too deep,
    # and counting them in C is about 20 times cheaper than walking the decoded tree.
    shallow = body.count(b"{") + body.count(b"[") <= MAX_DEPTH
    return check_request(document.get("request"), depth_checked=shallow)


def check_request(request: Any, *, depth_checked: bool = False) -> AdmissionRequest:
    """Shape-check an AdmissionRequest that arrived by any route (HTTP or a file)."""
    _require(isinstance(request, dict), "request must be an object")
    _check_request(request)
    if not depth_checked:
        _check_depth(request)
    return cast(AdmissionRequest, request)


def _check_envelope(document: dict[str, Any]) -> None:
    api_version = document.get("apiVersion")
    if api_version != ADMISSION_API_VERSION:
        expected = ADMISSION_API_VERSION
        raise MalformedReview(f"unsupported apiVersion {_show(api_version)}; expected {expected}")
    kind = document.get("kind")
    if kind != ADMISSION_KIND:
        raise MalformedReview(f"unsupported kind {_show(kind)}; expected {ADMISSION_KIND}")


# Every check runs on every request, and its message is built only when it fails.


def _check_request(request: dict[str, Any]) -> None:
    uid = request.get("uid")
    if not isinstance(uid, str) or not 0 < len(uid) <= 256:
        raise MalformedReview("request.uid must be a non-empty string")
    _check_mapping_of_strings(request, "kind", _GVK_KEYS, required=True)
    for key in ("resource", "requestResource"):
        _check_mapping_of_strings(request, key, _GVR_KEYS, required=False)
    _check_mapping_of_strings(request, "requestKind", _GVK_KEYS, required=False)
    operation = request.get("operation")
    if not isinstance(operation, str) or operation not in OPERATIONS:
        raise MalformedReview(f"request.operation {_show(operation)} is not one of {sorted(OPERATIONS)}")
    _check_object(request, operation)
    for key in _OPTIONAL_STRINGS:
        if not isinstance(request.get(key, ""), str):
            raise MalformedReview(f"request.{key} must be a string")
    for key in _OPTIONAL_OBJECTS:
        if not _is_object_or_null(request.get(key)):
            raise MalformedReview(f"request.{key} must be an object or null")
    if not isinstance(request.get("dryRun", False), bool):
        raise MalformedReview("request.dryRun must be a boolean")
    _check_user_info(request.get("userInfo", {}))


def _check_object(request: dict[str, Any], operation: str) -> None:
    obj = request.get("object")
    if operation in ("CREATE", "UPDATE"):
        if not isinstance(obj, dict):
            raise MalformedReview(f"request.object must be an object for {operation}")
    elif not _is_object_or_null(obj):
        raise MalformedReview("request.object must be an object or null")


def _check_mapping_of_strings(
    request: dict[str, Any], key: str, fields: tuple[str, ...], *, required: bool
) -> None:
    value = request.get(key)
    if value is None and not required:
        return
    if not isinstance(value, dict):
        raise MalformedReview(f"request.{key} must be an object")
    for field in fields:
        if not isinstance(value.get(field), str):
            raise MalformedReview(f"request.{key}.{field} must be a string")


def _check_user_info(user: Any) -> None:
    if not isinstance(user, dict):
        raise MalformedReview("request.userInfo must be an object")
    if not isinstance(user.get("username", ""), str):
        raise MalformedReview("request.userInfo.username must be a string")
    groups = user.get("groups", [])
    if not (isinstance(groups, list) and all(isinstance(g, str) for g in groups)):
        raise MalformedReview("request.userInfo.groups must be a list of strings")


def _check_depth(value: Any) -> None:
    """Reject pathological nesting before any recursive code (deepcopy, diff) sees it."""
    level, depth = [value], 0
    while level:
        depth += 1
        if depth > MAX_DEPTH:
            raise MalformedReview(f"request is nested deeper than {MAX_DEPTH} levels")
        below: list[Any] = []
        for node in level:
            children = node.values() if type(node) is dict else node
            below.extend(c for c in children if type(c) is dict or type(c) is list)
        level = below


def _is_object_or_null(value: Any) -> bool:
    return value is None or isinstance(value, dict)


def _require(condition: bool, message: str) -> None:
    if not condition:
        raise MalformedReview(message)


def _show(value: Any) -> str:
    """A short, safe rendering of an untrusted value for an error message."""
    text = repr(value)
    return text if len(text) <= 64 else text[:61] + "..."


def encode_response(uid: str, decision: Decision, endpoint: Endpoint) -> bytes:
    """The AdmissionReview reply kube-apiserver accepts for this endpoint."""
    review: AdmissionReviewResponse = {
        "apiVersion": ADMISSION_API_VERSION,
        "kind": ADMISSION_KIND,
        "response": build_response(uid, decision, endpoint),
    }
    return orjson.dumps(review)


def build_response(uid: str, decision: Decision, endpoint: Endpoint) -> AdmissionResponse:
    response: AdmissionResponse = {"uid": uid, "allowed": decision.allowed}
    if not decision.allowed:
        response["status"] = {
            "code": decision.code,
            "reason": decision.reason,
            "message": decision.message,
        }
    if decision.allowed and decision.patch and endpoint == "mutate":
        response["patchType"] = "JSONPatch"
        response["patch"] = base64.b64encode(orjson.dumps(list(decision.patch))).decode("ascii")
    if decision.warnings:
        response["warnings"] = list(decision.warnings)
    if decision.audit_annotations:
        response["auditAnnotations"] = dict(decision.audit_annotations)
    return response
