"""What both fuzz targets share: the example policies, and one request reviewed on every endpoint."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path

import atheris

with atheris.instrument_imports():
    from webhook.admission import encode_response
    from webhook.policy.loader import load_directory
    from webhook.review import ReviewDeps, review
    from webhook.types import AdmissionRequest, Endpoint

ROOT = Path(__file__).resolve().parent.parent
DEPS = ReviewDeps(policies=load_directory(ROOT / "policies" / "examples"))
ENDPOINTS: tuple[Endpoint, ...] = ("mutate", "validate", "advisory")


def review_everywhere(request: AdmissionRequest) -> None:
    """review() and the encoder for each endpoint; any exception is a crash atheris reports."""
    for endpoint in ENDPOINTS:
        encode_response(request["uid"], review(request, endpoint, DEPS), endpoint)


def fuzz(test_one_input: Callable[[bytes], None]) -> None:
    atheris.Setup(sys.argv, test_one_input)
    atheris.Fuzz()
