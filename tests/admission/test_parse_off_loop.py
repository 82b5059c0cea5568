"""Large AdmissionReview bodies are decoded on a thread, never on the event loop."""

from __future__ import annotations

import asyncio
import threading

import orjson
import pytest

from webhook import app
from webhook.admission import parse_review
from webhook.errors import MalformedReview
from webhook.types import AdmissionRequest


def _body(padding: int) -> bytes:
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p", "annotations": {"pad": "x" * padding}},
    }
    request = {
        "uid": "u",
        "kind": {"group": "", "version": "v1", "kind": "Pod"},
        "operation": "CREATE",
        "object": pod,
    }
    return orjson.dumps({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": request})


@pytest.mark.parametrize(
    ("padding", "on_loop"), [(10, True), (app.PARSE_ON_LOOP_BYTES, False)], ids=["small", "large"]
)
def test_where_a_body_is_decoded(monkeypatch: pytest.MonkeyPatch, padding: int, on_loop: bool) -> None:
    threads: list[threading.Thread] = []

    def recording(body: bytes) -> AdmissionRequest:
        threads.append(threading.current_thread())
        return parse_review(body)

    monkeypatch.setattr(app, "parse_review", recording)

    async def run() -> tuple[AdmissionRequest, threading.Thread]:
        return await app.parse_off_loop(_body(padding)), threading.current_thread()

    request, loop_thread = asyncio.run(run())
    assert request["uid"] == "u"
    assert (threads == [loop_thread]) is on_loop


def test_a_large_malformed_body_is_still_a_clear_error() -> None:
    body = b"[" + b"1," * app.PARSE_ON_LOOP_BYTES + b"1]"
    with pytest.raises(MalformedReview, match="body must be a JSON object"):
        asyncio.run(app.parse_off_loop(body))
