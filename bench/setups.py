"""Policy directories and inventories that benchmark scenarios need, written into a work directory."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import orjson
import yaml

ROOT = Path(__file__).resolve().parent.parent
SECURITY = ROOT / "policies" / "security"
QUOTA = """apiVersion: gpuwebhook.io/v1alpha1
kind: GPUQuota
metadata: {name: bench-quota}
spec:
  match: {namespaces: ["bench-*", "ns-*"]}
  limits: {gpus: 100000, gpuMemory: 100000Ti}
  enforcementAction: deny
"""


def full_policies(work: Path) -> tuple[str, ...]:
    """What issue 8 judges: the default security bundle, a MIG sharing policy with tolerations,
    affinity and a checkpoint sidecar, and a quota for the pod's namespace; audit on (batch)."""
    directory = work / "policies-full"
    if not directory.exists():
        shutil.copytree(SECURITY, directory / "security")
        shutil.copy(ROOT / "bench" / "policies" / "mig.yaml", directory / "mig.yaml")
        (directory / "quota.yaml").write_text(QUOTA)
    audit = work / "audit-full.log"
    return ("--policies", str(directory), "--audit-log", str(audit), "--audit-fsync", "batch")


def scaled_constraints(count: int) -> Any:
    """`count` constraints from the bundle's templates, spread over namespaces and kinds: the
    request's namespace (bench-mig) is matched by only a handful, as in a real multi-tenant set."""

    def prepare(work: Path) -> tuple[str, ...]:
        directory = work / f"policies-{count}"
        if directory.exists():
            return ("--policies", str(directory))
        templates = sorted(SECURITY.glob("*/template.yaml"))
        constraints = [yaml.safe_load(p.with_name("constraint.yaml").read_text()) for p in templates]
        documents: list[Any] = [yaml.safe_load(p.read_text()) for p in templates]
        for index in range(count):
            base = constraints[index % len(constraints)]
            documents.append(_spread(base, index))
        directory.mkdir(parents=True)
        (directory / "constraints.yaml").write_text(yaml.safe_dump_all(documents))
        return ("--policies", str(directory))

    return prepare


def _spread(constraint: dict[str, Any], index: int) -> dict[str, Any]:
    copy = orjson.loads(orjson.dumps(constraint))
    copy["metadata"]["name"] = f"{constraint['metadata']['name']}-{index}"
    match = copy["spec"].setdefault("match", {})
    match["namespaces"] = ["bench-mig"] if index < 10 else [f"ns-{index % 997}"]
    return dict(copy)


def cluster_scale(pods: int = 100_000, namespaces: int = 1000) -> Any:
    """A live cluster (the in-repo fake kube-apiserver, paged lists and watches, as in production)
    holding `pods` running GPU pods in `namespaces` namespaces, and a quota over them."""

    def prepare(work: Path) -> tuple[str, ...]:
        from tests.support.fakekube import FakeKube

        api = FakeKube().start()
        _KEEP.append(api)  # serves for the rest of the benchmark run
        names = ["bench-mig", *(f"ns-{n}" for n in range(1, namespaces))]  # the request's has its share
        for name in names:
            api.create("namespaces", _namespace(name))
        for index in range(pods):
            api.create("pods", _pod(f"p-{index}", names[index % namespaces], index))
        directory = work / "policies-quota"
        if not directory.exists():
            directory.mkdir()
            (directory / "quota.yaml").write_text(QUOTA)
        kubeconfig = api.write_kubeconfig(work / "kubeconfig")
        return ("--policies", str(directory), "--kubeconfig", str(kubeconfig))

    return prepare


_KEEP: list[Any] = []


def _namespace(name: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "labels": {"team": name}}}


def _pod(name: str, namespace: str, index: int) -> dict[str, Any]:
    resources = (
        {"limits": {"nvidia.com/gpu": str(1 + index % 4)}}
        if index % 3
        else {"limits": {f"nvidia.com/mig-{1 + index % 3}g.{10 * (1 + index % 3)}gb": "1"}}
    )
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace, "uid": f"uid-{index}"},
        "spec": {"containers": [{"name": "main", "image": "x", "resources": resources}]},
        "status": {"phase": "Running"},
    }
