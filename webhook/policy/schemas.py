"""JSON Schemas for our policy kinds: shape only. Meaning (globs, quantities, GPU models) is
checked by each kind's compiler, which can say more than a schema can."""

from __future__ import annotations

from typing import Any

from webhook.gpu import GPU_MODELS
from webhook.sharing_policy import (
    ALLOCATION_POLICIES,
    DEVICE_SHARING,
    DRA_STRATEGIES,
    MIG_FALLBACKS,
    MIG_STRATEGIES,
    MULTI_GPU_RULES,
    SHARING_MODES,
    TIME_SLICE_INTERVALS,
)

Schema = dict[str, Any]
GROUP_VERSION = "gpuwebhook.io/v1alpha1"


def _object(properties: Schema, required: tuple[str, ...] = ()) -> Schema:
    return {
        "type": "object",
        "properties": properties,
        "required": list(required),
        "additionalProperties": False,
    }


def _array(items: Schema) -> Schema:
    return {"type": "array", "items": items}


STRING: Schema = {"type": "string", "minLength": 1}
QUANTITY: Schema = {"type": ["string", "integer"]}
STRING_MAP: Schema = {"type": "object", "additionalProperties": {"type": "string"}}
SELECTOR = _object(
    {
        "matchLabels": STRING_MAP,
        "matchExpressions": _array(
            _object(
                {"key": STRING, "operator": STRING, "values": _array({"type": "string"})}, ("key", "operator")
            )
        ),
    }
)
METADATA: Schema = {
    "type": "object",
    "properties": {"name": STRING, "labels": STRING_MAP, "annotations": STRING_MAP},
    "required": ["name"],
}
NODE_REQUIREMENT = _object(
    {
        "key": STRING,
        "operator": {"enum": ["In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt"]},
        "values": _array({"type": "string"}),
    },
    ("key", "operator"),
)
TOLERATION = _object(
    {
        "key": {"type": "string"},
        "operator": {"enum": ["Exists", "Equal"]},
        "value": {"type": "string"},
        "effect": {"enum": ["NoSchedule", "PreferNoSchedule", "NoExecute"]},
        "tolerationSeconds": {"type": "integer"},
    }
)
MATCH = _object(
    {
        "namespaces": _array(STRING),
        "excludedNamespaces": _array(STRING),
        "namespaceSelector": SELECTOR,
        "podSelector": SELECTOR,
    }
)
SHARING = _object(
    {
        "mode": {"enum": list(SHARING_MODES)},
        "resourceName": STRING,
        "gpuModel": {"enum": list(GPU_MODELS)},
        "defaultMemory": QUANTITY,
        "cores": {"type": "integer", "minimum": 1, "maximum": 100},
        "allowOptOut": {"type": "boolean"},
        "migStrategy": {"enum": list(MIG_STRATEGIES)},
        "multiGpu": {"enum": list(MULTI_GPU_RULES)},
        "sharedDevicesAllocationPolicy": {"enum": list(ALLOCATION_POLICIES)},
        "failRequestsGreaterThanOne": {"type": "boolean"},
        "setGpuType": {"type": "boolean"},
        "maxGpusPerPod": {"type": "integer", "minimum": 1},
        "maxMemory": QUANTITY,
        "strategy": {"enum": list(DRA_STRATEGIES)},
        "deviceClassName": STRING,
        "timeSlicing": _object({"interval": {"enum": list(TIME_SLICE_INTERVALS)}}),
        "mps": _object(
            {
                "defaultActiveThreadPercentage": {"type": "integer", "minimum": 0, "maximum": 100},
                "defaultPinnedDeviceMemoryLimit": QUANTITY,
                "defaultPerDevicePinnedMemoryLimit": {
                    "type": "object",
                    "propertyNames": {"type": "string"},
                    "additionalProperties": QUANTITY,
                    "maxProperties": 32,
                },
            }
        ),
        "migSharing": {"enum": list(DEVICE_SHARING)},
        "fallback": {**_array({"enum": list(MIG_FALLBACKS)}), "uniqueItems": True},
        # Gate names are checked by the compiler, which can list the driver's own.
        "driverFeatureGates": {
            "type": "object",
            "propertyNames": {"type": "string"},
            "additionalProperties": {"type": "boolean"},
            "maxProperties": 64,
        },
    },
    ("mode",),
)
INJECT = _object(
    {
        "tolerations": _array(TOLERATION),
        "nodeAffinity": _object(
            {
                "required": _array(NODE_REQUIREMENT),
                "preferred": _array(
                    {
                        **NODE_REQUIREMENT,
                        "properties": {
                            **NODE_REQUIREMENT["properties"],
                            "weight": {"type": "integer", "minimum": 1, "maximum": 100},
                        },
                        "required": ["weight", "key", "operator"],
                    }
                ),
            }
        ),
        "priorityClassName": STRING,
        "schedulerName": STRING,
        "runtimeClassName": STRING,
        "labels": STRING_MAP,
        "annotations": STRING_MAP,
        "force": {"type": "boolean"},
        "preferUnderutilized": _object(
            {
                "weight": {"type": "integer", "minimum": 1, "maximum": 100},
                "maxNodes": {"type": "integer", "minimum": 1, "maximum": 50},
            },
            ("weight",),
        ),
    }
)
RESOURCES = _object(
    {
        "requests": {"type": "object", "additionalProperties": QUANTITY},
        "limits": {"type": "object", "additionalProperties": QUANTITY},
    }
)
CHECKPOINT = _object(
    {
        "image": STRING,
        "intervalSeconds": {"type": "integer", "minimum": 1},
        "mountPath": STRING,
        "volume": {
            "type": "object",
            "properties": {
                "emptyDir": _object({"medium": {"type": "string"}, "sizeLimit": QUANTITY}),
                "persistentVolumeClaim": _object(
                    {"claimName": STRING, "readOnly": {"type": "boolean"}}, ("claimName",)
                ),
            },
            "additionalProperties": False,
            "minProperties": 1,
            "maxProperties": 1,
        },
        "nativeSidecar": {"type": "boolean"},
        "terminationGracePeriodSeconds": {"type": "integer", "minimum": 0},
        "resources": RESOURCES,
    },
    ("image",),
)
GPU_SHARING_POLICY = _object(
    {
        "apiVersion": {"const": GROUP_VERSION},
        "kind": {"const": "GPUSharingPolicy"},
        "metadata": METADATA,
        "spec": _object(
            {
                "priority": {"type": "integer"},
                "match": MATCH,
                "sharing": SHARING,
                "inject": INJECT,
                "checkpoint": CHECKPOINT,
            },
            ("sharing",),
        ),
    },
    ("apiVersion", "kind", "metadata", "spec"),
)

POLICY_TEST_CASE = _object(
    {
        "name": STRING,
        "object": {"type": "object"},
        "objectFile": STRING,
        "namespace": STRING,
        "user": STRING,
        "groups": _array(STRING),
        "inventory": _array({"type": "object"}),
        "expect": _object(
            {
                "allowed": {"type": "boolean"},
                "object": {"type": "object"},
                "absent": _array({"type": "string", "pattern": "^/"}),
                "messages": _array(STRING),
                "warnings": _array(STRING),
                "unchanged": {"type": "boolean"},
            },
        ),
    },
    ("name", "expect"),
)
POLICY_TEST = _object(
    {
        "apiVersion": {"const": GROUP_VERSION},
        "kind": {"const": "PolicyTest"},
        "metadata": METADATA,
        "spec": _object(
            {"policies": STRING, "inventory": STRING, "cases": {**_array(POLICY_TEST_CASE), "minItems": 1}},
            ("cases",),
        ),
    },
    ("apiVersion", "kind", "metadata", "spec"),
)
