"""`gpu-webhook review` takes native policies and reads their params from --inventory."""

from __future__ import annotations

from pathlib import Path

import orjson
import yaml

from tests.native_policies.support import LIMIT, POLICIES, deployment
from tests.support import cli

NAMESPACE = {
    "apiVersion": "v1",
    "kind": "Namespace",
    "metadata": {"name": "params", "labels": {"environment": "params"}},
}


def test_review_reads_params_from_the_inventory(tmp_path: Path) -> None:
    manifests = tmp_path / "deployment.yaml"
    manifests.write_text(yaml.safe_dump_all([deployment(2, "params"), deployment(4, "params")]))
    inventory = tmp_path / "inventory.yaml"
    inventory.write_text(yaml.safe_dump_all([NAMESPACE, LIMIT]))
    args = (
        "review",
        str(manifests),
        "--policies",
        str(POLICIES),
        "--no-bundle",
        "--inventory",
        str(inventory),
    )
    result = cli.gpu_webhook(*args, "-o", "json", env={"NO_COLOR": "1"})
    assert result.returncode == 1, result.stderr
    outcomes = orjson.loads(result.stdout)
    outcomes = outcomes if isinstance(outcomes, list) else outcomes.get("results", outcomes)
    assert [o["allowed"] for o in outcomes] == [True, False]
    assert "must be no greater than 3" in outcomes[1]["status"]["message"]
