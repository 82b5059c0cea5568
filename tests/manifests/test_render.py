"""`gpu-webhook manifests`: options, policy flattening, certificate checks, and the base it reads."""

from __future__ import annotations

import datetime as dt
import json
import os
from pathlib import Path

import pytest
import yaml

from tests.manifests.objects import REPO, one, run_cli, webhooks_by_name
from tests.support.policies import TEAM_SHARING
from tests.support.schema import assert_valid
from webhook import certs
from webhook.bundle import CONFIGMAP_MAX_BYTES, configmap_yaml, ship
from webhook.errors import CertError, ConfigError
from webhook.manifests import (
    Manifest,
    RenderOptions,
    base_directory,
    check_serving_cert,
    load_base,
    render,
    set_flag,
    to_yaml,
)

WORKLOADS = "workloads.validate.gpuwebhook.io"
NON_GPU = "non-gpu-pods.mutate.gpuwebhook.io"


def _parse(text: str) -> list[Manifest]:
    return [doc for doc in yaml.safe_load_all(text) if doc is not None]


def _args(objects: list[Manifest]) -> list[str]:
    args: list[str] = one(objects, "StatefulSet")["spec"]["template"]["spec"]["containers"][0]["args"]
    return args


def test_another_namespace_leaves_no_trace_of_the_default(tmp_path: Path) -> None:
    certs.generate(tmp_path, "gpu-webhook", "gpu-admission", days=30)
    result = run_cli("--namespace", "gpu-admission", "--cert-dir", str(tmp_path))
    assert result.returncode == 0, result.stderr
    assert "gpu-system" not in result.stdout
    objects = _parse(result.stdout)
    assert one(objects, "Namespace")["metadata"]["name"] == "gpu-admission"
    for obj in objects:
        if (
            obj["kind"] not in {"Namespace", "ClusterRole", "ClusterRoleBinding"}
            and "WebhookConfiguration" not in obj["kind"]
        ):
            assert obj["metadata"]["namespace"] == "gpu-admission", obj["kind"]
    for hook in webhooks_by_name(objects).values():
        assert hook["clientConfig"]["service"]["namespace"] == "gpu-admission"
        assert ["kube-system", "gpu-admission"] in [
            e["values"][:2] for e in hook["namespaceSelector"]["matchExpressions"]
        ]
    assert one(objects, "ClusterRoleBinding")["subjects"][0]["namespace"] == "gpu-admission"


def test_a_certificate_for_another_namespace_is_refused(cert_dir: Path) -> None:
    """kube-apiserver would fail the TLS handshake, and failurePolicy Fail would block GPU pods."""
    result = run_cli("--namespace", "gpu-admission", "--cert-dir", str(cert_dir))
    assert result.returncode == 2
    assert "not valid for gpu-webhook.gpu-admission.svc" in result.stderr
    assert "certs generate" in result.stderr
    assert result.stdout == ""


def test_an_expired_certificate_is_refused(cert_dir: Path) -> None:
    check_serving_cert(cert_dir, "gpu-webhook", "gpu-system")
    later = dt.datetime.now(dt.UTC) + dt.timedelta(days=31)
    with pytest.raises(CertError, match="expired"):
        check_serving_cert(cert_dir, "gpu-webhook", "gpu-system", now=later)


def test_missing_certificate_files_are_a_clear_error(tmp_path: Path) -> None:
    result = run_cli("--cert-dir", str(tmp_path))
    assert result.returncode == 2
    assert "cannot read" in result.stderr


def test_without_certificates_nothing_secret_is_rendered(tmp_path: Path) -> None:
    result = run_cli(cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "no --cert-dir" in result.stderr
    objects = _parse(result.stdout)
    assert all(obj["kind"] != "Secret" for obj in objects)
    assert all("caBundle" not in hook["clientConfig"] for hook in webhooks_by_name(objects).values())


@pytest.mark.parametrize("where", ["elsewhere", "repo"])
def test_the_security_bundle_is_shipped_wherever_it_is_run(tmp_path: Path, where: str) -> None:
    """From any directory, and from the checkout whose policies/ holds the demo examples and
    suites: the ConfigMap is the packaged bundle, and only that."""
    cwd = REPO if where == "repo" else tmp_path
    if where == "elsewhere":
        (tmp_path / "policies").mkdir()
        (tmp_path / "policies" / "gpu.yaml").write_text("kind: X\n")
    result = run_cli(cwd=cwd)
    assert result.returncode == 0, result.stderr
    data = one(_parse(result.stdout), "ConfigMap")["data"]
    assert data == ship([]).data
    assert data and all(key.startswith("security__") for key in data)
    assert not any(".test." in key or "example" in key for key in data)
    assert "GPU sharing policies: 0, GPU quotas: 0" in result.stderr  # none unless given


def test_the_packaged_bundle_is_what_the_checkout_holds() -> None:
    shipped = ship([]).data
    on_disk = {
        "security__" + "__".join(path.relative_to(REPO / "policies" / "security").parts): path.read_text()
        for path in sorted((REPO / "policies" / "security").rglob("*.yaml"))
    }
    assert shipped == on_disk


@pytest.mark.parametrize(
    "args",
    [
        ("--no-security-bundle",),
        ("--no-security-bundle", "--policies", "EMPTY"),
    ],
)
def test_an_empty_policy_set_is_refused_unless_asked_for(tmp_path: Path, args: tuple[str, ...]) -> None:
    (tmp_path / "EMPTY").mkdir()
    refused = run_cli(*args, cwd=tmp_path)
    assert refused.returncode == 2 and "enforce nothing" in refused.stderr and not refused.stdout
    allowed = run_cli(*args, "--allow-empty-policies", cwd=tmp_path)
    assert allowed.returncode == 0, allowed.stderr
    assert one(_parse(allowed.stdout), "ConfigMap")["data"] == {}


@pytest.mark.parametrize("directory", ["policies", "policies/examples"])
def test_the_demo_policies_are_refused(directory: str) -> None:
    result = run_cli("--policies", str(REPO / directory))
    assert result.returncode == 2 and "demo policies" in result.stderr and not result.stdout


def test_a_team_directory_ships_beside_the_bundle_without_its_suites(tmp_path: Path) -> None:
    team = _write(
        tmp_path / "team",
        {"gpu.yaml": TEAM_SHARING, "gpu.test.yaml": "kind: PolicyTest\n", "README.md": "notes"},
    )
    result = run_cli("--policies", str(team))
    assert result.returncode == 0, result.stderr
    data = one(_parse(result.stdout), "ConfigMap")["data"]
    assert data == {**ship([]).data, "gpu.yaml": TEAM_SHARING}
    assert "GPU sharing policies: 1" in result.stderr
    assert "gpu.test.yaml: a test suite" in result.stderr


def test_a_team_directory_that_does_not_compile_is_refused(tmp_path: Path) -> None:
    team = _write(tmp_path / "team", {"gpu.yaml": TEAM_SHARING.replace("timeslice", "magic")})
    result = run_cli("--policies", str(team))
    assert result.returncode == 2 and not result.stdout
    assert f"{team / 'gpu.yaml'}:6: spec.sharing.mode" in result.stderr


def test_a_named_policy_directory_must_exist(tmp_path: Path) -> None:
    result = run_cli("--policies", str(tmp_path / "absent"))
    assert result.returncode == 2
    assert "does not exist" in result.stderr


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--replicas", "0"], "must be at least 1"),
        (["--workloads-failure-policy", "Warn"], "invalid choice"),
        (["--serve-flag", "log-level"], "expected FLAG=VALUE"),
        (["--namespace", "GPU_System"], "not a valid DNS label"),
        (["--non-gpu-failure-policy", "Open"], "invalid choice"),
    ],
)
def test_bad_options_are_errors(tmp_path: Path, args: list[str], message: str) -> None:
    result = run_cli(*args, cwd=tmp_path)
    assert result.returncode == 2
    assert message in result.stderr
    assert "Traceback" not in result.stderr and not result.stdout


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--control-plane-cidr", "10.0.0.1/28"], "'10.0.0.1/28': 10.0.0.1/28 has host bits set"),
        (["--control-plane-cidr", "10.0.0.0/33"], "expected a network such as 10.0.0.0/28"),
        (["--control-plane-cidr", "control-plane"], "expected a network such as 10.0.0.0/28"),
        (["--control-plane-cidr", "0.0.0.0/0"], "admits every address"),
        (["--storage-class", "Fast SSD"], "is not a StorageClass name"),
        (["--image", "registry.example.com/GPU Webhook:1"], "is not an image reference"),
        (["--image", ""], "is not an image reference"),
    ],
)
def test_bad_values_are_one_line_errors(tmp_path: Path, args: list[str], message: str) -> None:
    """Refused before anything is rendered, in one line that names the flag (a ConfigError)."""
    result = run_cli(*args, cwd=tmp_path)
    assert result.returncode == 2 and not result.stdout
    assert result.stderr.splitlines() == [result.stderr.strip()], result.stderr
    assert result.stderr.startswith(f"gpu-webhook: {args[0]} ") and message in result.stderr


@pytest.mark.parametrize(
    "options",
    [
        RenderOptions(control_plane_cidrs=["10.0.0.0/28", "10.0.0.300/32"]),
        RenderOptions(storage_class="-fast"),
        RenderOptions(image="gpu webhook"),
    ],
)
def test_render_refuses_bad_values_with_a_config_error(options: RenderOptions) -> None:
    with pytest.raises(ConfigError):
        render(options)


@pytest.mark.parametrize(
    ("given", "rendered"),
    [
        (["192.0.2.0/28"], ["192.0.2.0/28"]),
        (["192.0.2.7", " 2001:db8::/64"], ["192.0.2.7/32", "2001:db8::/64"]),
    ],
)
def test_control_plane_cidrs_admit_only_the_control_plane(
    tmp_path: Path, given: list[str], rendered: list[str]
) -> None:
    args = [arg for cidr in given for arg in ("--control-plane-cidr", cidr)]
    result = run_cli(*args, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    objects = _parse(result.stdout)
    ingress = one(objects, "NetworkPolicy")["spec"]["ingress"]
    assert [peer["ipBlock"]["cidr"] for peer in ingress[0]["from"]] == rendered
    assert ingress[1]["from"] == [
        {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "monitoring"}}}
    ]
    assert all(rule["ports"] == [{"protocol": "TCP", "port": 8443}] for rule in ingress)
    for obj in objects:
        assert_valid(obj)


def test_without_control_plane_cidrs_the_port_is_open_to_the_cluster() -> None:
    (rule,) = one(render(RenderOptions()), "NetworkPolicy")["spec"]["ingress"]
    assert "from" not in rule


def test_storage_class_and_image_reach_the_statefulset(tmp_path: Path) -> None:
    image = "registry.example.com:5000/platform/gpu-webhook:0.1.0"
    result = run_cli("--storage-class", "fast-ssd.example.com", "--image", image, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    objects = _parse(result.stdout)
    server = one(objects, "StatefulSet")
    assert [c["spec"]["storageClassName"] for c in server["spec"]["volumeClaimTemplates"]] == [
        "fast-ssd.example.com"
    ]
    assert [c["image"] for c in server["spec"]["template"]["spec"]["containers"]] == [image]
    assert "no --image" not in result.stderr and "no --storage-class" not in result.stderr
    for obj in objects:
        assert_valid(obj)


def test_the_placeholders_are_named_when_left_in(tmp_path: Path) -> None:
    result = run_cli(cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "no --image: the StatefulSet runs the placeholder gpu-webhook:" in result.stderr
    assert "no --storage-class: the audit log volumes need a default StorageClass" in result.stderr
    claim = one(_parse(result.stdout), "StatefulSet")["spec"]["volumeClaimTemplates"][0]
    assert "storageClassName" not in claim["spec"]


def test_replicas_image_and_quota() -> None:
    objects = render(RenderOptions(replicas=12, image="registry.example/gpu-webhook@sha256:" + "0" * 64))
    deployment = one(objects, "StatefulSet")
    assert deployment["spec"]["replicas"] == 12
    assert deployment["spec"]["template"]["spec"]["containers"][0]["image"].startswith("registry.example/")
    assert int(one(objects, "ResourceQuota")["spec"]["hard"]["pods"]) >= 13


def test_one_replica_is_allowed_with_a_warning(tmp_path: Path) -> None:
    result = run_cli("--replicas", "1", cwd=tmp_path)
    assert result.returncode == 0
    assert "not highly available" in result.stderr


def _changed(options: RenderOptions) -> dict[str, str]:
    """The webhooks `options` change, each with its failurePolicy there."""
    default = webhooks_by_name(render(RenderOptions()))
    relaxed = webhooks_by_name(render(options))
    return {name: hook["failurePolicy"] for name, hook in relaxed.items() if hook != default[name]}


def test_workloads_failure_policy_changes_that_webhook_only() -> None:
    assert _changed(RenderOptions(workloads_failure_policy="Ignore")) == {WORKLOADS: "Ignore"}


def test_non_gpu_failure_policy_opens_every_webhook_pods_without_gpus_pass() -> None:
    """Both, or an outage would still stop them at the other; GPU pods keep failing closed."""
    assert _changed(RenderOptions(non_gpu_failure_policy="Ignore")) == {
        NON_GPU: "Ignore",
        WORKLOADS: "Ignore",
    }
    narrowed = RenderOptions(non_gpu_failure_policy="Ignore", workloads_failure_policy="Fail")
    assert _changed(narrowed) == {NON_GPU: "Ignore"}
    for name, hook in webhooks_by_name(render(RenderOptions())).items():
        assert hook["failurePolicy"] == ("Ignore" if name.startswith("advisory.") else "Fail"), name


@pytest.mark.parametrize(
    ("args", "note"),
    [
        (["--non-gpu-failure-policy", "Ignore"], None),
        (["--workloads-failure-policy", "Ignore"], "non-gpu-pods.mutate.gpuwebhook.io still fails closed"),
    ],
)
def test_the_non_gpu_choice_on_the_command_line(tmp_path: Path, args: list[str], note: str | None) -> None:
    result = run_cli(*args, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    hooks = webhooks_by_name(_parse(result.stdout))
    assert hooks[WORKLOADS]["failurePolicy"] == "Ignore"
    assert hooks[NON_GPU]["failurePolicy"] == ("Fail" if note else "Ignore")
    assert hooks["gpu-pods.mutate.gpuwebhook.io"]["failurePolicy"] == "Fail"
    assert (note is not None and note in result.stderr) or "still fails closed" not in result.stderr


def test_serve_flags_replace_or_extend_the_arguments(tmp_path: Path) -> None:
    result = run_cli("--serve-flag", "log-level=debug", "--serve-flag=--audit-fsync=always", cwd=tmp_path)
    args = _args(_parse(result.stdout))
    assert args.count("--log-level=debug") == 1
    assert not any(arg == "--log-level=info" for arg in args)
    assert args[-1] == "--audit-fsync=always"


@pytest.mark.parametrize(
    ("args", "flag", "value", "expected"),
    [
        (["--a=1", "--b=2"], "a", "3", ["--a=3", "--b=2"]),  # in place: the base and the CLI agree
        (["--a=1"], "--c", "x=y", ["--a=1", "--c=x=y"]),
        (["--ab=1"], "a", "2", ["--ab=1", "--a=2"]),
        (["--a", "--a=1"], "a", "", ["--a="]),
    ],
)
def test_set_flag(args: list[str], flag: str, value: str, expected: list[str]) -> None:
    assert set_flag(args, flag, value) == expected


def test_render_does_not_change_the_base_it_is_given() -> None:
    base = load_base()
    before = json.dumps(base, sort_keys=True)
    render(RenderOptions(namespace="elsewhere", replicas=4, serve_flags={"log-level": "debug"}), base)
    assert json.dumps(base, sort_keys=True) == before


def test_output_is_what_to_yaml_gives(tmp_path: Path) -> None:
    assert run_cli(cwd=tmp_path).stdout == to_yaml(render(RenderOptions(policies=ship([]).data)))


# Policy files become ConfigMap keys.


def _write(root: Path, files: dict[str, str | bytes]) -> Path:
    for name, content in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content)
    return root


@pytest.mark.parametrize(
    ("files", "expected"),
    [
        ({"a.yaml": "x"}, {"a.yaml": "x"}),
        ({"team/a.yaml": "x", "team/rego/b.yml": "y"}, {"team__a.yaml": "x", "team__rego__b.yml": "y"}),
        ({"a.yaml": "x", "notes.md": "y", "lib.rego": "z", "a.test.yaml": "t"}, {"a.yaml": "x"}),
        ({".hidden.yaml": "x", ".git/config": "y", "ok.yml": "z"}, {"ok.yml": "z"}),
        ({}, {}),
    ],
)
def test_policy_files_are_flattened(
    tmp_path: Path, files: dict[str, str | bytes], expected: dict[str, str]
) -> None:
    assert _data(_write(tmp_path, files)) == expected


def test_a_mounted_config_map_round_trips(tmp_path: Path) -> None:
    """Rendering from a pod's ConfigMap mount (..data symlinks) gives back the same keys."""
    _write(tmp_path / "..2026_11_29", {"a.yaml": "x", "team__b.yaml": "y"})
    (tmp_path / "..data").symlink_to("..2026_11_29")
    for key in ("a.yaml", "team__b.yaml"):
        (tmp_path / key).symlink_to(f"..data/{key}")
    assert _data(tmp_path) == {"a.yaml": "x", "team__b.yaml": "y"}


@pytest.mark.parametrize(
    ("files", "message"),
    [
        ({"a__b.yaml": "x", "a/b.yaml": "y"}, "both become the ConfigMap key 'a__b.yaml'"),
        ({"my policy.yaml": "x"}, "a ConfigMap key may hold only"),
        ({"binary.yaml": b"\xff\xfe"}, "must be UTF-8"),
        ({"big.yaml": "x" * CONFIGMAP_MAX_BYTES}, "at most 1 MiB"),
    ],
)
def test_unusable_policy_directories_are_refused(
    tmp_path: Path, files: dict[str, str | bytes], message: str
) -> None:
    with pytest.raises(ConfigError, match=message):
        _data(_write(tmp_path, files))


# The base the renderer reads.


def test_the_packaged_base_is_the_kustomize_base() -> None:
    assert base_directory().resolve() == (REPO / "manifests" / "base").resolve()
    assert (REPO / "webhook" / "base_manifests").resolve() == (REPO / "manifests" / "base").resolve()


def test_the_base_is_a_plain_list_of_every_file() -> None:
    """No generators or transformers: the renderer must see exactly what kustomize builds."""
    directory = REPO / "manifests" / "base"
    kustomization = yaml.safe_load((directory / "kustomization.yaml").read_text())
    assert set(kustomization) == {"apiVersion", "kind", "resources"}
    listed = kustomization["resources"]
    assert len(listed) == len(set(listed))
    assert set(listed) == {p.name for p in directory.glob("*.yaml")} - {"kustomization.yaml"}


def test_the_base_image_is_this_release() -> None:
    from webhook import __version__

    image = one(load_base(), "StatefulSet")["spec"]["template"]["spec"]["containers"][0]["image"]
    assert image.endswith(":" + __version__)


def test_policy_directory_listing_ignores_unreadable_entries(tmp_path: Path) -> None:
    _write(tmp_path, {"a.yaml": "x"})
    os.mkfifo(tmp_path / "pipe.yaml")
    assert _data(tmp_path) == {"a.yaml": "x"}


def _data(directory: Path) -> dict[str, str]:
    """What `--policies DIR --no-security-bundle` ships from a directory."""
    return ship([directory], bundle=False).data


def test_the_base_configmap_is_the_bundle_in_this_package() -> None:
    """kustomize overlays ship manifests/base/policies-configmap.yaml: regenerated by
    `make policies-configmap` after every edit of policies/security, and checked here."""
    text = (REPO / "manifests/base/policies-configmap.yaml").read_text()
    assert text == configmap_yaml(), "run `make policies-configmap`"
