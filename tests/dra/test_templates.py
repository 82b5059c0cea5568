"""The ResourceClaimTemplates mode dra needs: names, shapes, schema, and `gpu-webhook dra templates`.

The opaque configs are compared with NVIDIA k8s-dra-driver-gpu's own specs, copied below as data:
demo/specs/quickstart/v1/gpu-test-mps.yaml (GpuConfig with MPS), tests/bats/specs/
gpu-timeslicing.yaml (GpuConfig with TimeSlicing), tests/bats/specs/gpu-simple-mig-ts.yaml
(MigDeviceConfig), and the MIG selector with demo/specs/quickstart/v1/gpu-test4.yaml. The
firstAvailable layout follows k8s.io/api resource/v1 types.go (DeviceSubRequest,
FirstAvailableDeviceRequestMaxSize, DeviceClaimConfiguration.Requests).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import given, settings
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
# tests/bats/specs/gpu-timeslicing.yaml, its GpuConfig's sharing.
UPSTREAM_TS_SHARING = {"strategy": "TimeSlicing", "timeSlicingConfig": {"interval": "Short"}}
# tests/bats/specs/gpu-simple-mig-ts.yaml, spec.spec.devices.config[0].opaque.
UPSTREAM_MIG_TS_OPAQUE = {
    "driver": "gpu.nvidia.com",
    "parameters": {
        "apiVersion": "resource.nvidia.com/v1beta1",
        "kind": "MigDeviceConfig",
        "sharing": {"strategy": "TimeSlicing"},
    },
}
TS = "driverFeatureGates: {TimeSlicingSettings: true}"
MPS = "driverFeatureGates: {MPSSupport: true}"
POLICIES = {
    "exclusive": "sharing: {mode: dra}",
    "timeslicing": f"sharing: {{mode: dra, strategy: TimeSlicing, timeSlicing: {{interval: Short}}, {TS}}}",
    "timeslicing-default": f"sharing: {{mode: dra, strategy: TimeSlicing, {TS}}}",
    "mps": "sharing: {mode: dra, strategy: MPS, mps: "
    f"{{defaultActiveThreadPercentage: 50, defaultPinnedDeviceMemoryLimit: 10Gi}}, {MPS}}}",
    "mps-per-device": "sharing: {mode: dra, strategy: MPS, maxGpusPerPod: 3, mps: "
    "{defaultPinnedDeviceMemoryLimit: 8Gi, defaultPerDevicePinnedMemoryLimit: {'0': 1Gi, '2': 2Gi}}, "
    f"{MPS}}}",
    "mig": "sharing: {mode: dra, strategy: MIG, gpuModel: H100-80GB, maxGpusPerPod: 2}",
    "mig-ts": "sharing: {mode: dra, strategy: MIG, gpuModel: A100-40GB, maxGpusPerPod: 1, "
    f"migSharing: TimeSlicing, {TS}}}",
    "mig-mps": "sharing: {mode: dra, strategy: MIG, gpuModel: A30-24GB, maxGpusPerPod: 2, migSharing: MPS, "
    f"mps: {{defaultActiveThreadPercentage: 25}}, {MPS}}}",
    "mig-fallback": "sharing: {mode: dra, strategy: MIG, gpuModel: A100-40GB, maxGpusPerPod: 2, "
    "fallback: [largerProfile, wholeGpu]}",
    "mig-mps-fallback": "sharing: {mode: dra, strategy: MIG, gpuModel: H100-80GB, maxGpusPerPod: 1, "
    f"migSharing: MPS, fallback: [wholeGpu, largerProfile], {MPS}}}",
}


def _devices(template: dict[str, Any]) -> dict[str, Any]:
    devices: dict[str, Any] = template["spec"]["spec"]["devices"]
    return devices


def _policy(name: str) -> Any:
    return sharing_policy(POLICIES[name], name=name)


def _referable(devices: dict[str, Any]) -> set[str]:
    """What a config entry may name: a request, or <request>/<subrequest> (resource/v1 types.go
    DeviceClaimConfiguration)."""
    names = set()
    for request in devices["requests"]:
        names.add(request["name"])
        names |= {f"{request['name']}/{sub['name']}" for sub in request.get("firstAvailable", [])}
    return names


def _one_request(template: dict[str, Any]) -> dict[str, Any]:
    (request,) = _devices(template)["requests"]
    assert request["name"] == "gpu"
    return dict(request)


@pytest.mark.parametrize("name", POLICIES)
def test_every_template_is_schema_valid_labelled_and_uniquely_named(name: str) -> None:
    shown = templates.templates_for(_policy(name), "team-a")
    names = [t["metadata"]["name"] for t in shown]
    assert len(set(names)) == len(names)
    for template in shown:
        assert_valid(template)
        assert DNS_LABEL.fullmatch(template["metadata"]["name"])
        assert template["metadata"]["labels"] == {"app.kubernetes.io/managed-by": "gpu-webhook"}
        assert template["metadata"]["namespace"] == "team-a"
        request = _one_request(template)
        subrequests = request.get("firstAvailable", [])
        assert len(subrequests) <= 8  # resource/v1 FirstAvailableDeviceRequestMaxSize
        assert len({s["name"] for s in subrequests}) == len(subrequests)
        assert all(DNS_LABEL.fullmatch(s["name"]) for s in subrequests)
        for config in _devices(template).get("config", []):
            assert set(config["requests"]) <= _referable(_devices(template)), config


def test_counts_run_to_max_gpus_per_pod_or_eight() -> None:
    whole = templates.templates_for(_policy("exclusive"), "ns")
    assert [_one_request(t)["exactly"]["count"] for t in whole] == list(range(1, 9))
    mig = templates.templates_for(_policy("mig"), "ns")
    plain = [p for p in gpu.MIG_PROFILES["H100-80GB"] if p.plain]
    assert len(mig) == 2 * len(plain)


def test_mps_carries_the_drivers_gpu_config() -> None:
    (template, *_) = templates.templates_for(_policy("mps"), "ns")
    assert _devices(template)["config"] == [{"requests": ["gpu"], "opaque": UPSTREAM_MPS_OPAQUE}]


@pytest.mark.parametrize(
    ("name", "sharing"),
    [
        pytest.param("timeslicing", UPSTREAM_TS_SHARING, id="tests/bats/specs/gpu-timeslicing.yaml"),
        pytest.param("timeslicing-default", {"strategy": "TimeSlicing"}, id="driver-default-interval"),
    ],
)
def test_time_slicing_config(name: str, sharing: dict[str, object]) -> None:
    (template, *_) = templates.templates_for(_policy(name), "ns")
    (config,) = _devices(template)["config"]
    assert config["opaque"]["parameters"]["sharing"] == sharing


def test_exclusive_carries_no_config() -> None:
    for template in templates.templates_for(_policy("exclusive"), "ns"):
        assert "config" not in _devices(template)


def test_per_device_limits_stop_at_the_templates_count() -> None:
    """k8s-dra-driver-gpu api/nvidia.com/resource/v1beta1/sharing.go uuidSet.Normalize refuses an
    index beyond the claim's devices, so a template holds only the indexes its count reaches."""
    found = {}
    for template in templates.templates_for(_policy("mps-per-device"), "ns"):
        count = _one_request(template)["exactly"]["count"]
        (config,) = _devices(template)["config"]
        mps = config["opaque"]["parameters"]["sharing"]["mpsConfig"]
        assert mps["defaultPinnedDeviceMemoryLimit"] == "8Gi"
        found[count] = mps.get("defaultPerDevicePinnedMemoryLimit")
    assert found == {1: {"0": "1Gi"}, 2: {"0": "1Gi"}, 3: {"0": "1Gi", "2": "2Gi"}}


def _mig_template(name: str, model: str, memory_mib: int, count: int = 1) -> dict[str, Any]:
    profile = gpu.fitting_profile(model, memory_mib)
    assert profile is not None
    return templates.template(_policy(name), "ns", Shape(count, profile))


def _selector(profile: str) -> list[dict[str, Any]]:
    return [{"cel": {"expression": f"device.attributes['gpu.nvidia.com'].profile == '{profile}'"}}]


def test_mig_selects_the_profile_on_the_mig_class_with_a_bare_mig_device_config() -> None:
    """MigDeviceConfig without `sharing` (k8s-dra-driver-gpu api/nvidia.com/resource/v1beta1/migconfig.go)."""
    template = _mig_template("mig", "H100-80GB", 20 * 1024)
    profile = gpu.fitting_profile("H100-80GB", 20 * 1024)
    assert profile is not None
    assert _one_request(template)["exactly"] == {
        "deviceClassName": "mig.nvidia.com",
        "allocationMode": "ExactCount",
        "count": 1,
        "selectors": _selector(profile.name),
    }
    parameters = {"apiVersion": "resource.nvidia.com/v1beta1", "kind": "MigDeviceConfig"}
    assert _devices(template)["config"] == [
        {"requests": ["gpu"], "opaque": {"driver": "gpu.nvidia.com", "parameters": parameters}}
    ]


def test_shared_mig_slices_carry_the_drivers_mig_device_config() -> None:
    (template, *_) = templates.templates_for(_policy("mig-ts"), "ns")
    assert _devices(template)["config"] == [{"requests": ["gpu"], "opaque": UPSTREAM_MIG_TS_OPAQUE}]
    (template, *_) = templates.templates_for(_policy("mig-mps"), "ns")
    (config,) = _devices(template)["config"]
    assert config["opaque"]["parameters"] == {
        "apiVersion": "resource.nvidia.com/v1beta1",
        "kind": "MigDeviceConfig",
        "sharing": {"strategy": "MPS", "mpsConfig": {"defaultActiveThreadPercentage": 25}},
    }


def test_fallback_asks_first_available_in_order() -> None:
    """A100-40GB: 4Gi fits 1g.5gb; the next larger plain profile is 1g.10gb, then a whole GPU.
    Subrequests as resource/v1 types.go DeviceSubRequest; configs name <request>/<subrequest>,
    which is how the driver matches them (cmd/gpu-kubelet-plugin/device_state.go)."""
    template = _mig_template("mig-fallback", "A100-40GB", 4096, count=2)
    assert _one_request(template)["firstAvailable"] == [
        {
            "name": "mig-1g-5gb",
            "deviceClassName": "mig.nvidia.com",
            "allocationMode": "ExactCount",
            "count": 2,
            "selectors": _selector("1g.5gb"),
        },
        {
            "name": "mig-1g-10gb",
            "deviceClassName": "mig.nvidia.com",
            "allocationMode": "ExactCount",
            "count": 2,
            "selectors": _selector("1g.10gb"),
        },
        {
            "name": "whole-gpu",
            "deviceClassName": "gpu.nvidia.com",
            "allocationMode": "ExactCount",
            "count": 2,
        },
    ]
    bare = {"apiVersion": "resource.nvidia.com/v1beta1", "kind": "MigDeviceConfig"}
    assert _devices(template)["config"] == [
        {
            "requests": ["gpu/mig-1g-5gb", "gpu/mig-1g-10gb"],
            "opaque": {"driver": "gpu.nvidia.com", "parameters": bare},
        }
    ]


def test_the_largest_profile_has_no_larger_one() -> None:
    template = _mig_template("mig-fallback", "A100-40GB", 39 * 1024)
    names = [s["name"] for s in _one_request(template)["firstAvailable"]]
    assert names == ["mig-7g-40gb", "whole-gpu"]


def test_shared_fallback_shares_the_whole_gpu_too() -> None:
    """The whole-GPU alternative of an MPS-shared MIG template gets a GpuConfig with the same MPS:
    a MigDeviceConfig would be refused on a full GPU (cmd/gpu-kubelet-plugin/device_state.go)."""
    template = _mig_template("mig-mps-fallback", "H100-80GB", 8 * 1024)
    assert [s["name"] for s in _one_request(template)["firstAvailable"]] == [
        "mig-1g-10gb",
        "whole-gpu",
        "mig-1g-20gb",
    ]
    configs = {tuple(c["requests"]): c["opaque"]["parameters"] for c in _devices(template)["config"]}
    mps = {"strategy": "MPS"}
    assert configs == {
        ("gpu/mig-1g-10gb", "gpu/mig-1g-20gb"): {
            "apiVersion": "resource.nvidia.com/v1beta1",
            "kind": "MigDeviceConfig",
            "sharing": mps,
        },
        ("gpu/whole-gpu",): {
            "apiVersion": "resource.nvidia.com/v1beta1",
            "kind": "GpuConfig",
            "sharing": mps,
        },
    }


@pytest.mark.parametrize(
    ("model", "profile", "larger"),
    [
        ("A100-40GB", "1g.5gb", "1g.10gb"),
        ("A100-40GB", "1g.10gb", "2g.10gb"),  # same memory, more compute
        ("A100-40GB", "4g.20gb", "7g.40gb"),
        ("A100-40GB", "7g.40gb", None),
        ("A30-24GB", "1g.6gb", "2g.12gb"),  # media profiles (+me) are never chosen
    ],
)
def test_larger_profile_follows_the_rewrites_order(model: str, profile: str, larger: str | None) -> None:
    (found,) = [p for p in gpu.MIG_PROFILES[model] if p.name == profile]
    bigger = templates.larger_profile(model, found)
    assert (bigger.name if bigger else None) == larger


def test_shared_strategies_share_one_claim() -> None:
    shared = {name: templates.shares_claim(_policy(name)) for name in POLICIES}
    assert shared == {
        "exclusive": False,
        "timeslicing": True,
        "timeslicing-default": True,
        "mps": True,
        "mps-per-device": True,
        "mig": False,
        "mig-ts": True,
        "mig-mps": True,
        "mig-fallback": False,
        "mig-mps-fallback": True,
    }


def test_a_templates_shape_is_known_by_its_name() -> None:
    policy = _policy("mig")
    for shape in templates.shapes(policy):
        assert templates.shape_named(policy, templates.template_name(policy, shape)) == shape
    assert templates.shape_named(policy, "someone-elses") is None
    assert templates.shape_named(policy, None) is None


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
        f"sharing: {{mode: dra, strategy: MPS, mps: {{defaultActiveThreadPercentage: 50}}, {MPS}}}"
    )
    b = sharing_policy(
        f"sharing: {{mode: dra, strategy: MPS, mps: {{defaultActiveThreadPercentage: 20}}, {MPS}}}"
    )
    assert templates.template_name(a, Shape(1)) != templates.template_name(b, Shape(1))


# The kind of opaque config the kubelet plugin applies to each device class's devices
# (k8s-dra-driver-gpu cmd/gpu-kubelet-plugin/device_state.go: GpuConfig on type gpu only,
# MigDeviceConfig on MIG devices only).
CONFIG_FOR_CLASS = {"gpu.nvidia.com": "GpuConfig", "mig.nvidia.com": "MigDeviceConfig"}
FALLBACKS = st.lists(st.sampled_from(["largerProfile", "wholeGpu"]), unique=True, max_size=2)


@settings(max_examples=25, deadline=None)
@given(
    st.sampled_from(gpu.GPU_MODELS), st.sampled_from(["", "TimeSlicing", "MPS"]), FALLBACKS, st.integers(1, 2)
)
def test_every_mig_template_is_valid_and_configures_each_device_with_its_kind(
    model: str, sharing: str, fallback: list[str], most: int
) -> None:
    gates = {"": "", "TimeSlicing": f", migSharing: TimeSlicing, {TS}", "MPS": f", migSharing: MPS, {MPS}"}
    policy = sharing_policy(
        f"sharing: {{mode: dra, strategy: MIG, gpuModel: {model}, maxGpusPerPod: {most}, "
        f"fallback: [{', '.join(fallback)}]{gates[sharing]}}}"
    )
    for template in templates.templates_for(policy, "ns"):
        assert_valid(template)
        request = _one_request(template)
        alternatives = request.get("firstAvailable") or [{"name": "", **request["exactly"]}]
        kinds: dict[str, str] = {}
        for config in _devices(template)["config"]:
            parameters = config["opaque"]["parameters"]
            assert ("sharing" in parameters) == bool(sharing)
            kinds |= dict.fromkeys(config["requests"], parameters["kind"])
        for alternative in alternatives:
            name = f"gpu/{alternative['name']}" if alternative["name"] else "gpu"
            expected = CONFIG_FOR_CLASS[alternative["deviceClassName"]]
            assert kinds.get(name, "GpuConfig" if not sharing else None) == expected, (name, kinds)


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
