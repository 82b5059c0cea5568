"""/readyz and /metrics name the ResourceClaimTemplates mode dra needs that the cluster state lacks."""

from __future__ import annotations

from pathlib import Path

import yaml

from tests.dra.objects import WHOLE_DRA, WHOLE_DRA_FILE
from tests.support.server import start_server
from webhook.dra import templates
from webhook.dra.index import DraIndex


def _namespace(name: str) -> dict[str, object]:
    labels = {"kubernetes.io/metadata.name": name}
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "labels": labels}}


def test_missing_is_empty_until_templates_are_listed() -> None:
    namespaces = {"team-a": {"kubernetes.io/metadata.name": "team-a"}}
    assert templates.missing([WHOLE_DRA], namespaces, DraIndex(synced=False)) == []
    names = [f"team-a/{t['metadata']['name']}" for t in templates.templates_for(WHOLE_DRA, "team-a")]
    assert templates.missing([WHOLE_DRA], namespaces, DraIndex(synced=True)) == names
    assert templates.missing([WHOLE_DRA], {"other": {}}, DraIndex(synced=True)) == []


def test_readyz_names_missing_templates(cert_dir: Path, tmp_path: Path) -> None:
    policies = tmp_path / "policies"
    policies.mkdir()
    (policies / "whole.yaml").write_text(WHOLE_DRA_FILE)
    present, absent = templates.templates_for(WHOLE_DRA, "team-a")
    inventory = tmp_path / "inventory.yaml"
    inventory.write_text(
        yaml.safe_dump_all([_namespace("team-a"), _namespace("team-exempt"), _namespace("other"), present])
    )
    home = tmp_path / "home"
    home.mkdir()
    server = start_server(
        [
            *("--cert-dir", str(cert_dir), "--policies", str(policies), "--inventory", str(inventory)),
            *("--exclude-namespaces", "kube-system,team-exempt"),
        ],
        ca_file=cert_dir / "ca.crt",
        env={"HOME": str(home), "KUBECONFIG": ""},
    )
    try:
        reply = server.client().request("GET", "/readyz")
        assert reply.status == 200  # informational: never a reason to stop serving
        checks = reply.json()["checks"]
        assert isinstance(checks, dict)
        text = checks["dra_templates"]
        assert text.startswith("1 ResourceClaimTemplate(s) for mode dra missing: ")
        assert f"team-a/{absent['metadata']['name']}" in text
        assert present["metadata"]["name"] not in text
        metrics = server.client().request("GET", "/metrics").body.decode()
        assert 'gpu_webhook_dra_templates_missing{namespace="team-a"} 1.0' in metrics
        missing = metrics.split("gpu_webhook_dra_templates_missing", 1)[1]
        assert 'namespace="other"' not in missing and 'namespace="team-exempt"' not in missing
        assert "team-exempt" not in text  # its pods never reach the webhook
    finally:
        server.stop()
