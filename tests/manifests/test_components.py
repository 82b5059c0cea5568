"""The hardening components: mutual TLS with kube-apiserver, and a NetworkPolicy for the control plane.

Each component's patches are applied to the base as kustomize applies them (JSON 6902, by
target), the results checked against the Kubernetes schema, and the mTLS setup is run for
real: the certificates made by the commands its kustomization documents, a server with
--client-ca, and the probe command exactly as the patched pod spec runs it.
"""

from __future__ import annotations

import copy
import re
import shlex
import ssl
from pathlib import Path
from typing import Any

import jsonpatch
import pytest
import yaml

from tests.conftest import BUNDLED_POLICIES
from tests.manifests.objects import REPO, one
from tests.support import cli
from tests.support.schema import assert_valid
from tests.support.server import start_server
from webhook.cli import build_parser
from webhook.manifests import Manifest, RenderOptions, load_base, render

COMPONENTS = REPO / "manifests" / "components"
MTLS = COMPONENTS / "mtls"
PROBES = ("startupProbe", "readinessProbe", "livenessProbe")


def _targets(target: dict[str, Any], obj: Manifest) -> bool:
    group = obj["apiVersion"].rpartition("/")[0]
    return (
        re.fullmatch(target.get("kind", ".*"), obj["kind"]) is not None
        and target.get("name", obj["metadata"]["name"]) == obj["metadata"]["name"]
        and target.get("group", group) == group
    )


def with_component(path: Path) -> list[Manifest]:
    objects = copy.deepcopy(load_base())
    component = yaml.safe_load((path / "kustomization.yaml").read_text())
    assert component["kind"] == "Component"
    for entry in component["patches"]:
        operations = yaml.safe_load((path / entry["path"]).read_text())
        matched = [obj for obj in objects if _targets(entry["target"], obj)]
        assert matched, f"{entry['path']} patches nothing"
        for obj in matched:
            objects[objects.index(obj)] = jsonpatch.apply_patch(obj, operations)
    return objects


def server_of(objects: list[Manifest]) -> Manifest:
    (found,) = [o for o in objects if o["kind"] in ("Deployment", "StatefulSet")]
    return found


def test_mtls_requires_the_client_ca_and_probes_with_a_certificate() -> None:
    objects = with_component(MTLS)
    server = server_of(objects)
    assert_valid(server)
    spec = server["spec"]["template"]["spec"]
    container = spec["containers"][0]
    assert "--client-ca=/etc/gpu-webhook/client-ca/ca.crt" in container["args"]
    mounts = {m["mountPath"]: m["name"] for m in container["volumeMounts"]}
    secrets = {v["name"]: v["secret"]["secretName"] for v in spec["volumes"] if "secret" in v}
    generated = {
        g["name"] for g in yaml.safe_load((MTLS / "kustomization.yaml").read_text())["secretGenerator"]
    }
    assert secrets[mounts["/etc/gpu-webhook/client-ca"]] in generated
    assert secrets[mounts["/etc/gpu-webhook/probe"]] in generated
    for probe in PROBES:
        assert "httpGet" not in container[probe]
        command = container[probe]["exec"]["command"]
        assert command[0] == "gpu-webhook"
        args = build_parser().parse_args(command[1:])  # the CLI accepts it as written
        assert args.ca_file.parent.as_posix() in mounts and args.client_cert_dir.as_posix() in mounts


def test_the_apiserver_presents_its_certificate_to_our_service() -> None:
    service = one(load_base(), "Service")
    config = yaml.safe_load((MTLS / "apiserver" / "admission-configuration.yaml").read_text())
    kubeconfig = yaml.safe_load((MTLS / "apiserver" / "kubeconfig.yaml").read_text())
    plugins = {p["name"]: p["configuration"]["kubeConfigFile"] for p in config["plugins"]}
    assert set(plugins) == {"ValidatingAdmissionWebhook", "MutatingAdmissionWebhook"}
    (user,) = kubeconfig["users"]
    assert service["spec"]["ports"][0]["port"] == 443  # else the name needs the port
    assert user["name"] == f"{service['metadata']['name']}.{service['metadata']['namespace']}.svc"
    names = {Path(user["user"]["client-certificate"]).name, Path(user["user"]["client-key"]).name}
    assert names == {"client.crt", "client.key"}  # what `gpu-webhook certs client` writes


def _documented_commands() -> list[list[str]]:
    """The `gpu-webhook certs …` lines in the component's comments."""
    text = (MTLS / "kustomization.yaml").read_text()
    lines = [line.lstrip("# ").strip() for line in text.splitlines() if "gpu-webhook certs" in line]
    return [shlex.split(line)[1:] for line in lines]


def test_the_documented_setup_runs_and_the_probe_passes(cert_dir: Path, tmp_path: Path) -> None:
    for command in _documented_commands():
        result = cli.gpu_webhook(*command, cwd=tmp_path)
        assert result.returncode == 0, result.stderr
    certs = tmp_path / "certs"
    args = ["--cert-dir", str(cert_dir), "--policies", str(BUNDLED_POLICIES)]
    server = start_server(
        [*args, "--client-ca", str(certs / "client-ca" / "ca.crt")], ca_file=cert_dir / "ca.crt"
    )
    try:
        container = server_of(with_component(MTLS))["spec"]["template"]["spec"]["containers"][0]
        for probe in PROBES:
            command = container[probe]["exec"]["command"][1:]
            local = [
                part.replace("/etc/gpu-webhook/tls", str(cert_dir))
                .replace("/etc/gpu-webhook/probe", str(certs / "probe"))
                .replace(":8443/", f":{server.port}/")
                for part in command
            ]
            assert cli.gpu_webhook(*local).returncode == 0, probe
        apiserver = server.client()
        apiserver.context.load_cert_chain(
            certs / "apiserver" / "client.crt", certs / "apiserver" / "client.key"
        )
        assert apiserver.request("GET", "/readyz").status == 200
        with pytest.raises((ssl.SSLError, ConnectionError, OSError)):
            server.client().request("GET", "/readyz")
    finally:
        server.stop_gracefully()


def test_control_plane_only_admits_no_one_else() -> None:
    objects = with_component(COMPONENTS / "control-plane-only")
    policy = one(objects, "NetworkPolicy")
    assert_valid(policy)
    target_port = one(objects, "Service")["spec"]["ports"][0]["targetPort"]
    server_ports = {
        p["name"]: p["containerPort"]
        for p in server_of(objects)["spec"]["template"]["spec"]["containers"][0]["ports"]
    }
    port = server_ports.get(target_port, target_port)
    for rule in policy["spec"]["ingress"]:
        assert rule["from"], "a rule without `from` admits every pod in the cluster"
        assert [p["port"] for p in rule["ports"]] == [port]
    assert any("ipBlock" in peer for rule in policy["spec"]["ingress"] for peer in rule["from"])


def test_control_plane_only_is_what_the_cidr_flag_renders() -> None:
    """`gpu-webhook manifests --control-plane-cidr` renders the component's NetworkPolicy, with its own
    addresses in place of the component's placeholder."""
    component = one(with_component(COMPONENTS / "control-plane-only"), "NetworkPolicy")
    (placeholder,) = [
        peer["ipBlock"]["cidr"]
        for rule in component["spec"]["ingress"]
        for peer in rule["from"]
        if "ipBlock" in peer
    ]
    assert placeholder == "10.0.0.0/28"  # what docs/operations.md says to replace
    assert one(render(RenderOptions(control_plane_cidrs=[placeholder])), "NetworkPolicy") == component
