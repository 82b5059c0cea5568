"""Check emitted objects against the official Kubernetes OpenAPI schema."""

from __future__ import annotations

from typing import Any

import kubernetes_validate

VERSION = kubernetes_validate.latest_version()


def assert_valid(obj: dict[str, Any]) -> None:
    """Strict: unknown fields fail too, as `kubectl apply --validate=strict` would."""
    try:
        kubernetes_validate.validate(obj, VERSION, strict=True)
    except kubernetes_validate.ValidationError as e:
        raise AssertionError(f"{obj.get('kind')} is not valid Kubernetes {VERSION}: {e}") from None
