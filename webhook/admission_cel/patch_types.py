"""The types a MutatingAdmissionPolicy's mutations construct, `Object{...}` and `JSONPatch{...}`,
and their results as plain maps.

kube-apiserver compiles mutations with patch types (kubernetes/kubernetes staging/src/k8s.io/
apiserver/pkg/cel/mutation/typeresolver.go): `Object` and every `Object.<field>...<field>` are
message types with any field, typed dyn (mutation/dynamic/objects.go), and `JSONPatch` has the
fields op, path and from, strings, and value, dyn (mutation/jsonpatch.go). No other expression
may construct a message.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from webhook.admission_cel.errors import CelEvaluationError
from webhook.admission_cel.values import to_python
from webhook.dra.cel.check import MessageType
from webhook.dra.cel.kinds import DYN, STRING
from webhook.dra.cel.values import Message, kind_of

OBJECT: Final = "Object"
JSON_PATCH: Final = "JSONPatch"
_ANY_FIELD: Final = MessageType()
_JSON_PATCH_TYPE: Final = MessageType({"op": STRING, "path": STRING, "from": STRING, "value": DYN})
_JSON_PATCH_STRINGS: Final = ("op", "path", "from")


def message_type(name: str) -> MessageType | None:
    """The message type `name` constructs in a mutation, None for no such type."""
    if name == JSON_PATCH:
        return _JSON_PATCH_TYPE
    if name == OBJECT or name.startswith(OBJECT + "."):
        return _ANY_FIELD
    return None


def apply_configuration(value: Any) -> dict[str, Any]:
    """An ApplyConfiguration expression's result as a plain map. kube-apiserver requires an
    `Object{...}` whose nested constructions are named by their field path from it
    (mutation/dynamic/objects.go CheckTypeNamesMatchFieldPathNames): `Object{spec:
    Object.spec{...}}`, lists and maps in between not counted."""
    if not isinstance(value, Message) or value.type_name != OBJECT:
        raise CelEvaluationError(f"an apply configuration must be an Object{{...}}, not {kind_of(value)}")
    _check_path_names(value, OBJECT)
    return dict(to_python(value))


def json_patch(value: Any) -> list[dict[str, Any]]:
    """A JSONPatch expression's result, a list of `JSONPatch{...}`, as JSON patch operations
    (op, path, from and value; those not set left out). kube-apiserver refuses an op, path or
    from that is not a string (mutation/jsonpatch.go JSONPatchType.Val)."""
    if not isinstance(value, list):
        raise CelEvaluationError(f"a JSON patch must be a list of JSONPatch{{...}}, not {kind_of(value)}")
    operations = []
    for operation in value:
        if not isinstance(operation, Message) or operation.type_name != JSON_PATCH:
            raise CelEvaluationError(
                f"a JSON patch operation must be a JSONPatch{{...}}, not {kind_of(operation)}"
            )
        operations.append(_operation(operation))
    return operations


def _operation(operation: Mapping[Any, Any]) -> dict[str, Any]:
    for name in _JSON_PATCH_STRINGS:
        if name in operation and not isinstance(operation[name], str):
            raise CelEvaluationError(
                f"unexpected type {kind_of(operation[name])} for JSONPatch's {name!r} field"
            )
    return {str(name): to_python(field) for name, field in operation.items()}


def _check_path_names(value: Any, path: str) -> None:
    if isinstance(value, Message):
        if value.type_name != path:
            raise CelEvaluationError(
                f"unexpected type name {value.type_name!r}, expected {path!r}, which matches "
                "field name path from root Object type"
            )
        for name, field in value.items():
            _check_path_names(field, path + "." + str(name))
    elif isinstance(value, Mapping):
        for item in value.values():
            _check_path_names(item, path)
    elif isinstance(value, list):
        for item in value:
            _check_path_names(item, path)
