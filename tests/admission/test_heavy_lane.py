"""Heavy reviews in flight never cost ordinary ones their thread: through a real uvicorn over TLS.

Three heavy Deployments (each within every size bound, each a second or more of Rego) are sent at
once, as the red-team's were; once the server logs that one has started, ordinary Deployments are
reviewed with a one-second budget. Each must get its own decision, never the failure mode's.
Without the heavy lane they waited behind the heavy reviews on the two review threads and were
answered 504 by the failure mode.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest

from tests.support.apiserver import check_reply
from tests.support.policies import BUNDLED_POLICIES
from tests.support.reviews import make_review
from tests.support.server import ServerProcess, start_server
from webhook.validation import bounds

HEAVY = 3
ORDINARY = 8


def _deployment(name: str, containers: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "namespace": "team"},
        "spec": {
            "selector": {"matchLabels": {"app": name}},
            "template": {"metadata": {"labels": {"app": name}}, "spec": {"containers": containers}},
        },
    }


def _heavy_container(index: int) -> dict[str, Any]:
    """Refused by several rules at once: each refusal is one more element of a Rego set."""
    return {
        "name": f"c{index}",
        "image": f"registry{index}.example/tool",
        "securityContext": {"privileged": True, "capabilities": {"add": ["SYS_ADMIN", "CAP_BPF"]}},
        "env": [{"name": "NVIDIA_VISIBLE_DEVICES", "value": "all"}, {"name": "NVIDIA_GDS", "value": "1"}],
        "volumeMounts": [{"name": "dev", "mountPath": f"/var/run/nvidia-container-devices/{index}"}],
    }


HEAVY_DEPLOYMENT = _deployment("heavy", [_heavy_container(i) for i in range(60)])
HEAVY_DEPLOYMENT["spec"]["template"]["spec"]["volumes"] = [{"name": "dev", "hostPath": {"path": "/dev"}}]
ORDINARY_DEPLOYMENT = _deployment("web", [{"name": "web", "image": "nginx:1.27"}])


@pytest.fixture
def lane_server(cert_dir: Path) -> Iterator[ServerProcess]:
    args = ["--cert-dir", str(cert_dir), "--policies", str(BUNDLED_POLICIES), "--log-level", "debug"]
    server = start_server(args, ca_file=cert_dir / "ca.crt")
    try:
        yield server
    finally:
        server.stop_gracefully()


def test_the_heavy_deployment_is_heavy_and_within_every_bound() -> None:
    assert bounds.oversize(HEAVY_DEPLOYMENT) is None
    assert bounds.is_heavy(HEAVY_DEPLOYMENT, None, len(orjson.dumps(HEAVY_DEPLOYMENT)))
    assert not bounds.is_heavy(ORDINARY_DEPLOYMENT, None, len(orjson.dumps(ORDINARY_DEPLOYMENT)))


def test_ordinary_reviews_keep_their_threads_while_heavy_ones_run(lane_server: ServerProcess) -> None:
    heavy_answers: list[dict[str, Any]] = []

    def send_heavy() -> None:
        review = make_review(HEAVY_DEPLOYMENT)
        reply = lane_server.client(timeout=120).post_json("/validate?timeout=30s", review)
        heavy_answers.append(check_reply(review, reply, "validate"))

    senders = [threading.Thread(target=send_heavy) for _ in range(HEAVY)]
    for sender in senders:
        sender.start()
    lane_server.wait_for_log(lambda e: e.get("msg") == "heavy review started")
    ordinary = []
    for _ in range(ORDINARY):
        review = make_review(ORDINARY_DEPLOYMENT)
        reply = lane_server.client().post_json("/validate?timeout=1s", review)
        ordinary.append(check_reply(review, reply, "validate"))
    for sender in senders:
        sender.join()
    assert all(answer["allowed"] and "status" not in answer for answer in ordinary), ordinary
    # Each heavy one has its own decision, or (the lane holds two) the failure mode's busy answer.
    messages = [answer["status"]["message"] for answer in heavy_answers]
    assert len(messages) == HEAVY and not any(answer["allowed"] for answer in heavy_answers)
    reviewed = [m for m in messages if m.startswith("[") and "Deployment heavy: container" in m]
    busy = [m for m in messages if "busy with large reviews" in m]
    assert len(reviewed) >= 1 and len(reviewed) + len(busy) == HEAVY, messages
