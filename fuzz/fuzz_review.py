"""Coverage-guided fuzzing of the whole review path with atheris: `make fuzz`.

Bytes go through parse_review, then review() for every endpoint with the example
policies, then the encoder. MalformedReview is the one expected exception; anything
else is a crash that atheris reports with the input that caused it.
"""

from __future__ import annotations

import sys
from pathlib import Path

import atheris

with atheris.instrument_imports():
    from webhook.admission import encode_response, parse_review
    from webhook.errors import MalformedReview
    from webhook.policy.loader import load_directory
    from webhook.review import ReviewDeps, review

ROOT = Path(__file__).resolve().parent.parent
DEPS = ReviewDeps(policies=load_directory(ROOT / "policies" / "examples"))
ENDPOINTS = ("mutate", "validate", "advisory")


def test_one_input(data: bytes) -> None:
    try:
        request = parse_review(data)
    except MalformedReview:
        return
    for endpoint in ENDPOINTS:
        decision = review(request, endpoint, DEPS)  # type: ignore[arg-type]
        encode_response(request["uid"], decision, endpoint)  # type: ignore[arg-type]


def main() -> None:
    atheris.Setup(sys.argv, test_one_input)
    atheris.Fuzz()


if __name__ == "__main__":
    main()
