"""Every serve flag also comes from GPU_WEBHOOK_*; the command line wins; bad values fail clearly."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from tests.support.cli import gpu_webhook
from webhook.cli import build_parser, serve_policies

FLAGS = [
    # (flag, env name, value, attribute, parsed)
    ("--host", "HOST", "0.0.0.0", "host", "0.0.0.0"),
    ("--port", "PORT", "9443", "port", 9443),
    ("--cert-dir", "CERT_DIR", "/etc/tls", "cert_dir", Path("/etc/tls")),
    ("--audit-log", "AUDIT_LOG", "/var/log/audit.jsonl", "audit_log", Path("/var/log/audit.jsonl")),
    ("--workers", "WORKERS", "2", "workers", 2),
    ("--log-level", "LOG_LEVEL", "debug", "log_level", "debug"),
    ("--failure-mode", "FAILURE_MODE", "open", "failure_mode", "open"),
    ("--cert-check-seconds", "CERT_CHECK_SECONDS", "2.5", "cert_check_seconds", 2.5),
    ("--policy-check-seconds", "POLICY_CHECK_SECONDS", "0.5", "policy_check_seconds", 0.5),
    ("--exclude-namespaces", "EXCLUDE_NAMESPACES", "kube-*,ops", "exclude_namespaces", ("kube-*", "ops")),
    (
        "--own-username",
        "OWN_USERNAME",
        "system:serviceaccount:gpu-system:gpu-webhook",
        "own_username",
        "system:serviceaccount:gpu-system:gpu-webhook",
    ),
    ("--advisory-webhook", "ADVISORY_WEBHOOK", "true", "advisory_webhook", True),
    ("--max-inflight", "MAX_INFLIGHT", "64", "max_inflight", 64),
    ("--review-threads", "REVIEW_THREADS", "8", "review_threads", 8),
    ("--body-timeout-seconds", "BODY_TIMEOUT_SECONDS", "3", "body_timeout_seconds", 3.0),
    # cluster and quota
    ("--inventory", "INVENTORY", "/tmp/inv.yaml", "inventory", Path("/tmp/inv.yaml")),
    ("--quota-consistency", "QUOTA_CONSISTENCY", "strict", "quota_consistency", "strict"),
    ("--kubeconfig", "KUBECONFIG", "/etc/kube/config", "kubeconfig", Path("/etc/kube/config")),
    ("--namespace", "NAMESPACE", "gpu-admission", "namespace", "gpu-admission"),
    ("--reservation-ttl", "RESERVATION_TTL", "45", "reservation_ttl", 45.0),
    ("--max-staleness", "MAX_STALENESS", "2.5", "max_staleness", 2.5),
]


@pytest.mark.parametrize(("flag", "env", "value", "attribute", "parsed"), FLAGS)
def test_flag_and_environment_agree(
    monkeypatch: pytest.MonkeyPatch, flag: str, env: str, value: str, attribute: str, parsed: object
) -> None:
    assert getattr(build_parser().parse_args(["serve", flag, value]), attribute) == parsed
    monkeypatch.setenv(f"GPU_WEBHOOK_{env}", value)
    assert getattr(build_parser().parse_args(["serve"]), attribute) == parsed


def test_command_line_wins_over_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GPU_WEBHOOK_PORT", "1111")
    assert build_parser().parse_args(["serve", "--port", "2222"]).port == 2222


def test_defaults_are_the_dev_setup() -> None:
    args = build_parser().parse_args(["serve"])
    assert (args.host, args.port, args.cert_dir, args.policies, args.no_bundle) == (
        "127.0.0.1",
        8443,
        None,
        None,
        False,
    )


SERVE_POLICIES = [
    # (arguments, GPU_WEBHOOK_POLICIES, GPU_WEBHOOK_NO_BUNDLE, paths, bundle)
    ([], None, None, (), True),
    (["--policies", "/a"], None, None, (Path("/a"),), True),
    (["--policies", "/a", "--policies", "/b"], None, None, (Path("/a"), Path("/b")), True),
    ([], f"/a{os.pathsep}/b", None, (Path("/a"), Path("/b")), True),
    (["--policies", "/c"], "/a", None, (Path("/c"),), True),  # the command line wins
    (["--policies", "/a", "--no-bundle"], None, None, (Path("/a"),), False),
    (["--policies", "/a"], None, "true", (Path("/a"),), False),
    (["--policies", "/a", "--no-bundle", "false"], None, "true", (Path("/a"),), True),
]


@pytest.mark.parametrize(("argv", "paths_env", "bundle_env", "paths", "bundle"), SERVE_POLICIES)
def test_serve_policies_come_from_flags_or_the_environment(
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    argv: list[str],
    paths_env: str | None,
    bundle_env: str | None,
    paths: tuple[Path, ...],
    bundle: bool,
) -> None:
    monkeypatch.chdir(tmp_path)  # no ./policies here
    for name, value in (("GPU_WEBHOOK_POLICIES", paths_env), ("GPU_WEBHOOK_NO_BUNDLE", bundle_env)):
        if value is None:
            monkeypatch.delenv(name, raising=False)
        else:
            monkeypatch.setenv(name, value)
    sources = serve_policies(build_parser().parse_args(["serve", *argv]))
    assert (sources.paths, sources.bundle) == (paths, bundle)


def _run(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return gpu_webhook(*args, env=env)


@pytest.mark.parametrize(
    ("args", "env", "message"),
    [
        (["serve", "--workers", "0"], {}, "must be at least 1"),
        (["serve"], {"GPU_WEBHOOK_PORT": "https"}, "invalid int value"),
        (["serve", "--log-level", "loud"], {}, "invalid choice"),
    ],
)
def test_bad_values_are_usage_errors(args: list[str], env: dict[str, str], message: str) -> None:
    result = _run(*args, env=env)
    assert result.returncode == 2
    assert message in result.stderr


def test_missing_certificates_are_a_clear_startup_error(tmp_path: Path) -> None:
    result = _run("serve", "--cert-dir", str(tmp_path), "--port", "0")
    assert result.returncode == 2
    assert f"cannot load {tmp_path}/tls.crt" in result.stderr
    assert "Traceback" not in result.stderr + result.stdout


def test_missing_policy_directory_is_a_clear_startup_error(cert_dir: Path, tmp_path: Path) -> None:
    result = _run("serve", "--cert-dir", str(cert_dir), "--policies", str(tmp_path / "none"), "--port", "0")
    assert result.returncode == 2
    assert f"{tmp_path / 'none'}: policy path does not exist" in result.stderr


def test_certs_commands_end_to_end(tmp_path: Path) -> None:
    out = tmp_path / "tls"
    assert (
        _run("certs", "generate", "--out", str(out), "--service", "hook", "--namespace", "ops").returncode
        == 0
    )
    again = _run("certs", "generate", "--out", str(out))
    assert again.returncode == 2 and "--force" in again.stderr
    assert _run("certs", "rotate", "--dir", str(out), "--days", "7").returncode == 0
    shown = _run("certs", "show", "--dir", str(out))
    assert shown.returncode == 0
    assert "hook.ops.svc.cluster.local" in shown.stdout
    assert "caBundle: LS0t" in shown.stdout
