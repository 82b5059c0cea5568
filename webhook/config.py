"""Settings: one frozen object, built by the CLI and passed explicitly everywhere."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Literal

DEV_CERT_DIR = Path("certs/dev")
DEFAULT_SERVICE = "gpu-webhook"
DEFAULT_NAMESPACE = "gpu-system"
# The GPU stacks' own namespaces, where each installer puts its pods by default (the upstream
# file that says so). Their pods need host access, NVIDIA variables or a preset nodeName by
# design. HAMi, Volcano's vGPU device plugin and the plain AMD device plugin install into
# kube-system. Exempt by name, like the system's namespace and ours; only administrators may
# create them (the GpuIgnoreLabel constraint). docs/coexistence.md has one row per stack.
GPU_STACK_NAMESPACES = (
    "gpu-operator",  # NVIDIA GPU Operator by Helm: NVIDIA/gpu-operator README.md
    "nvidia-gpu-operator",  # the same by OLM (OpenShift): bundle/metadata/annotations.yaml
    "node-feature-discovery",  # standalone NFD: kubernetes-sigs/node-feature-discovery README.md
    "dra-driver-nvidia-gpu",  # NVIDIA's DRA driver: docs/install.md
    "nvidia-dra-driver-gpu",  # its releases before the chart's rename: docs/upgrade.md
    "kai-scheduler",  # KAI: NVIDIA/KAI-Scheduler README.md, constants.DefaultKAINamespace
    "kai-resource-reservation",  # KAI's GPU reservation pods: constants.DefaultResourceReservationName
    "volcano-system",  # Volcano: volcano-sh/volcano README.md
    "kube-amd-gpu",  # AMD GPU Operator: ROCm/gpu-operator README.md
    "inteldeviceplugins-system",  # Intel's device plugin operator: INSTALL.md
)


def exempt_namespaces(own: str) -> tuple[str, ...]:
    """The namespaces never reviewed when the server runs in `own`: the system's, its own (no
    deadlock) and the GPU stacks'."""
    return ("kube-system", own, *GPU_STACK_NAMESPACES)


EXEMPT_NAMESPACES = exempt_namespaces(DEFAULT_NAMESPACE)
MiB = 1024 * 1024

FailureMode = Literal["closed", "open"]
Enforcement = Literal["policy", "warn"]
AuditFsync = Literal["always", "batch", "never"]
AuditWriterKind = Literal["helper", "worker"]
QuotaConsistency = Literal["per-replica", "strict"]
DEFAULT_RESERVATION_TTL_SECONDS = 30.0
DEFAULT_MAX_STALENESS_SECONDS = 60.0
PodLabels = Literal["auto", "plain", "exported"]


@dataclass(frozen=True)
class PrometheusSettings:
    """Where DCGM exporter metrics are read: a Prometheus HTTP API (or Thanos, Mimir: same API)."""

    url: str
    bearer_token_file: Path | None = None
    ca_file: Path | None = None
    timeout_seconds: float = 5.0


@dataclass(frozen=True)
class UtilizationSettings:
    """Live utilization for placement hints: read off the request path, trusted only while fresh."""

    prometheus: PrometheusSettings
    window: str = "10m"
    refresh_seconds: float = 60.0
    max_age_seconds: float = 300.0
    pod_labels: PodLabels = "auto"


@dataclass(frozen=True)
class Settings:
    host: str = "127.0.0.1"
    port: int = 8443
    cert_dir: Path = DEV_CERT_DIR
    dev_certs: bool = True
    # Policy directories or files, on top of the packaged security bundle unless it is left out.
    policy_paths: tuple[Path, ...] = ()
    security_bundle: bool = True
    audit_log: Path | None = None
    workers: int = 1
    log_level: str = "info"
    max_body_bytes: int = 3 * MiB
    shutdown_grace_seconds: int = 20
    cert_check_seconds: float = 1.0
    policy_check_seconds: float = 2.0
    excluded_namespaces: tuple[str, ...] = EXEMPT_NAMESPACES
    # DRA device classes that are GPUs besides gpu.nvidia.com and mig.nvidia.com (and classes that
    # select NVIDIA's driver, which are recognised anyway).
    dra_gpu_classes: tuple[str, ...] = ()
    own_username: str | None = None
    advisory_webhook: bool = False
    client_ca: Path | None = None
    body_timeout_seconds: float = 10.0
    max_inflight: int = 256
    review_threads: int = 2
    quota_failure_mode: FailureMode = "closed"
    # "warn" reports what constraints would deny as warnings: the rollout stage before enforcing.
    enforcement: Enforcement = "policy"
    failure_mode: FailureMode = "closed"
    audit_fsync: AuditFsync = "batch"
    # helper: a process of its own builds, seals and writes the records; worker: the worker does.
    audit_writer: AuditWriterKind = "helper"
    audit_max_bytes: int = 100 * MiB
    audit_keep: int = 5
    audit_stdout: bool = False
    audit_signing_key: Path | None = None
    audit_checkpoint_records: int = 1000
    audit_checkpoint_seconds: float = 60.0
    audit_failure_mode: FailureMode = "closed"
    audit_replica: str = ""  # the stable replica name a `start` record gives (pod name); "" = hostname
    audit_node: str = ""  # the node it runs on, for the same record
    inventory: Path | None = None
    kubernetes_version: str | None = None  # --kubernetes-version; None: ask the API server
    quota_consistency: QuotaConsistency = "per-replica"
    kubeconfig: Path | None = None
    namespace: str | None = None
    reservation_ttl_seconds: float = DEFAULT_RESERVATION_TTL_SECONDS
    max_staleness_seconds: float = DEFAULT_MAX_STALENESS_SECONDS
    utilization: UtilizationSettings | None = None
    # The background scan of existing objects: seconds between runs, 0 for none.
    scan_interval_seconds: float = 0.0
    # A Kubernetes Event in our namespace for each denial (webhook.events), off the request path.
    emit_denial_events: bool = False
    # Where each complete background scan's findings go besides the audit log: policy reports.
    scan_publish: Literal["none", "policyreport", "openreports"] = "none"
    # With a cluster: seconds between passes that create the ResourceClaimTemplates mode dra
    # needs (one replica, by Lease; passes run sooner when policies or namespaces change); 0: off.
    dra_templates_interval_seconds: float = 60.0
    engine: Literal["regopy", "opa"] = "regopy"
    opa_url: str = "http://127.0.0.1:8181"
    opa_timeout_seconds: float = 1.5
    opa_retries: int = 2
    opa_failure_mode: FailureMode = "closed"
    opa_token_file: Path | None = None
    opa_ca_file: Path | None = None
