"""inject.preferUnderutilized: compiled with its default, and refused with a located reason."""

from __future__ import annotations

from pathlib import Path

import pytest

from webhook.errors import PolicyError
from webhook.policy.loader import load_directory
from webhook.sharing_policy import PreferUnderutilized

HEADER = "apiVersion: gpuwebhook.io/v1alpha1\nkind: GPUSharingPolicy\nmetadata:\n  name: p\nspec:\n"
SHARING = "  sharing: {mode: timeslice}\n"


def _load(directory: Path, inject: str) -> PreferUnderutilized | None:
    (directory / "p.yaml").write_text(HEADER + SHARING + "  inject:\n" + inject)
    return load_directory(directory).sharing[0].inject.prefer_underutilized


@pytest.mark.parametrize(
    ("inject", "expected"),
    [
        ("    preferUnderutilized: {weight: 30}\n", PreferUnderutilized(30, 3)),
        ("    preferUnderutilized: {weight: 100, maxNodes: 50}\n", PreferUnderutilized(100, 50)),
        ("    tolerations: []\n", None),
        (  # several hostnames in a required term still leave a choice among them
            "    preferUnderutilized: {weight: 1}\n    nodeAffinity:\n      required:\n"
            "        - {key: kubernetes.io/hostname, operator: In, values: [a, b]}\n",
            PreferUnderutilized(1, 3),
        ),
    ],
)
def test_accepted(tmp_path: Path, inject: str, expected: PreferUnderutilized | None) -> None:
    assert _load(tmp_path, inject) == expected


@pytest.mark.parametrize(
    ("inject", "path", "reason"),
    [
        ("    preferUnderutilized: {weight: 0}\n", "spec.inject.preferUnderutilized.weight", "minimum"),
        ("    preferUnderutilized: {weight: 101}\n", "spec.inject.preferUnderutilized.weight", "maximum"),
        (
            "    preferUnderutilized: {weight: 5, maxNodes: 0}\n",
            "spec.inject.preferUnderutilized.maxNodes",
            "minimum",
        ),
        ("    preferUnderutilized: {maxNodes: 2}\n", "spec.inject.preferUnderutilized.weight", "missing"),
        (
            "    preferUnderutilized: {weight: 5, nodes: 2}\n",
            "spec.inject.preferUnderutilized.nodes",
            "unknown",
        ),
        ("    preferUnderutilized: true\n", "spec.inject.preferUnderutilized", "object"),
        (
            "    preferUnderutilized: {weight: 5}\n    nodeAffinity:\n      required:\n"
            "        - {key: kubernetes.io/hostname, operator: In, values: [gpu-1]}\n",
            "spec.inject.preferUnderutilized",
            "no effect",
        ),
    ],
)
def test_refused(tmp_path: Path, inject: str, path: str, reason: str) -> None:
    with pytest.raises(PolicyError) as info:
        _load(tmp_path, inject)
    assert [(p.path, reason in p.reason) for p in info.value.problems] == [(path, True)], info.value.problems
