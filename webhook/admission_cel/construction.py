"""`Object{...}` and `JSONPatch{...}`: the typed constructions of mutating admission policies, as
plain maps. kube-apiserver types them from the object's schema (kubernetes/kubernetes
staging/src/k8s.io/apiserver/pkg/admission/plugin/policy/mutating/patch/smd.go and json_patch.go);
here a construction at any depth, `Object.spec.containers{name: "x"}`, is the map of its fields,
which is what the apply configuration and the patch are made of."""

from __future__ import annotations

from typing import Any

from celpy import celtypes

OBJECT = "Object"
JSON_PATCH = "JSONPatch"
NAMES = (OBJECT, JSON_PATCH)


class Construction(celtypes.MapType):
    """A type name usable as `Name{fields}` and `Name.field.field{fields}`."""

    def __init__(self, type_name: str) -> None:
        super().__init__({})
        self.type_name = type_name

    def __getitem__(self, key: Any) -> Construction:
        return Construction(f"{self.type_name}.{key}")

    def get(self, key: Any, default: Any = None) -> Construction:
        return self[key]

    def __contains__(self, key: object) -> bool:
        return True

    def __call__(self, fields: Any) -> celtypes.MapType:
        return celtypes.MapType(fields or {})


def constructions() -> dict[str, Construction]:
    """The activation entries that make the constructions evaluate."""
    return {name: Construction(name) for name in NAMES}
