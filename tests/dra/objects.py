"""DRA objects in the shapes of NVIDIA/k8s-dra-driver-gpu's demo specs (demo/specs/quickstart/v1/,
demo/specs/extended-resources/), built small for tests."""

from __future__ import annotations

import textwrap
from typing import Any

from tests.support.policies import sharing_policy

NS = "team-a"
# A mode dra policy on whole GPUs for the team-* namespaces: as loaded, and as a policy file.
WHOLE_DRA_SPEC = "match: {namespaces: [team-*]}\nsharing: {mode: dra, maxGpusPerPod: 2}"
WHOLE_DRA = sharing_policy(WHOLE_DRA_SPEC, name="whole")
WHOLE_DRA_FILE = (
    "apiVersion: gpuwebhook.io/v1alpha1\nkind: GPUSharingPolicy\nmetadata: {name: whole}\nspec:\n"
    + textwrap.indent(WHOLE_DRA_SPEC, "  ")
    + "\n"
)


def request(name: str = "gpu", device_class: str = "gpu.nvidia.com", **fields: Any) -> dict[str, Any]:
    return {"name": name, "exactly": {"deviceClassName": device_class, **fields}}


def mig_request(name: str, profile: str) -> dict[str, Any]:
    # demo/specs/quickstart/v1/gpu-test4.yaml: MIG slices picked by a CEL selector on the profile.
    expression = f"device.attributes['gpu.nvidia.com'].profile == '{profile}'"
    return request(name, "mig.nvidia.com", selectors=[{"cel": {"expression": expression}}])


def claim(name: str, *requests: dict[str, Any], namespace: str = NS) -> dict[str, Any]:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"devices": {"requests": list(requests) or [request()]}},
    }


def template(name: str, *requests: dict[str, Any], namespace: str = NS) -> dict[str, Any]:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaimTemplate",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"spec": {"devices": {"requests": list(requests) or [request()]}}},
    }


def device_class(name: str, expression: str, extended: str | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {"selectors": [{"cel": {"expression": expression}}]}
    if extended:
        spec["extendedResourceName"] = extended
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "DeviceClass",
        "metadata": {"name": name},
        "spec": spec,
    }


def pod(
    name: str = "p",
    *,
    claim_name: str | None = None,
    template_name: str | None = None,
    namespace: str = NS,
    limits: dict[str, str] | None = None,
    **spec: Any,
) -> dict[str, Any]:
    container: dict[str, Any] = {"name": "ctr", "image": "registry.example.com/cuda:12"}
    entries = []
    if claim_name:
        entries.append({"name": "gpu", "resourceClaimName": claim_name})
    if template_name:
        entries.append({"name": "gpu", "resourceClaimTemplateName": template_name})
    if entries:
        container["resources"] = {"claims": [{"name": "gpu"}]}
    if limits:
        container.setdefault("resources", {})["limits"] = dict(limits)
    body: dict[str, Any] = {"containers": [container], **spec}
    if entries:
        body["resourceClaims"] = entries
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace},
        "spec": body,
    }
