"""Build compiled policies from YAML text, through the real loader."""

from __future__ import annotations

import functools
from pathlib import Path

import yaml

from webhook.policy.loader import compile_documents, load_directory
from webhook.policy.model import PolicySet
from webhook.policy.source import parse_documents
from webhook.sharing_policy import SharingPolicy

BUNDLED_POLICIES = Path(__file__).resolve().parents[2] / "policies"
EXAMPLE_POLICIES = BUNDLED_POLICIES / "examples"


def _compiled(spec_yaml: str, name: str) -> tuple[PolicySet, list[str]]:
    """A GPUSharingPolicy from the YAML of its spec alone, through the real loader."""
    document = {
        "apiVersion": "gpuwebhook.io/v1alpha1",
        "kind": "GPUSharingPolicy",
        "metadata": {"name": name},
        "spec": yaml.safe_load(spec_yaml),
    }
    policies, problems = compile_documents(parse_documents(yaml.safe_dump(document), "test.yaml"))
    return policies, [str(p) for p in problems]


def sharing_policy(spec_yaml: str, name: str = "test-policy") -> SharingPolicy:
    """A GPUSharingPolicy from the YAML of its spec alone."""
    policies, problems = _compiled(spec_yaml, name)
    assert not problems, problems
    return policies.sharing[0]


# A team's own sharing policy, as docs and install tests add one beside the bundle.
TEAM_SHARING = """\
apiVersion: gpuwebhook.io/v1alpha1
kind: GPUSharingPolicy
metadata: {name: team-timeslice}
spec:
  match: {namespaces: ["team-a"]}
  sharing: {mode: timeslice, resourceName: nvidia.com/gpu.shared}
"""


# The smallest policies of each of our kinds, for tests of where policy files come from.
TEAM_EXCLUSIVE = """\
apiVersion: gpuwebhook.io/v1alpha1
kind: GPUSharingPolicy
metadata: {name: team}
spec:
  match: {namespaces: [team]}
  sharing: {mode: exclusive}
"""
TEAM_QUOTA = """\
apiVersion: gpuwebhook.io/v1alpha1
kind: GPUQuota
metadata: {name: team}
spec:
  match: {namespaces: [team]}
  limits: {gpus: 2}
"""


def policy_set(*policies: SharingPolicy) -> PolicySet:
    return PolicySet(version="test", sharing=tuple(sorted(policies, key=lambda p: (-p.priority, p.name))))


@functools.cache
def bundled_policies() -> PolicySet:
    """The repository's policies/, compiled once for the whole run: a compile takes seconds, and
    a PolicySet and its engine are only read (tests change one by dataclasses.replace, a copy)."""
    return load_directory(BUNDLED_POLICIES)


def example_policies() -> PolicySet:
    return load_directory(EXAMPLE_POLICIES)


def compile_problems(spec_yaml: str, name: str = "test-policy") -> list[str]:
    """What `policies check` says of a GPUSharingPolicy with this spec."""
    return _compiled(spec_yaml, name)[1]
