"""Check a document against a JSON Schema and report located, readable problems."""

from __future__ import annotations

from collections.abc import Iterator

import jsonschema
from jsonschema.exceptions import ValidationError

from webhook.errors import PolicyProblem
from webhook.policy.schemas import Schema
from webhook.policy.source import Document


def schema_problems(document: Document, schema: Schema) -> list[PolicyProblem]:
    validator = jsonschema.Draft202012Validator(schema)
    problems = [p for error in validator.iter_errors(document.data) for p in _explain(document, error)]
    problems += [document.problem(path, "field appears twice") for path in document.duplicates]
    # jsonschema reports each missing required field as its own error; each is explained once.
    return sorted(dict.fromkeys(problems), key=lambda p: (p.line, p.path))


def _explain(document: Document, error: ValidationError) -> Iterator[PolicyProblem]:
    path = tuple(error.absolute_path)
    instance, schema, expected = error.instance, error.schema, error.validator_value
    if error.validator == "additionalProperties" and isinstance(instance, dict) and isinstance(schema, dict):
        known = set(schema.get("properties", {}))
        for extra in sorted(set(instance) - known, key=str):
            yield document.problem((*path, extra), "unknown field")
        return
    if error.validator == "required" and isinstance(instance, dict) and isinstance(expected, list):
        for missing in expected:
            if missing not in instance:
                yield document.problem((*path, missing), "required field is missing")
        return
    yield document.problem(path, _reason(error))


def _reason(error: ValidationError) -> str:
    value = repr(error.instance)
    shown = value if len(value) <= 40 else value[:37] + "..."
    if error.validator == "type":
        return f"must be of type {_types(error.validator_value)}, got {shown}"
    if error.validator == "enum" and isinstance(error.validator_value, list):
        return f"{shown} is not one of {', '.join(map(str, error.validator_value))}"
    if error.validator == "const":
        return f"must be {error.validator_value!r}, got {shown}"
    return str(error.message)


def _types(value: object) -> str:
    return " or ".join(value) if isinstance(value, list) else str(value)
