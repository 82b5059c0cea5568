"""The ResourceClaimTemplates mode dra needs: names, shapes, schema, and `gpu-webhook dra templates`.

The opaque config is compared with NVIDIA k8s-dra-driver-gpu demo/specs/quickstart/v1/gpu-test-mps.yaml
(its GpuConfig block, copied below as data), and the MIG selector with gpu-test4.yaml.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st

from tests.support.cli import gpu_webhook
from tests.support.policies import sharing_policy
from tests.support.schema import assert_valid
from webhook import gpu
from webhook.dra import templates
from webhook.dra.templates import Shape

DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
# demo/specs/quickstart/v1/gpu-test-mps.yaml, spec.spec.devices.config[0].opaque.
UPSTREAM_MPS_OPAQUE = {
    "driver": "gpu.nvidia.com",
    "parameters": {
        "apiVersion": "resource.nvidia.com/v1beta1",
        "kind": "GpuConfig",
        "sharing": {
            "strategy": "MPS",
            "mpsConfig": {"defaultActiveThreadPercentage": 50, "defaultPinnedDeviceMemoryLimit": "10Gi"},
        },
    },
}
POLICIES = {
    "exclusive": "sharing: {mode: dra}",
    "timeslicing": "sharing: {mode: dra, strategy: TimeSlicing, timeSlicing: {interval: Medium}}",
    "timeslicing-default": "sharing: {mode: dra, strategy: TimeSlicing}",
    "mps": "sharing: {mode: dra, strategy: MPS, mps: "
    "{defaultActiveThreadPercentage: 50, defaultPinnedDeviceMemoryLimit: 10Gi}}",
    "mig": "sharing: {mode: dra, strategy: MIG, gpuModel: H100-80GB, maxGpusPerPod: 2}",
}


def _devices(template: dict[str, Any]) -> dict[str, Any]:
    devices: dict[str, Any] = template["spec"]["spec"]["devices"]
    return devices


@pytest.mark.parametrize("name", POLICIES)
def test_every_template_is_schema_valid_labelled_and_uniquely_named(name: str) -> None:
    policy = sharing_policy(POLICIES[name], name=name)
    shown = templates.templates_for(policy, "team-a")
    names = [t["metadata"]["name"] for t in shown]
    assert len(set(names)) == len(names)
    for template in shown:
        assert_valid(template)
        assert DNS_LABEL.fullmatch(template["metadata"]["name"])
        assert template["metadata"]["labels"] == {"app.kubernetes.io/managed-by": "gpu-webhook"}
        assert template["metadata"]["namespace"] == "team-a"


def test_counts_run_to_max_gpus_per_pod_or_eight() -> None:
    whole = templates.templates_for(sharing_policy(POLICIES["exclusive"]), "ns")
    assert [_devices(t)["requests"][0]["exactly"]["count"] for t in whole] == list(range(1, 9))
    mig = templates.templates_for(sharing_policy(POLICIES["mig"]), "ns")
    plain = [p for p in gpu.MIG_PROFILES["H100-80GB"] if p.plain]
    assert len(mig) == 2 * len(plain)


def test_mps_carries_the_drivers_gpu_config() -> None:
    (template, *_) = templates.templates_for(sharing_policy(POLICIES["mps"]), "ns")
    assert _devices(template)["config"] == [{"requests": ["gpu"], "opaque": UPSTREAM_MPS_OPAQUE}]


@pytest.mark.parametrize(
    ("name", "sharing"),
    [
        ("timeslicing", {"strategy": "TimeSlicing", "timeSlicingConfig": {"interval": "Medium"}}),
        ("timeslicing-default", {"strategy": "TimeSlicing"}),
    ],
)
def test_time_slicing_config(name: str, sharing: dict[str, object]) -> None:
    (template, *_) = templates.templates_for(sharing_policy(POLICIES[name]), "ns")
    (config,) = _devices(template)["config"]
    assert config["opaque"]["parameters"]["sharing"] == sharing


def test_exclusive_and_mig_carry_no_config() -> None:
    for name in ("exclusive", "mig"):
        for template in templates.templates_for(sharing_policy(POLICIES[name]), "ns"):
            assert "config" not in _devices(template)


def test_mig_selects_the_profile_on_the_mig_class() -> None:
    policy = sharing_policy(POLICIES["mig"])
    profile = gpu.fitting_profile("H100-80GB", 20 * 1024)
    assert profile is not None
    exactly = templates.template(policy, "ns", Shape(1, profile))["spec"]["spec"]["devices"]["requests"][0][
        "exactly"
    ]
    assert exactly == {
        "deviceClassName": "mig.nvidia.com",
        "allocationMode": "ExactCount",
        "count": 1,
        "selectors": [
            {"cel": {"expression": f"device.attributes['gpu.nvidia.com'].profile == '{profile.name}'"}}
        ],
    }


SEGMENT = st.from_regex(r"[a-z0-9]([-a-z0-9]{0,40}[a-z0-9])?", fullmatch=True)
NAMES = st.lists(SEGMENT, min_size=1, max_size=5).map(".".join)


@given(NAMES, st.integers(1, 64), st.text(min_size=1, max_size=70))
def test_names_are_dns_labels_and_deterministic(policy_name: str, count: int, container: str) -> None:
    policy = sharing_policy(POLICIES["exclusive"], name=policy_name)
    name = templates.template_name(policy, Shape(count))
    assert DNS_LABEL.fullmatch(name) and len(name) <= 63
    assert name == templates.template_name(
        sharing_policy(POLICIES["exclusive"], name=policy_name), Shape(count)
    )
    claim = templates.claim_name(container.lower())
    assert len(claim) <= 63


def test_a_changed_config_gets_new_names() -> None:
    a = sharing_policy(
        "sharing: {mode: dra, strategy: MPS, mps: {defaultActiveThreadPercentage: 50}}", name="p"
    )
    b = sharing_policy(
        "sharing: {mode: dra, strategy: MPS, mps: {defaultActiveThreadPercentage: 20}}", name="p"
    )
    assert templates.template_name(a, Shape(1)) != templates.template_name(b, Shape(1))


POLICY_FILE = """\
apiVersion: gpuwebhook.io/v1alpha1
kind: GPUSharingPolicy
metadata: {name: team-mig}
spec:
  match: {namespaces: [team-*], namespaceSelector: {matchLabels: {gpu: mig}}}
  sharing: {mode: dra, strategy: MIG, gpuModel: A100-40GB, maxGpusPerPod: 1}
"""


def test_the_command_prints_what_the_namespace_needs(tmp_path: Path) -> None:
    (tmp_path / "mig.yaml").write_text(POLICY_FILE)
    result = gpu_webhook(
        "dra",
        "templates",
        "--policies",
        str(tmp_path),
        "--namespace",
        "team-a",
        "--namespace-label",
        "gpu=mig",
    )
    assert result.returncode == 0, result.stderr
    shown = list(yaml.safe_load_all(result.stdout))
    policy = sharing_policy(
        "sharing: {mode: dra, strategy: MIG, gpuModel: A100-40GB, maxGpusPerPod: 1}", name="team-mig"
    )
    assert shown == templates.templates_for(policy, "team-a")
    for template in shown:
        assert_valid(template)
    elsewhere = gpu_webhook("dra", "templates", "--policies", str(tmp_path), "--namespace", "team-a")
    assert elsewhere.returncode == 0 and elsewhere.stdout == ""
    assert "no dra policy applies" in elsewhere.stderr


SHADOWING = sharing_policy("match: {namespaces: [team-a]}\nsharing: {mode: timeslice}", name="first")
SELECTIVE = sharing_policy(
    "match: {namespaces: [team-*], podSelector: {matchLabels: {gpu: sliced}}}\nsharing: {mode: timeslice}",
    name="some-pods",
)
DRA_LATER = sharing_policy(
    "match: {namespaces: [team-*]}\nsharing: {mode: dra, maxGpusPerPod: 1}", name="later"
)


@pytest.mark.parametrize(
    ("ordered", "namespace", "reached"),
    [
        ([SHADOWING, DRA_LATER], "team-a", []),  # the first policy takes every pod of team-a
        ([SHADOWING, DRA_LATER], "team-b", ["later"]),
        ([SELECTIVE, DRA_LATER], "team-a", ["later"]),  # only some pods: the rest reach the dra policy
        ([DRA_LATER, SHADOWING], "team-a", ["later"]),
    ],
)
def test_only_policies_some_pod_can_reach_need_templates(
    ordered: list[Any], namespace: str, reached: list[str]
) -> None:
    labels = {"kubernetes.io/metadata.name": namespace}
    assert [p.name for p in templates.reachable(ordered, namespace, labels)] == reached
    wanted = {
        t["metadata"]["annotations"][templates.POLICY_ANNOTATION]
        for t in templates.needed(ordered, namespace, labels)
    }
    assert wanted == set(reached)
