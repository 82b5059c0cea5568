"""Benchmark scenarios: realistic reviews and the server flags each needs."""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from bench.common import admission_review
from bench.setups import cluster_scale, full_policies, scaled_constraints

ROOT = Path(__file__).resolve().parent.parent
BENCH_POLICIES = ROOT / "bench" / "policies"
MODES = ("exclusive", "timeslice", "mps", "mig", "hami", "kai", "dra")


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


def mutated(obj: dict[str, Any]) -> dict[str, Any]:
    """The pod as kube-apiserver stores it after our /mutate, with the benchmark's sharing policies."""
    from webhook.inventory import EMPTY
    from webhook.offline import Identity, offline_deps, request_for, run
    from webhook.policy.loader import load_directory

    deps = offline_deps(load_directory(BENCH_POLICIES), EMPTY)
    return dict(run(request_for(obj, namespace=None, identity=Identity()), deps).object)


def review(obj: dict[str, Any]) -> bytes:
    return admission_review(obj)


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
    gpu = review(training_pod("bench-mig"))
    admitted = review(mutated(training_pod("bench-mig")))  # what /validate sees after /mutate
    full = "default bundle, MIG policy, quota, audit (batch)"
    found += [
        Scenario("full-mutate", "/mutate", gpu, f"{full}: /mutate", prepare=full_policies),
        Scenario("full-validate", "/validate", admitted, f"{full}: /validate", prepare=full_policies),
        Scenario(
            "full-mutate-workers-2", "/mutate", gpu, f"{full}: 2 workers", workers=2, prepare=full_policies
        ),
        Scenario(
            "full-validate-workers-2",
            "/validate",
            admitted,
            f"{full}: 2 workers",
            workers=2,
            prepare=full_policies,
        ),
        Scenario(
            "full-validate-cpu-pod", "/validate", review(cpu_pod()), f"{full}: no GPUs", prepare=full_policies
        ),
    ]
    found += [
        Scenario(
            f"constraints-{n}", "/validate", gpu, f"{n} constraints, spread", prepare=scaled_constraints(n)
        )
        for n in (10, 100, 1000)
    ]
    found.append(
        Scenario("cluster-100k-pods", "/validate", gpu, "quota, 100,000 pods cached", prepare=cluster_scale())
    )
    return found
