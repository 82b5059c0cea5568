"""The rendered install keeps its audit log when a replica is deleted and comes back elsewhere.

A StatefulSet replica gets its own claim back under the same name: here the claim is a directory
that outlives the first pod. The first pod is killed outright (SIGKILL, no drain) after its
answers; the second starts on another node with the same claim. Every acknowledged decision must
still be in the log, the chain must verify from its first record, and the `start` records must
say where the replica's log continues.
"""

from __future__ import annotations

import signal
from pathlib import Path

import orjson

from tests.manifests.pod import run_pod
from tests.support.apiserver import check_reply
from tests.support.reviews import load_example, make_review
from tests.support.server import ServerProcess
from webhook import bundle
from webhook.audit.files import expand, read_file
from webhook.audit.verify import verify
from webhook.manifests import RenderOptions, render


def _answer(server: ServerProcess, count: int) -> list[str]:
    uids = []
    for _ in range(count):
        review = make_review(load_example("pod-gpu-training.yaml"))
        check_reply(review, server.client().post_json("/validate", review), "validate")
        uids.append(review["request"]["uid"])
    return uids


def test_a_deleted_replica_continues_its_log_on_another_node(cert_dir: Path, tmp_path: Path) -> None:
    install = render(RenderOptions(cert_dir=cert_dir, policies=bundle.ship([]).data))
    claims = tmp_path / "claims"  # the replica's PersistentVolumeClaim, which outlives its pods
    acknowledged = []
    for pod, node in (("first", "node-a"), ("second", "node-b")):
        fields = {"metadata.namespace": "gpu-system", "metadata.name": "gpu-webhook-0", "spec.nodeName": node}
        server = run_pod(install, tmp_path / pod, ca_file=cert_dir / "ca.crt", claims=claims, fields=fields)
        try:
            acknowledged += _answer(server, 5)
        finally:
            server.stop(signal.SIGKILL)
    (log,) = claims.glob("*/audit.log")
    assert log.parent.name == "audit"  # the claim template's volume
    result = verify(expand([log]), from_genesis=True)
    assert result.ok, result.describe()
    records = [orjson.loads(line.data) for path in expand([log]) for line in read_file(path) if line.complete]
    assert [r["uid"] for r in records if r["type"] == "decision"] == acknowledged
    starts = [r for r in records if r["type"] == "start"]
    assert [(r["replica"], r["node"]) for r in starts] == [
        ("gpu-webhook-0", "node-a"),
        ("gpu-webhook-0", "node-b"),
    ]
    # The second start is chained right after the first pod's last acknowledged decision.
    second = records.index(starts[1])
    assert records[second - 1]["uid"] == acknowledged[4]
    assert starts[1]["prev"] == records[second - 1]["hash"]
