"""Coverage-guided fuzzing of the whole review path with atheris: `make fuzz`.

Bytes go through parse_review, then review() for every endpoint with the example
policies, then the encoder. MalformedReview is the one expected exception; anything
else is a crash that atheris reports with the input that caused it.
"""

from __future__ import annotations

import atheris
from harness import fuzz, review_everywhere

with atheris.instrument_imports():
    from webhook.admission import parse_review
    from webhook.errors import MalformedReview


def test_one_input(data: bytes) -> None:
    try:
        request = parse_review(data)
    except MalformedReview:
        return
    review_everywhere(request)


if __name__ == "__main__":
    fuzz(test_one_input)
