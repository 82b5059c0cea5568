"""The plan that keeps mode dra's ResourceClaimTemplates in place (webhook.dra.sync), table-driven,
and a property: applying plans converges on exactly the wanted templates, whatever was there.

The spec-immutability the plan works around is resource.k8s.io/v1's (ResourceClaimTemplate.spec:
"This field is immutable"), which tests/support/fakekube.py enforces too."""

from __future__ import annotations

import copy
import datetime as dt
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.dra.objects import WHOLE_DRA
from tests.support.policies import sharing_policy
from webhook.dra import sync, templates
from webhook.dra.index import Key

NOW = dt.datetime(2026, 12, 1, 12, 0, tzinfo=dt.UTC)
OTHER = sharing_policy(
    "sharing: {mode: dra, strategy: TimeSlicing, maxGpusPerPod: 1,"
    " driverFeatureGates: {TimeSlicingSettings: true}}",
    name="sliced",
)
ONE, TWO = templates.templates_for(WHOLE_DRA, "team-a")
(SLICED,) = templates.templates_for(OTHER, "team-a")


def _key(obj: dict[str, Any]) -> Key:
    return obj["metadata"]["namespace"], obj["metadata"]["name"]


def _stored(obj: dict[str, Any], rv: str = "7", **meta: Any) -> dict[str, Any]:
    stored = copy.deepcopy(obj)
    stored["metadata"].update(resourceVersion=rv, uid="u-1", **meta)
    return stored


def _not_ours(obj: dict[str, Any]) -> dict[str, Any]:
    return _stored(obj, labels={"team": "a"}, annotations={})


def _with_spec(obj: dict[str, Any], spec: dict[str, Any]) -> dict[str, Any]:
    return {**obj, "spec": spec}


def _marked(obj: dict[str, Any], when: dt.datetime) -> dict[str, Any]:
    annotations = {**obj["metadata"]["annotations"], sync.UNWANTED_SINCE: when.strftime("%Y-%m-%dT%H:%M:%SZ")}
    return _stored(obj, annotations=annotations)


def _plan(
    wanted: list[dict[str, Any]], existing: list[dict[str, Any]], *, managed: str = "team-a"
) -> sync.Plan:
    return sync.plan({_key(t): t for t in wanted}, {_key(o): o for o in existing}, managed.__eq__, NOW)


def _actions(found: sync.Plan) -> list[tuple[str, str]]:
    return [(w.action, w.name) for w in found.writes]


CASES = [
    ("absent: created", [ONE], [], [("create", ONE)], []),
    ("ours, as wanted: left alone", [ONE], [_stored(ONE)], [], []),
    (
        "our label removed, same spec: someone else's now, left alone",
        [ONE],
        [_stored(ONE, labels={})],
        [],
        [],
    ),
    (
        "ours, policy annotation changed: restored",
        [ONE],
        [_stored(ONE, annotations={templates.POLICY_ANNOTATION: "x"})],
        [("update", ONE)],
        [],
    ),
    ("ours, marked unwanted but wanted again: unmarked", [ONE], [_marked(ONE, NOW)], [("update", ONE)], []),
    ("ours, another spec: deleted", [ONE], [_with_spec(_stored(ONE), TWO["spec"])], [("delete", ONE)], []),
    ("not ours, same spec: left alone", [ONE], [_not_ours(ONE)], [], []),
    ("not ours, another spec: a conflict", [ONE], [_with_spec(_not_ours(ONE), TWO["spec"])], [], [ONE]),
    ("ours, unwanted: marked", [], [_stored(SLICED)], [("update", SLICED)], []),
    (
        "ours, unwanted, marked a minute ago: kept",
        [],
        [_marked(SLICED, NOW - dt.timedelta(minutes=1))],
        [],
        [],
    ),
    (
        "ours, unwanted, marked past the grace: deleted",
        [],
        [_marked(SLICED, NOW - dt.timedelta(seconds=sync.GRACE_SECONDS))],
        [("delete", SLICED)],
        [],
    ),
    ("not ours, unwanted: left alone", [], [_not_ours(SLICED)], [], []),
]


@pytest.mark.parametrize(
    ("wanted", "existing", "writes", "conflicts"), [c[1:] for c in CASES], ids=[c[0] for c in CASES]
)
def test_plan(
    wanted: list[dict[str, Any]],
    existing: list[dict[str, Any]],
    writes: list[tuple[str, dict[str, Any]]],
    conflicts: list[dict[str, Any]],
) -> None:
    found = _plan(wanted, existing)
    assert _actions(found) == [(action, t["metadata"]["name"]) for action, t in writes]
    assert found.conflicts == tuple(f"team-a/{t['metadata']['name']}" for t in conflicts)


def test_templates_in_namespaces_not_managed_are_never_touched() -> None:
    assert _plan([], [_stored(SLICED)], managed="team-b").writes == ()


def test_an_unreadable_mark_is_replaced() -> None:
    broken = _stored(SLICED, annotations={sync.UNWANTED_SINCE: "yesterday"})
    (write,) = _plan([], [broken]).writes
    assert write.action == "update" and write.body is not None
    assert write.body["metadata"]["annotations"][sync.UNWANTED_SINCE] == "2026-12-01T12:00:00Z"


def test_updates_keep_identity_version_spec_and_foreign_metadata() -> None:
    labels = {"team": "a", **ONE["metadata"]["labels"]}
    existing = _stored(ONE, labels=labels, annotations={"note": "kept", sync.UNWANTED_SINCE: "x"})
    (write,) = _plan([ONE], [existing]).writes
    assert write.body is not None
    assert write.body["metadata"]["resourceVersion"] == "7"
    assert write.body["spec"] == ONE["spec"]
    assert write.body["metadata"]["labels"] == labels
    assert write.body["metadata"]["annotations"] == {"note": "kept", **ONE["metadata"]["annotations"]}


def test_deletes_carry_the_version_they_were_decided_on() -> None:
    (write,) = _plan([ONE], [_with_spec(_stored(ONE, rv="42"), TWO["spec"])]).writes
    assert (write.action, write.resource_version) == ("delete", "42")


# Property: whatever exists, applying plans (and letting the grace pass) converges on the wanted set.

WANTABLE = [*templates.templates_for(WHOLE_DRA, "team-a"), *templates.templates_for(OTHER, "team-a")]


def _variant(draw: st.DrawFn, base: dict[str, Any]) -> dict[str, Any]:
    obj = _stored(base)
    if draw(st.booleans()):
        obj["metadata"]["labels"] = draw(
            st.sampled_from([{}, {"team": "a"}, dict(base["metadata"]["labels"])])
        )
    if draw(st.booleans()):
        obj["spec"] = draw(st.sampled_from(WANTABLE))["spec"]
    if draw(st.booleans()):
        obj = _marked(obj, NOW - dt.timedelta(seconds=draw(st.integers(0, 2000))))
    return obj


@st.composite
def worlds(draw: st.DrawFn) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    wanted = draw(st.lists(st.sampled_from(WANTABLE), unique_by=lambda t: t["metadata"]["name"]))
    bases = draw(st.lists(st.sampled_from(WANTABLE), unique_by=lambda t: t["metadata"]["name"]))
    return wanted, [_variant(draw, base) for base in bases]


def _apply(store: dict[Key, dict[str, Any]], found: sync.Plan) -> None:
    for write in found.writes:
        key = (write.namespace, write.name)
        if write.action == "delete":
            del store[key]
        else:
            assert write.body is not None
            if write.action == "update":
                assert store[key]["spec"] == write.body["spec"]  # the API refuses spec changes
            store[key] = _stored(write.body)


@settings(max_examples=150, deadline=None)
@given(worlds())
def test_plans_converge_on_the_wanted_templates(
    world: tuple[list[dict[str, Any]], list[dict[str, Any]]],
) -> None:
    wanted, existing = world
    want = {_key(t): t for t in wanted}
    store = {_key(o): o for o in existing}
    now = NOW
    for _ in range(4):
        found = sync.plan(want, store, "team-a".__eq__, now)
        _apply(store, found)
        now += dt.timedelta(seconds=sync.GRACE_SECONDS)
    final = sync.plan(want, store, "team-a".__eq__, now)
    assert final.writes == ()
    for key, template in want.items():
        if key in store and not sync.ours(store[key]) and store[key]["spec"] != template["spec"]:
            assert f"{key[0]}/{key[1]}" in final.conflicts  # someone else's: reported, never overwritten
            continue
        assert store[key]["spec"] == template["spec"]
    assert all(key in want or not sync.ours(obj) for key, obj in store.items())
