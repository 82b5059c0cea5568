"""Per-request cost of the in-process Rego engine for 10, 100 and 1,000 constraints.

    .venv/bin/python -m bench.rego_constraints

Three shapes of constraint set, on a 2 KB GPU pod review with two containers:
* every constraint applies to the pod and has its own parameters (the worst case: one
  template evaluation per constraint);
* every constraint applies, but they share four parameter sets (evaluated once each);
* each constraint is limited to its own namespace, so the index leaves one to evaluate.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from typing import Any

from webhook.policy.engines import ConstraintSet
from webhook.policy.engines.regopy import RegoEngine
from webhook.validation.gatekeeper import (
    Constraint,
    ConstraintTemplate,
    Where,
    parse_constraint,
    parse_template,
)

TEMPLATES = {
    "K8sAllowedRepos": """package k8sallowedrepos
violation[{"msg": msg}] {
  c := input.review.object.spec.containers[_]
  not startswith(c.image, input.parameters.repos[_])
  msg := sprintf("container <%v> image <%v> not from %v", [c.name, c.image, input.parameters.repos])
}""",
    "K8sRequiredLabels": """package k8srequiredlabels
violation[{"msg": msg}] {
  provided := {l | input.review.object.metadata.labels[l]}
  required := {l | l := input.parameters.labels[_]}
  missing := required - provided
  count(missing) > 0
  msg := sprintf("missing labels %v", [missing])
}""",
    "K8sMaxGpus": """package k8smaxgpus
violation[{"msg": msg}] {
  total := sum([to_number(object.get(c.resources.limits, "nvidia.com/gpu", 0)) |
    c := input.review.object.spec.containers[_]])
  total > input.parameters.max
  msg := sprintf("%v GPUs requested, at most %v allowed", [total, input.parameters.max])
}""",
    "K8sNoPrivileged": """package k8snoprivileged
violation[{"msg": msg}] {
  c := input.review.object.spec.containers[_]
  c.securityContext.privileged
  msg := sprintf("container <%v> is privileged", [c.name])
}""",
}
PARAMETERS: dict[str, dict[str, Any]] = {
    "K8sAllowedRepos": {"repos": ["nvcr.io/", "registry.example.com/"]},
    "K8sRequiredLabels": {"labels": ["team", "cost-center"]},
    "K8sMaxGpus": {"max": 4},
    "K8sNoPrivileged": {},
}


def templates() -> list[ConstraintTemplate]:
    return [
        parse_template(
            {
                "apiVersion": "templates.gatekeeper.sh/v1",
                "kind": "ConstraintTemplate",
                "metadata": {"name": kind.lower()},
                "spec": {
                    "crd": {"spec": {"names": {"kind": kind}}},
                    "targets": [{"target": "admission.k8s.gatekeeper.sh", "rego": rego}],
                },
            },
            Where("bench"),
        )
        for kind, rego in TEMPLATES.items()
    ]


def constraints(count: int, known: list[ConstraintTemplate], shape: str) -> ConstraintSet:
    found: list[Constraint] = []
    by_kind = {t.kind: t for t in known}
    kinds = list(TEMPLATES)
    for n in range(count):
        kind = kinds[n % len(kinds)]
        match: dict[str, Any] = {"kinds": [{"apiGroups": [""], "kinds": ["Pod"]}]}
        parameters = dict(PARAMETERS[kind])
        if shape == "one namespace":
            match["namespaces"] = [f"team-{n}"]
        if shape != "shared params":
            parameters["instance"] = n
        doc = {
            "apiVersion": "constraints.gatekeeper.sh/v1beta1",
            "kind": kind,
            "metadata": {"name": f"c{n}"},
            "spec": {"match": match, "parameters": parameters},
        }
        found.append(parse_constraint(doc, Where("bench"), by_kind))
    return ConstraintSet(found)


def gpu_pod_request() -> dict[str, Any]:
    container = {
        "name": "trainer",
        "image": "nvcr.io/nvidia/pytorch:24.05-py3",
        "command": ["torchrun", "--nproc_per_node=2", "train.py"],
        "env": [{"name": f"VAR_{i}", "value": "x" * 20} for i in range(12)],
        "resources": {"limits": {"nvidia.com/gpu": 2, "cpu": "8", "memory": "64Gi"}},
        "securityContext": {"privileged": False},
    }
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "train-0", "namespace": "team-0", "labels": {"team": "ml", "app": "train"}},
        "spec": {"containers": [container, {**container, "name": "sidecar", "image": "docker.io/busybox"}]},
    }
    return {
        "uid": "1",
        "kind": {"group": "", "version": "v1", "kind": "Pod"},
        "operation": "CREATE",
        "namespace": "team-0",
        "name": "train-0",
        "userInfo": {"username": "alice"},
        "object": pod,
        "oldObject": None,
    }


def timed(call: Callable[[], object], rounds: int) -> list[float]:
    samples = []
    for _ in range(rounds):
        start = time.perf_counter()
        call()
        samples.append((time.perf_counter() - start) * 1000)
    return samples


def main() -> None:
    known = templates()
    start = time.perf_counter()
    engine = RegoEngine.compile(known)
    print(f"compile {len(known)} templates: {(time.perf_counter() - start) * 1000:.0f} ms")
    request = gpu_pod_request()
    print(
        f"{'constraints':>11} {'shape':<15} {'applicable':>10} {'load ms':>8} {'median ms':>9} {'p99 ms':>7}"
    )
    for count in (10, 100, 1000):
        for shape in ("distinct params", "shared params", "one namespace"):
            start = time.perf_counter()
            chosen = constraints(count, known, shape)
            loaded = (time.perf_counter() - start) * 1000
            applicable = len(engine.evaluate(request, chosen))
            rounds = 30 if shape == "distinct params" and count == 1000 else 200

            def review(chosen: ConstraintSet = chosen) -> object:
                return engine.evaluate(request, chosen)

            timed(review, 5)
            samples = sorted(timed(review, rounds))
            p99 = samples[min(len(samples) - 1, int(len(samples) * 0.99))]
            median = statistics.median(samples)
            print(f"{count:>11} {shape:<15} {applicable:>10} {loaded:>8.0f} {median:>9.2f} {p99:>7.2f}")


if __name__ == "__main__":
    main()
