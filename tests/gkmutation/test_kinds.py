"""Each kind's checks at load and its effect, after Gatekeeper's mutators/assign, assignmeta,
modifyset and assignimage (their *_mutator.go and *_test.go)."""

from __future__ import annotations

from typing import Any

import jsonpatch
import pytest

from tests.gkmutation.support import assign, mutated, pod, policies, problems
from webhook.gkmutation.image import Image, parameter_problems
from webhook.policy.model import PolicySet


def _after(policy_set: PolicySet, obj: dict[str, Any]) -> dict[str, Any]:
    decision = mutated(policy_set, obj)
    assert decision.allowed, decision.message
    result = jsonpatch.apply_patch(obj, list(decision.patch))
    assert isinstance(result, dict)
    return result


LOAD_PROBLEMS = [
    (assign("a", "metadata.labels.x", "{assign: {value: y}}"), 6, "cannot change metadata"),
    (assign("a", "spec.containers[name: *]", "{assign: {value: {name: x}}}"), 6, "cannot end in a glob"),
    (assign("a", "spec.containers[name: a].name", "{assign: {value: b}}"), 6, "changes the list key"),
    (assign("a", "spec.containers[name: a]", "{assign: {value: {name: b}}}"), 7, "must carry the key"),
    (assign("a", "spec.x..y", "{assign: {value: 1}}"), 6, "is not a location"),
    (assign("a", "spec.x", "{assign: {value: 1, fromMetadata: {field: name}}}"), 7, "exactly one of"),
    (assign("a", "spec.x", "{assign: {fromMetadata: {field: uid}}}"), 7, "must be namespace or name"),
    (assign("a", "spec.x", "{assign: {externalData: {provider: p}}}"), 7, "external data providers"),
    (assign("a", "spec.x", "{assignIf: {in: [1]}, assign: {value: 1}}"), 7, "assignIf was removed"),
    (
        assign("a", "spec.x", "{pathTests: [{subPath: spec.y, condition: MustExist}], assign: {value: 1}}"),
        7,
        "not a prefix",
    ),
    (
        assign("a", "spec.x", "{pathTests: [{subPath: spec, condition: Maybe}], assign: {value: 1}}"),
        7,
        "MustExist, MustNotExist",
    ),
    (assign("Upper", "spec.x", "{assign: {value: 1}}"), 3, "lower-case DNS name"),
    (assign("a", "spec.x", "{assign: {value: 1}}", extra="  match: {scope: Everywhere}"), 8, "is not one of"),
    (
        assign("a", "spec.x", "{assign: {value: 1}}", extra="  match: {source: Elsewhere}"),
        8,
        "must be one of All",
    ),
    (
        "apiVersion: mutations.gatekeeper.sh/v1\nkind: Assign\nmetadata: {name: a}\nspec:\n"
        "  location: spec.x\n  parameters: {assign: {value: 1}}",
        4,
        "applyTo is required",
    ),
    (
        "apiVersion: mutations.gatekeeper.sh/v1\nkind: AssignImage\nmetadata: {name: a}\nspec: {}",
        1,
        "served as",
    ),
    (
        "apiVersion: mutations.gatekeeper.sh/v1\nkind: AssignMetadata\nmetadata: {name: a}\nspec:\n"
        "  location: spec.x\n  parameters: {assign: {value: v}}",
        5,
        "only metadata.labels",
    ),
    (
        "apiVersion: mutations.gatekeeper.sh/v1\nkind: AssignMetadata\nmetadata: {name: a}\nspec:\n"
        "  location: metadata.labels.x\n  parameters: {assign: {value: 1}}",
        6,
        "must be a string",
    ),
    (
        "apiVersion: mutations.gatekeeper.sh/v1\nkind: ModifySet\nmetadata: {name: a}\nspec:\n"
        "  applyTo: [{groups: [''], versions: [v1], kinds: [Pod], operations: [DELETE]}]\n"
        "  location: spec.x\n  parameters: {operation: merge}",
        5,
        "must list only CREATE, UPDATE",
    ),
]


@pytest.mark.parametrize(("document", "line", "reason"), LOAD_PROBLEMS, ids=[r for _, _, r in LOAD_PROBLEMS])
def test_load_problems_name_file_line_and_reason(document: str, line: int, reason: str) -> None:
    found = problems(document)
    assert any(p.startswith(f"mutations.yaml:{line}:") and reason in p for p in found), found


def test_two_mutators_of_one_kind_and_name_are_refused() -> None:
    document = assign("a", "spec.x", "{assign: {value: 1}}")
    assert any("also defined at" in p for p in problems(document, document))


def test_assign_from_metadata_writes_the_namespace() -> None:
    result = _after(
        policies(assign("ns", "spec.hostname", "{assign: {fromMetadata: {field: namespace}}}")), pod()
    )
    assert result["spec"]["hostname"] == "default"


def test_assign_metadata_never_overwrites() -> None:
    """assignmeta_mutator.go: the key is tested MustNotExist."""
    document = (
        "apiVersion: mutations.gatekeeper.sh/v1beta1\nkind: AssignMetadata\nmetadata: {name: owner}\n"
        "spec:\n  location: metadata.labels.owner\n  parameters: {assign: {value: platform}}"
    )
    mine = pod()
    mine["metadata"]["labels"] = {"owner": "me"}
    assert _after(policies(document), mine)["metadata"]["labels"] == {"owner": "me"}
    assert _after(policies(document), pod())["metadata"]["labels"] == {"owner": "platform"}


MODIFY_SET = [
    ("merge", ["a", "b"], ["b", "c"], ["b", "c", "a"]),
    ("merge", ["a", "a"], None, ["a", "a"]),  # a missing list is set to fromList as it is
    ("prune", ["b"], ["b", "c", "b"], ["c"]),
    ("prune", ["b"], None, None),
]


@pytest.mark.parametrize(("operation", "values", "before", "after"), MODIFY_SET)
def test_modify_set(
    operation: str, values: list[str], before: list[str] | None, after: list[str] | None
) -> None:
    document = (
        "apiVersion: mutations.gatekeeper.sh/v1\nkind: ModifySet\nmetadata: {name: args}\nspec:\n"
        "  applyTo: [{groups: [''], versions: [v1], kinds: [Pod]}]\n"
        "  location: 'spec.containers[name: main].args'\n"
        f"  parameters: {{operation: {operation}, values: {{fromList: {values}}}}}"
    )
    obj = pod()
    if before is not None:
        obj["spec"]["containers"][0]["args"] = before
    assert _after(policies(document), obj)["spec"]["containers"][0].get("args") == after


IMAGES = [
    ("nginx", "my.registry.io", "", "", "my.registry.io/nginx"),
    ("docker.io/library/nginx:1.25", "my.registry.io", "", "", "my.registry.io/library/nginx:1.25"),
    ("nginx:1.25", "", "", ":1.27", "nginx:1.27"),
    (
        "localhost:5000/app@sha256:" + "a" * 64,
        "",
        "team/app",
        "",
        "localhost:5000/team/app@sha256:" + "a" * 64,
    ),
    ("", "", "", ":latest", ":latest"),
]


@pytest.mark.parametrize(("image", "domain", "path", "tag", "expected"), IMAGES)
def test_assign_image_parts(image: str, domain: str, path: str, tag: str, expected: str) -> None:
    """imageparser.go: split at the domain and tag, keep what is not assigned."""
    assert Image.parse(image).assigned(domain, path, tag).reference() == expected


@pytest.mark.parametrize(
    ("domain", "path", "tag", "reason"),
    [
        ("", "", "", "at least one"),
        ("nodots", "", "", "fully-qualified"),
        ("", "Upper", "", "valid image path"),
        ("", "", "latest", "starting with ':'"),
        ("", "gcr.io/repo", "", "reads as a domain"),
    ],
)
def test_assign_image_parameters_refused(domain: str, path: str, tag: str, reason: str) -> None:
    assert any(reason in r for _, r in parameter_problems(domain, path, tag))


def test_assign_image_end_to_end() -> None:
    document = (
        "apiVersion: mutations.gatekeeper.sh/v1alpha1\nkind: AssignImage\nmetadata: {name: mirror}\nspec:\n"
        "  applyTo: [{groups: [''], versions: [v1], kinds: [Pod]}]\n"
        "  location: 'spec.containers[name: *].image'\n  parameters: {assignDomain: mirror.example.com}"
    )
    assert _after(policies(document), pod())["spec"]["containers"][0]["image"] == "mirror.example.com/nginx"
