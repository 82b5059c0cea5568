"""Gatekeeper's spec.match semantics, and an index that only ever narrows."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from webhook.validation.constraint_match import MatchIndex, NamespaceUnknown, Subject, parse_match


def subject(
    kind: str = "Pod",
    *,
    group: str = "",
    name: str = "p",
    namespace: str = "team-a",
    labels: dict[str, str] | None = None,
    namespace_labels: dict[str, str] | None = None,
    generate_name: str = "",
) -> Subject:
    is_namespace = kind == "Namespace" and not group
    return Subject(
        group=group,
        kind=kind,
        name=name,
        generate_name=generate_name,
        namespace=name if is_namespace else namespace,
        labels=labels or {},
        is_namespace=is_namespace,
        namespace_labels=namespace_labels,
    )


POD_KINDS = {"kinds": [{"apiGroups": [""], "kinds": ["Pod"]}]}
CASES: list[tuple[str, dict[str, Any], Subject, bool]] = [
    ("empty match applies to everything", {}, subject("ConfigMap"), True),
    ("kind listed", POD_KINDS, subject(), True),
    ("kind not listed", POD_KINDS, subject("Service"), False),
    ("group must match", POD_KINDS, subject("Pod", group="example.com"), False),
    (
        "wildcard kind",
        {"kinds": [{"apiGroups": ["apps"], "kinds": ["*"]}]},
        subject("Deployment", group="apps"),
        True,
    ),
    (
        "empty apiGroups means any group",
        {"kinds": [{"kinds": ["Deployment"]}]},
        subject("Deployment", group="apps"),
        True,
    ),
    ("namespaced scope", {"scope": "Namespaced"}, subject(), True),
    ("namespaced scope, cluster object", {"scope": "Namespaced"}, subject("Node", namespace=""), False),
    ("cluster scope, Namespace object", {"scope": "Cluster"}, subject("Namespace", name="team-a"), True),
    ("namespaces exact", {"namespaces": ["team-a"]}, subject(), True),
    ("namespaces prefix glob", {"namespaces": ["team-*"]}, subject(), True),
    ("namespaces suffix glob", {"namespaces": ["*-b"]}, subject(), False),
    ("namespaces ignore cluster objects", {"namespaces": ["team-b"]}, subject("Node", namespace=""), True),
    (
        "namespaces apply to a Namespace by name",
        {"namespaces": ["team-b"]},
        subject("Namespace", name="team-a"),
        False,
    ),
    ("excluded prefix glob", {"excludedNamespaces": ["kube-*"]}, subject(namespace="kube-system"), False),
    (
        "excluded contains glob",
        {"excludedNamespaces": ["*system*"]},
        subject(namespace="gpu-system-x"),
        False,
    ),
    ("excluded elsewhere", {"excludedNamespaces": ["kube-*"]}, subject(), True),
    (
        "label selector",
        {"labelSelector": {"matchLabels": {"gpu": "yes"}}},
        subject(labels={"gpu": "yes"}),
        True,
    ),
    ("label selector misses", {"labelSelector": {"matchLabels": {"gpu": "yes"}}}, subject(), False),
    (
        "namespace selector",
        {"namespaceSelector": {"matchExpressions": [{"key": "tier", "operator": "In", "values": ["gpu"]}]}},
        subject(namespace_labels={"tier": "gpu"}),
        True,
    ),
    (
        "namespace selector on the Namespace itself",
        {"namespaceSelector": {"matchLabels": {"tier": "gpu"}}},
        subject("Namespace", name="team-a", labels={"tier": "gpu"}),
        True,
    ),
    (
        "namespace selector ignores cluster objects",
        {"namespaceSelector": {"matchLabels": {"a": "b"}}},
        subject("Node", namespace=""),
        True,
    ),
    ("name exact", {"name": "p"}, subject(), True),
    ("name prefix", {"name": "train-*"}, subject(name="train-1"), True),
    ("name prefix matches generateName", {"name": "train-*"}, subject(name="", generate_name="train-"), True),
    ("name differs", {"name": "q"}, subject(), False),
]


@pytest.mark.parametrize(("raw", "target", "expected"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_match(raw: dict[str, Any], target: Subject, expected: bool) -> None:
    assert parse_match(raw).matches(target) is expected


def test_namespace_selector_with_unknown_namespace_cannot_be_decided() -> None:
    with pytest.raises(NamespaceUnknown):
        parse_match({"namespaceSelector": {"matchLabels": {"a": "b"}}}).matches(
            subject(namespace_labels=None)
        )


KINDS = ["Pod", "Deployment", "Service", "Namespace", "Node"]
NAMESPACES = ["team-a", "team-b", "kube-system", ""]
matches = st.fixed_dictionaries(
    {},
    optional={
        "kinds": st.lists(
            st.fixed_dictionaries(
                {
                    "apiGroups": st.just(["", "apps"]),
                    "kinds": st.lists(st.sampled_from([*KINDS, "*"]), max_size=2),
                }
            ),
            max_size=2,
        ),
        "namespaces": st.lists(st.sampled_from(["team-a", "team-*", "kube-system", "*-b"]), max_size=2),
        "excludedNamespaces": st.lists(st.sampled_from(["kube-*", "team-b"]), max_size=2),
        "scope": st.sampled_from(["*", "Cluster", "Namespaced"]),
    },
)


@settings(max_examples=200, deadline=None)
@given(st.lists(matches, max_size=12), st.sampled_from(KINDS), st.sampled_from(NAMESPACES))
def test_index_never_drops_a_matching_constraint(
    raw: list[dict[str, Any]], kind: str, namespace: str
) -> None:
    parsed = [parse_match(m) for m in raw]
    index = MatchIndex(parsed, lambda m: m)
    target = subject(kind, group="apps" if kind == "Deployment" else "", name="team-a", namespace=namespace)
    candidates = set(index.candidates(target.kind, target.namespace))
    assert {i for i, m in enumerate(parsed) if m.matches(target)} <= candidates
