"""The DRA store the watch cache keeps: event by event it holds what a full list would, and a
claim's status updates (most of its events) leave the index as it was."""

from __future__ import annotations

import copy
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from tests.dra.objects import claim, device_class, request, template
from webhook.dra.index import CLAIMS, CLASSES, TEMPLATES, DraStore, build_index

OBJECTS = {
    CLAIMS: [claim(f"c{i}", request(count=n)) for i, n in enumerate((1, 2, 2, 4))],
    TEMPLATES: [template(f"t{i}", request(count=n)) for i, n in enumerate((1, 3))],
    CLASSES: [
        device_class("gpu.nvidia.com", "device.driver == 'gpu.nvidia.com'"),
        device_class("accel", "device.driver == 'accel.example.com'", extended="example.com/accel"),
    ],
}


def _variant(obj: dict[str, Any], count: int) -> dict[str, Any]:
    """The same object with another device count (a new object under the same name)."""
    changed = copy.deepcopy(obj)
    spec = changed["spec"]["spec"] if changed["kind"] == "ResourceClaimTemplate" else changed["spec"]
    if "devices" in spec:
        spec["devices"]["requests"][0]["exactly"]["count"] = count
    return changed


events = st.lists(
    st.tuples(
        st.sampled_from(sorted(OBJECTS)),
        st.integers(0, 3),
        st.sampled_from(["put", "remove"]),
        st.integers(1, 3),
    ),
    max_size=30,
)


@settings(max_examples=200, deadline=None)
@given(events)
def test_events_leave_the_index_a_full_list_would_build(history: list[tuple[str, int, str, int]]) -> None:
    store = DraStore(("accel",))
    live: dict[tuple[str, str], dict[str, Any]] = {}
    for kind, which, action, count in history:
        base = OBJECTS[kind][which % len(OBJECTS[kind])]
        obj = _variant(base, count)
        key = (kind, obj["metadata"]["name"])
        if action == "put":
            store.put(kind, obj)
            live[key] = obj
        else:
            store.remove(kind, obj)
            live.pop(key, None)
    listed = {kind: [o for (k, _), o in live.items() if k == kind] for kind in OBJECTS}
    assert store.index(True) == build_index(listed, ("accel",), synced=True)
    assert sorted(t["metadata"]["name"] for t in store.templates()) == sorted(
        o["metadata"]["name"] for o in listed[TEMPLATES]
    )


def test_a_claims_status_update_keeps_the_index() -> None:
    store = DraStore()
    store.replace(CLAIMS, OBJECTS[CLAIMS])
    before = store.index(True)
    allocated = copy.deepcopy(OBJECTS[CLAIMS][0])
    allocated["status"] = {"reservedFor": [{"resource": "pods", "name": "p", "uid": "u"}]}
    store.put(CLAIMS, allocated)
    assert store.index(True) is before
    store.put(CLAIMS, _variant(OBJECTS[CLAIMS][0], 3))
    after = store.index(True)
    assert (
        after is not before and after.claim_devices("team-a", "c0")[1]["requests"][0]["exactly"]["count"] == 3
    )
    assert (
        before.claim_devices("team-a", "c0")[1]["requests"][0]["exactly"]["count"] == 1
    )  # never changed under a reader
