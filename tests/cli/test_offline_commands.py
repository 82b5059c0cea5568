"""review, test and policies check, through the real entry point."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.conftest import BUNDLED_POLICIES, EXAMPLES
from tests.support import cli

EXAMPLE_POLICIES = BUNDLED_POLICIES / "examples"


def gpu_webhook(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return cli.gpu_webhook(*args, cwd=cwd, env={"NO_COLOR": "1"})


def _write_yaml(path: Path, *documents: object) -> Path:
    path.write_text(yaml.safe_dump_all(documents))
    return path


def _pod(name: str, namespace: str, memory: str | None = None) -> dict[str, Any]:
    annotations = {"gpuwebhook.io/gpu-memory": memory} if memory else {}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace, "annotations": annotations},
        "spec": {
            "containers": [{"name": "c", "image": "x", "resources": {"limits": {"nvidia.com/gpu": "1"}}}]
        },
    }


def test_review_json_has_one_entry_per_object(tmp_path: Path) -> None:
    manifests = _write_yaml(
        tmp_path / "m.yaml", _pod("a", "example-mig", "15Gi"), _pod("b", "example-mig", "99Gi")
    )
    result = gpu_webhook("review", str(manifests), "--policies", str(BUNDLED_POLICIES), "-o", "json")
    assert result.returncode == 1  # one object is denied
    entries = json.loads(result.stdout)
    assert [set(e) for e in entries] == [
        {"kind", "namespace", "name", "allowed", "status", "warnings", "patch", "object"}
    ] * 2
    first, second = entries
    assert first["allowed"] and first["object"]["spec"]["containers"][0]["resources"]["limits"] == {
        "nvidia.com/mig-1g.20gb": "1"
    }
    assert not second["allowed"] and "99Gi" in second["status"]["message"] and second["status"]["code"] == 403


def test_review_reads_admission_reviews_and_workloads() -> None:
    result = gpu_webhook(
        "review",
        str(EXAMPLES / "review-gpu-pod.json"),
        str(EXAMPLES / "pod-cpu.yaml"),
        "--policies",
        str(BUNDLED_POLICIES),
        "-o",
        "yaml",
    )
    assert result.returncode == 0, result.stderr
    entries = list(yaml.safe_load_all(result.stdout))
    assert [(e["kind"], e["name"]) for e in entries] == [("Pod", "trainer-0"), ("Pod", "web-0")]


def test_review_diff_output_names_decision_and_changes(tmp_path: Path) -> None:
    manifests = _write_yaml(tmp_path / "m.yaml", _pod("a", "example-timeslice"))
    result = gpu_webhook("review", str(manifests), "--policies", str(BUNDLED_POLICIES), "--color", "never")
    assert result.returncode == 0
    assert result.stdout.splitlines()[0].startswith("Pod example-timeslice/a: allowed (sharing timeslice")
    assert "-        nvidia.com/gpu: '1'" in result.stdout
    assert "+        nvidia.com/gpu.shared: '1'" in result.stdout


def test_review_uses_the_inventory_for_namespace_selectors(tmp_path: Path) -> None:
    policies = tmp_path / "policies"
    policies.mkdir()
    (policies / "p.yaml").write_text(
        "apiVersion: gpuwebhook.io/v1alpha1\nkind: GPUSharingPolicy\nmetadata: {name: labelled}\n"
        "spec:\n  match: {namespaceSelector: {matchLabels: {gpu: shared}}}\n  sharing: {mode: timeslice}\n"
    )
    namespace = {
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": {"name": "team", "labels": {"gpu": "shared"}},
    }
    inventory = _write_yaml(tmp_path / "inv.yaml", {"apiVersion": "v1", "kind": "List", "items": [namespace]})
    manifests = _write_yaml(tmp_path / "m.yaml", _pod("a", "team"), _pod("b", "other"))
    result = gpu_webhook(
        "review", str(manifests), "--policies", str(policies), "--inventory", str(inventory), "-o", "json"
    )
    modes = [bool(e["patch"]) for e in json.loads(result.stdout)]
    assert modes == [True, False]


def test_bad_input_files_are_a_clear_error(tmp_path: Path) -> None:
    broken = tmp_path / "broken.yaml"
    broken.write_text("a: [")
    result = gpu_webhook("review", str(broken), "--policies", str(BUNDLED_POLICIES))
    assert result.returncode == 2 and "not valid YAML" in result.stderr and "Traceback" not in result.stderr


def test_shipped_example_suites_pass() -> None:
    result = gpu_webhook("test", str(EXAMPLE_POLICIES))
    assert result.returncode == 0, result.stdout
    passed, failed = result.stdout.strip().splitlines()[-1].split(", ")
    assert int(passed.split()[0]) >= 20 and failed == "0 failed"


def test_a_failing_case_is_reported_and_fails_the_run(tmp_path: Path) -> None:
    suite = {
        "apiVersion": "gpuwebhook.io/v1alpha1",
        "kind": "PolicyTest",
        "metadata": {"name": "wrong"},
        "spec": {
            "policies": str(EXAMPLE_POLICIES),
            "cases": [
                {
                    "name": "expects the wrong profile",
                    "object": _pod("a", "example-mig", "15Gi"),
                    "expect": {
                        "allowed": True,
                        "object": {
                            "spec": {
                                "containers": [{"resources": {"limits": {"nvidia.com/mig-7g.80gb": "1"}}}]
                            }
                        },
                    },
                },
                {
                    "name": "expects a denial",
                    "object": _pod("b", "example-mig"),
                    "expect": {"allowed": False},
                },
                {"name": "right", "object": _pod("c", "example-mig"), "expect": {"allowed": True}},
            ],
        },
    }
    result = gpu_webhook("test", str(_write_yaml(tmp_path / "t.yaml", suite)))
    assert result.returncode == 1
    assert "FAIL wrong / expects the wrong profile" in result.stdout
    assert "nvidia.com~1mig-7g.80gb: missing" in result.stdout
    assert result.stdout.strip().endswith("1 passed, 2 failed")


def test_a_malformed_suite_says_where(tmp_path: Path) -> None:
    suite = {
        "apiVersion": "gpuwebhook.io/v1alpha1",
        "kind": "PolicyTest",
        "metadata": {"name": "bad"},
        "spec": {"cases": [{"name": "no expectations"}]},
    }
    result = gpu_webhook("test", str(_write_yaml(tmp_path / "t.yaml", suite)))
    assert result.returncode == 1
    assert "spec.cases[0].expect: required field is missing" in result.stdout


@pytest.mark.parametrize(("directory", "code"), [(BUNDLED_POLICIES, 0), (EXAMPLE_POLICIES, 0)])
def test_policies_check_accepts_the_shipped_sets(directory: Path, code: int) -> None:
    result = gpu_webhook("policies", "check", str(directory))
    assert result.returncode == code and result.stdout.strip().endswith("OK")


def test_policies_check_lists_every_problem(tmp_path: Path) -> None:
    (tmp_path / "a.yaml").write_text(
        "apiVersion: gpuwebhook.io/v1alpha1\nkind: GPUSharingPolicy\nmetadata: {name: a}\n"
        "spec:\n  sharing: {mode: mig, defaultMemory: 5Gi}\n  colour: blue\n"
    )
    result = gpu_webhook("policies", "check", str(tmp_path))
    assert result.returncode == 1
    lines = result.stderr.strip().splitlines()
    assert f"{tmp_path / 'a.yaml'}:6: spec.colour: unknown field" in lines
    assert lines[-1] == f"1 problem(s) in the security bundle + {tmp_path}"


def test_gatekeeper_suites_run_beside_policy_tests(tmp_path: Path) -> None:
    security = Path(__file__).resolve().parents[1] / "policies" / "security"
    result = gpu_webhook("test", str(EXAMPLE_POLICIES), str(security))
    assert result.returncode == 0, result.stdout
    passed = int(result.stdout.strip().splitlines()[-1].split()[0])
    assert passed >= 90  # 23 PolicyTest cases and the bundle's Gatekeeper suites
    broken = tmp_path / "suite"
    shutil.copytree(security / "gpu-privileged", broken)
    text = (
        (broken / "suite.yaml")
        .read_text()
        .replace("../../../../policies", str(BUNDLED_POLICIES.parent / "policies"))
    )
    (broken / "suite.yaml").write_text(text.replace("violations: 'no'", "violations: 1", 1))
    failing = gpu_webhook("test", str(broken))
    assert failing.returncode == 1
    assert "FAIL" in failing.stdout and failing.stdout.strip().endswith("1 failed")


@pytest.mark.parametrize(
    ("field", "value", "problem"),
    [("hostPID", "true", "must be a boolean"), ("volumes", {"v": {}}, "must be a list")],
)
def test_review_denies_a_malformed_pod_as_the_server_does(
    tmp_path: Path, field: str, value: Any, problem: str
) -> None:
    pod = _pod("odd", "team-a", "1Gi")
    spec = pod["spec"]
    assert isinstance(spec, dict)
    spec[field] = value
    manifests = _write_yaml(tmp_path / "m.yaml", pod)
    result = gpu_webhook("review", str(manifests), "--policies", str(BUNDLED_POLICIES), "-o", "json")
    assert result.returncode == 1
    (entry,) = json.loads(result.stdout)
    assert not entry["allowed"] and entry["status"]["code"] == 400
    assert "[gpu-builtin/shape]" in entry["status"]["message"] and problem in entry["status"]["message"]


def _kai_pod_with_gpu_init(tmp_path: Path) -> Path:
    pod = _pod("train", "example-kai")
    pod["spec"]["initContainers"] = [{"name": "fetch", "image": "x"}]
    return _write_yaml(tmp_path / "pod.yaml", pod)


@pytest.mark.parametrize(("version", "native"), [("1.28", False), ("v1.30.2", True)])
def test_review_says_where_the_checkpoint_agent_goes_for_the_clusters_version(
    tmp_path: Path, version: str, native: bool
) -> None:
    path = _kai_pod_with_gpu_init(tmp_path)
    result = gpu_webhook(
        "review", str(path), "--policies", str(BUNDLED_POLICIES), "--kubernetes-version", version
    )
    assert result.returncode == 0, result.stderr
    assert ("native sidecars need 1.29" in result.stdout) is not native
    assert ("restartPolicy: Always" in result.stdout) is native


def test_review_refuses_a_version_it_cannot_read(tmp_path: Path) -> None:
    path = _kai_pod_with_gpu_init(tmp_path)
    result = gpu_webhook("review", str(path), "--kubernetes-version", "latest")
    assert result.returncode != 0 and "not a Kubernetes version" in result.stderr
