"""What the policy report CRDs accept, restated from their OpenAPI schemas, as JSON Schema.

Read from kubernetes-sigs/wg-policy-prototypes policy-report/crd/v1alpha2/
wgpolicyk8s.io_policyreports.yaml and wgpolicyk8s.io_clusterpolicyreports.yaml (version
v1alpha2), and openreports/reports-api config/crd/openreports.io_reports.yaml and
openreports.io_clusterreports.yaml (v1alpha1). Both groups share the result layout; openreports
adds a top-level `source` and `configuration`. Unknown fields are refused here, where the API
server would silently prune them: a misspelt field would otherwise vanish unnoticed.
"""

from __future__ import annotations

from typing import Any

import jsonschema

RESULTS = ("pass", "fail", "warn", "error", "skip")
SEVERITIES = ("critical", "high", "low", "medium", "info")
_STRING = {"type": "string"}
_COUNT = {"type": "integer"}

# core/v1 ObjectReference, the items of a result's `resources` and of `scope`.
_REFERENCE = {
    "type": "object",
    "additionalProperties": False,
    "properties": dict.fromkeys(
        ("apiVersion", "fieldPath", "kind", "name", "namespace", "resourceVersion", "uid"), _STRING
    ),
}
# metav1.Timestamp: both fields required, seconds int64, nanos int32.
_TIMESTAMP = {
    "type": "object",
    "additionalProperties": False,
    "required": ["nanos", "seconds"],
    "properties": {
        "seconds": {"type": "integer", "minimum": -(2**63), "maximum": 2**63 - 1},
        "nanos": {"type": "integer", "minimum": 0, "maximum": 999_999_999},
    },
}
_RESULT = {
    "type": "object",
    "additionalProperties": False,
    "required": ["policy"],
    "properties": {
        "category": _STRING,
        "message": _STRING,
        "policy": _STRING,
        "properties": {"type": "object", "additionalProperties": _STRING},
        "resources": {"type": "array", "items": _REFERENCE},
        "result": {"type": "string", "enum": list(RESULTS)},
        "rule": _STRING,
        "scored": {"type": "boolean"},
        "severity": {"type": "string", "enum": list(SEVERITIES)},
        "source": _STRING,
        "timestamp": _TIMESTAMP,
    },
}
_COMMON = {
    "apiVersion": _STRING,
    "kind": _STRING,
    "metadata": {"type": "object"},
    "results": {"type": "array", "items": _RESULT},
    "scope": _REFERENCE,
    "summary": {
        "type": "object",
        "additionalProperties": False,
        "properties": dict.fromkeys(RESULTS, _COUNT),
    },
}


def _schema(extra: dict[str, Any]) -> dict[str, Any]:
    return {"type": "object", "additionalProperties": False, "properties": {**_COMMON, **extra}}


_OPENREPORTS_EXTRA = {
    "source": _STRING,
    "configuration": {
        "type": "object",
        "required": ["limits"],
        "properties": {
            "limits": {
                "type": "object",
                "properties": {
                    "maxResults": _COUNT,
                    "statusFilter": {"type": "array", "items": {"type": "string", "enum": list(RESULTS)}},
                },
            }
        },
    },
}
# (apiVersion, kind) -> (schema, namespaced)
CRDS: dict[tuple[str, str], tuple[dict[str, Any], bool]] = {
    ("wgpolicyk8s.io/v1alpha2", "PolicyReport"): (_schema({}), True),
    ("wgpolicyk8s.io/v1alpha2", "ClusterPolicyReport"): (_schema({}), False),
    ("openreports.io/v1alpha1", "Report"): (_schema(_OPENREPORTS_EXTRA), True),
    ("openreports.io/v1alpha1", "ClusterReport"): (_schema(_OPENREPORTS_EXTRA), False),
}


def assert_valid_report(report: dict[str, Any]) -> None:
    """Valid against its CRD's schema, and placed as its scope requires."""
    found = CRDS.get((report.get("apiVersion", ""), report.get("kind", "")))
    assert found is not None, f"no report CRD serves {report.get('apiVersion')} {report.get('kind')}"
    schema, namespaced = found
    try:
        jsonschema.validate(report, schema)
    except jsonschema.ValidationError as e:
        raise AssertionError(
            f"{report['kind']} is not valid: {e.message} at {list(e.absolute_path)}"
        ) from None
    metadata = report["metadata"]
    assert isinstance(metadata.get("name"), str) and metadata["name"]
    assert bool(metadata.get("namespace")) is namespaced, (
        f"{report['kind']} namespace: {metadata.get('namespace')}"
    )
