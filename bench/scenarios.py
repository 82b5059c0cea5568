"""Benchmark scenarios: realistic reviews and the server flags each needs."""

from __future__ import annotations

import copy
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson
import yaml

ROOT = Path(__file__).resolve().parent.parent
BENCH_POLICIES = ROOT / "bench" / "policies"
MODES = ("exclusive", "timeslice", "mps", "mig", "hami", "kai")


@dataclass(frozen=True)
class Scenario:
    name: str
    endpoint: str
    body: bytes
    description: str
    server_args: tuple[str, ...] = ()
    workers: int = 1
    prepare: Callable[[Path], tuple[str, ...]] | None = field(default=None, compare=False)


def training_pod(namespace: str) -> dict[str, Any]:
    """A GPU training pod: two app containers and one init container (examples/pod-gpu-training.yaml)."""
    pod = yaml.safe_load((ROOT / "examples" / "pod-gpu-training.yaml").read_text())
    pod = copy.deepcopy(pod)
    pod["metadata"]["namespace"] = namespace
    return dict(pod)


def cpu_pod() -> dict[str, Any]:
    return dict(yaml.safe_load((ROOT / "examples" / "pod-cpu.yaml").read_text()))


def review(obj: dict[str, Any]) -> bytes:
    gvk = {"group": "", "version": "v1", "kind": obj["kind"]}
    request = {
        "uid": str(uuid.uuid4()),
        "kind": gvk,
        "resource": {"group": "", "version": "v1", "resource": "pods"},
        "namespace": obj["metadata"]["namespace"],
        "name": obj["metadata"]["name"],
        "operation": "CREATE",
        "userInfo": {"username": "alice@example.com", "groups": ["system:authenticated"]},
        "object": obj,
        "dryRun": False,
    }
    return orjson.dumps({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": request})


def all_scenarios() -> list[Scenario]:
    policies = ("--policies", str(BENCH_POLICIES))
    found = [
        Scenario("fast-path-mutate", "/mutate", review(cpu_pod()), "non-GPU pod, /mutate", policies),
        Scenario("fast-path-validate", "/validate", review(cpu_pod()), "non-GPU pod, /validate", policies),
    ]
    found += [
        Scenario(
            f"gpu-mutate-{mode}",
            "/mutate",
            review(training_pod(f"bench-{mode}")),
            f"GPU training pod, /mutate, {mode} with tolerations, affinity and a checkpoint sidecar",
            policies,
        )
        for mode in MODES
    ]
    found += [
        Scenario(
            "gpu-validate-builtin",
            "/validate",
            review(training_pod("bench-mig")),
            "GPU pod, /validate, built-in GPU checks",
            policies,
        ),
        Scenario(
            "gpu-mutate-mig-workers-2",
            "/mutate",
            review(training_pod("bench-mig")),
            "GPU pod /mutate (mig), two workers",
            policies,
            workers=2,
        ),
    ]
    return found
