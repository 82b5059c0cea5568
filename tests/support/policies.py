"""Build compiled policies from YAML text, through the real loader."""

from __future__ import annotations

from pathlib import Path

import yaml

from webhook.policy.loader import compile_documents, load_directory
from webhook.policy.model import PolicySet, SharingPolicy
from webhook.policy.source import parse_documents

EXAMPLE_POLICIES = Path(__file__).resolve().parents[2] / "policies" / "examples"


def sharing_policy(spec_yaml: str, name: str = "test-policy") -> SharingPolicy:
    """A GPUSharingPolicy from the YAML of its spec alone."""
    document = {
        "apiVersion": "gpuwebhook.io/v1alpha1",
        "kind": "GPUSharingPolicy",
        "metadata": {"name": name},
        "spec": yaml.safe_load(spec_yaml),
    }
    policies, problems = compile_documents(parse_documents(yaml.safe_dump(document), "test.yaml"))
    assert not problems, [str(p) for p in problems]
    return policies.sharing[0]


def policy_set(*policies: SharingPolicy) -> PolicySet:
    return PolicySet(version="test", sharing=tuple(sorted(policies, key=lambda p: (-p.priority, p.name))))


def example_policies() -> PolicySet:
    return load_directory(EXAMPLE_POLICIES)


def compile_problems(spec_yaml: str, name: str = "test-policy") -> list[str]:
    """What `policies check` says of a GPUSharingPolicy with this spec."""
    document = {
        "apiVersion": "gpuwebhook.io/v1alpha1",
        "kind": "GPUSharingPolicy",
        "metadata": {"name": name},
        "spec": yaml.safe_load(spec_yaml),
    }
    _, problems = compile_documents(parse_documents(yaml.safe_dump(document), "test.yaml"))
    return [str(p) for p in problems]
