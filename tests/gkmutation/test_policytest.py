"""`gpu-webhook test` runs Gatekeeper mutators: a PolicyTest case sees their result."""

from __future__ import annotations

from pathlib import Path

from tests.support.cli import gpu_webhook

SUITE = """\
apiVersion: gpuwebhook.io/v1alpha1
kind: PolicyTest
metadata: {name: seccomp}
spec:
  policies: policies
  cases:
    - name: a pod without a profile gets RuntimeDefault
      object:
        apiVersion: v1
        kind: Pod
        metadata: {name: p, namespace: default}
        spec: {containers: [{name: main, image: registry.k8s.io/pause:3.9}]}
      expect:
        allowed: true
        object: {spec: {securityContext: {seccompProfile: {type: RuntimeDefault}}}}
"""


def test_policy_test_cases_see_gatekeeper_mutators(tmp_path: Path) -> None:
    (tmp_path / "policies").mkdir()
    sample = Path(__file__).parent / "samples" / "seccomp.yaml"
    (tmp_path / "policies" / "seccomp.yaml").write_bytes(sample.read_bytes())
    (tmp_path / "seccomp.test.yaml").write_text(SUITE)
    result = gpu_webhook("test", str(tmp_path / "seccomp.test.yaml"))
    assert result.returncode == 0, result.stdout + result.stderr
    assert "1 passed, 0 failed" in result.stdout
