"""Order and convergence, as Gatekeeper's pkg/mutation/system.go and ordered_ids.go."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from tests.gkmutation.support import assign, pod, policies
from webhook.gkmutation.mutators import Target
from webhook.gkmutation.system import MutatorSet, NotConverging

TARGET = Target("", "v1", "Pod", "CREATE", "default", {})


def test_mutators_run_by_kind_then_name() -> None:
    """Assign < AssignImage < AssignMetadata < ModifySet; names break ties (ordered_ids.go)."""
    loaded = policies(
        "apiVersion: mutations.gatekeeper.sh/v1\nkind: ModifySet\nmetadata: {name: a}\nspec:\n"
        "  applyTo: [{groups: [''], versions: [v1], kinds: [Pod]}]\n  location: spec.x\n"
        "  parameters: {values: {fromList: [m]}}",
        assign("z", "spec.x", "{assign: {value: [z]}}"),
        assign("b", "spec.x", "{assign: {value: [b]}}"),
    )
    assert loaded.mutators is not None
    assert [m.id for m in loaded.mutators.mutators] == ["Assign/b", "Assign/z", "ModifySet/a"]
    outcome = loaded.mutators.run(pod(), TARGET)
    assert outcome.object["spec"]["x"] == ["z", "m"]


def test_a_label_added_late_brings_an_earlier_mutator_in_on_the_next_pass() -> None:
    """match reads the object as it stands: the loop runs until nothing changes."""
    labelled = assign(
        "needs-label",
        "spec.hostname",
        "{assign: {value: tagged}}",
        extra="  match: {labelSelector: {matchLabels: {tier: gpu}}}",
    )
    label = (
        "apiVersion: mutations.gatekeeper.sh/v1\nkind: AssignMetadata\nmetadata: {name: tier}\n"
        "spec:\n  location: metadata.labels.tier\n  parameters: {assign: {value: gpu}}"
    )
    loaded = policies(labelled, label)
    assert loaded.mutators is not None
    outcome = loaded.mutators.run(pod(), TARGET)
    assert outcome.object["spec"]["hostname"] == "tagged"
    assert outcome.applied == ("AssignMetadata/tier", "Assign/needs-label")


def test_the_input_object_is_never_written() -> None:
    loaded = policies(assign("a", "spec.hostname", "{assign: {value: h}}"))
    assert loaded.mutators is not None
    obj = pod()
    outcome = loaded.mutators.run(obj, TARGET)
    assert "hostname" not in obj["spec"] and outcome.changed


def test_a_mutator_that_writes_what_is_there_changes_nothing() -> None:
    loaded = policies(assign("a", "spec.hostname", "{assign: {value: h}}"))
    assert loaded.mutators is not None
    obj = pod(containers=[{"name": "main", "image": "nginx"}], hostname="h")
    assert not loaded.mutators.run(obj, TARGET).changed


class _Growing:
    """An action that appends on every call: no Gatekeeper kind does (assignIf could, and was
    removed for it), so the loop's bound is shown with this one."""

    keyed_list_okay = False

    def setter(self, obj: Any, target: Target) -> _Growing:
        return self

    def set_value(self, obj: dict[str, Any], key: str) -> None:
        obj[key] = [*obj.get(key, []), 1]

    def keyed_list_value(self) -> dict[str, Any]:
        raise AssertionError("not a keyed list")


def test_a_set_that_never_settles_is_an_error_after_one_pass_more_than_mutators() -> None:
    loaded = policies(
        assign("a", "spec.grow", "{assign: {value: []}}"), assign("b", "spec.other", "{assign: {value: 1}}")
    )
    assert loaded.mutators is not None
    first, second = loaded.mutators.mutators
    growing = MutatorSet([replace(first, action=_Growing()), second])  # type: ignore[arg-type]
    with pytest.raises(NotConverging, match="Assign/a"):
        growing.run(pod(), TARGET)
