"""Run the rendered server the way kubelet would: its volumes laid out under a local root (Secret
and ConfigMap files as kubelet writes them, a claim template as a directory that outlives the pod),
its container's arguments as rendered, its fieldRef environment filled in. Only the bind address
and port change for the test machine."""

from __future__ import annotations

import base64
from pathlib import Path
from typing import Any

from tests.manifests.objects import one
from tests.support.server import ServerProcess, start_server
from webhook.manifests import Manifest, set_flag


def pod_spec(install: list[Manifest]) -> dict[str, Any]:
    spec: dict[str, Any] = one(install, "StatefulSet")["spec"]["template"]["spec"]
    return spec


def lay_out_volumes(install: list[Manifest], root: Path, claims: Path | None = None) -> dict[str, Path]:
    """Write each mounted volume's files under root; return mountPath -> local directory.

    A volume from a claim template is `claims/<claim>` (kept by the caller across pods), the
    way a StatefulSet replica gets its own PersistentVolumeClaim back."""
    spec = pod_spec(install)
    volumes = {volume["name"]: volume for volume in spec["volumes"]}
    templates = {c["metadata"]["name"] for c in one(install, "StatefulSet")["spec"]["volumeClaimTemplates"]}
    local: dict[str, Path] = {}
    for mount in spec["containers"][0]["volumeMounts"]:
        if mount["name"] in templates:
            directory = (claims or root / "claims") / mount["name"]
            directory.mkdir(parents=True, exist_ok=True)
            local[mount["mountPath"]] = directory
            continue
        directory = root / mount["mountPath"].lstrip("/")
        directory.mkdir(parents=True)
        volume = volumes[mount["name"]]
        files: dict[str, Any] = {}
        if "secret" in volume:
            files = {k: base64.b64decode(v) for k, v in one(install, "Secret")["data"].items()}
        elif "configMap" in volume:
            files = {k: v.encode() for k, v in one(install, "ConfigMap")["data"].items()}
        for name, content in files.items():
            (directory / name).write_bytes(content)
        local[mount["mountPath"]] = directory
    return local


def local_args(install: list[Manifest], local: dict[str, Path]) -> list[str]:
    args: list[str] = pod_spec(install)["containers"][0]["args"]
    for arg in list(args):
        flag, _, value = arg.partition("=")
        for mount_path, directory in local.items():
            if value.startswith(mount_path + "/") or value == mount_path:
                args = set_flag(args, flag, str(directory) + value.removeprefix(mount_path))
    return set_flag(set_flag(args, "host", "127.0.0.1"), "port", "0")


def field_env(install: list[Manifest], fields: dict[str, str]) -> dict[str, str]:
    """The container's fieldRef variables, valued from `fields` (e.g. metadata.name -> the pod's)."""
    env = {}
    for variable in pod_spec(install)["containers"][0].get("env", []):
        path = variable.get("valueFrom", {}).get("fieldRef", {}).get("fieldPath")
        if path is not None:
            env[variable["name"]] = fields[path]
    return env


def run_pod(
    install: list[Manifest],
    root: Path,
    *,
    ca_file: Path,
    claims: Path | None = None,
    fields: dict[str, str] | None = None,
) -> ServerProcess:
    local = lay_out_volumes(install, root, claims)
    fields = fields or {
        "metadata.namespace": "gpu-system",
        "metadata.name": "gpu-webhook-0",
        "spec.nodeName": "n",
    }
    return start_server(local_args(install, local), ca_file=ca_file, env=field_env(install, fields))
