"""Readings remembered by a container's resources content give what a direct reading gives."""

from __future__ import annotations

import datetime
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from webhook.accounting import demand
from webhook.accounting.by_resources import MAX_KEPT, MAX_KEY_BYTES, Remembered, content_key
from webhook.accounting.names import is_accelerator
from webhook.mutation import resources
from webhook.validation import builtin


class Counting:
    """A reading that counts its calls; answers "bad" for a container named bad."""

    def __init__(self) -> None:
        self.calls = 0

    def __call__(self, container: dict[str, Any], context: str) -> str:
        self.calls += 1
        if container.get("name") == "bad":
            return "bad"
        return f"{context}:{sorted(container.get('resources') or {})}"


def _remembered() -> tuple[Counting, Remembered[str, str]]:
    read = Counting()
    return read, Remembered(read, lambda answer: answer != "bad")


def gpu(count: Any = "1", name: str = "main") -> dict[str, Any]:
    return {"name": name, "resources": {"limits": {"nvidia.com/gpu": count}}}


@pytest.mark.parametrize(
    ("first", "second", "calls"),
    [
        pytest.param(gpu(), gpu(name="other"), 1, id="same content, another container: read once"),
        pytest.param(gpu(), gpu("2"), 2, id="another count: read again"),
        pytest.param(gpu(1), gpu("1"), 2, id="a number and a string are different content"),
        pytest.param(gpu(1), gpu(1.0), 2, id="an integer and a float are different content"),
        pytest.param({"name": "a"}, {"name": "b"}, 1, id="no resources: one content"),
        pytest.param(gpu(name="bad"), gpu(name="bad"), 2, id="a reading with a problem is not kept"),
        pytest.param(
            gpu(datetime.date(2026, 1, 1)), gpu(datetime.date(2026, 1, 1)), 2, id="a YAML date is not JSON"
        ),
        pytest.param(gpu(2**70), gpu(2**70), 2, id="an integer past 64 bits is not JSON to orjson"),
        pytest.param(
            {"name": "a", "resources": {"limits": {"x/" + "y" * MAX_KEY_BYTES: "1"}}},
            {"name": "a", "resources": {"limits": {"x/" + "y" * MAX_KEY_BYTES: "1"}}},
            2,
            id="a resources part too large to key is read directly",
        ),
        pytest.param({"name": "a", "resources": []}, {"name": "a", "resources": []}, 2, id="not an object"),
    ],
)
def test_what_is_remembered(first: dict[str, Any], second: dict[str, Any], calls: int) -> None:
    read, remembered = _remembered()
    assert remembered(first, "q") == read(first, "q")
    assert remembered(second, "q") == read(second, "q")
    assert read.calls - 2 == calls


def test_the_question_is_part_of_the_key() -> None:
    read, remembered = _remembered()
    assert remembered(gpu(), "one").startswith("one:")
    assert remembered(gpu(), "two").startswith("two:")
    assert read.calls == 2


def test_content_changed_in_place_is_read_again() -> None:
    """Mutators edit containers in place: the key is taken from the content at each call."""
    container = gpu()
    assert resources.uses_gpu(container)
    container["resources"] = {"limits": {"cpu": "1"}}
    assert not resources.uses_gpu(container)


def test_the_memory_is_bounded() -> None:
    _, remembered = _remembered()
    for n in range(MAX_KEPT + 10):
        remembered(gpu(str(n)), "q")
    assert len(remembered._found) <= MAX_KEPT


def test_string_subclass_keys_are_read_directly() -> None:
    class Name(str):
        pass

    assert content_key({"resources": {"limits": {Name("nvidia.com/gpu"): "1"}}}) is None


QUANTITIES = st.one_of(
    st.sampled_from(["1", "2", "0", "1.5", "-1", "1e3", "2Gi", "abc", ""]),
    st.integers(-3, 3),
    st.floats(allow_nan=True, allow_infinity=True),
    st.booleans(),
    st.none(),
)
NAMES = st.sampled_from(
    [
        "nvidia.com/gpu",
        "nvidia.com/mig-1g.10gb",
        "nvidia.com/mig-9g.99gb",
        "nvidia.com/gpu.shared",
        "amd.com/gpu",
        "gpu.intel.com/i915",
        "example.com/thing",
        "cpu",
        "memory",
        "deviceclass.resource.kubernetes.io/gpu",
    ]
)
SECTION: st.SearchStrategy[Any] = st.one_of(
    st.dictionaries(NAMES, QUANTITIES, max_size=4), st.none(), st.just([]), st.just("1")
)
RESOURCES: st.SearchStrategy[Any] = st.one_of(
    st.fixed_dictionaries({}, optional={"limits": SECTION, "requests": SECTION}), st.none(), st.just([])
)
CONTAINERS = st.builds(lambda r: {"name": "c"} if r is None else {"name": "c", "resources": r}, RESOURCES)


def _outcome(read: Any, *args: Any) -> Any:
    try:
        return ("ok", read(*args))
    except Exception as e:  # the same error, raised the same way, or the test fails
        return ("error", type(e), str(e))


@settings(max_examples=300, deadline=None)
@given(st.lists(CONTAINERS, min_size=1, max_size=12))
def test_remembered_readings_equal_direct_ones(containers: list[dict[str, Any]]) -> None:
    """Over a run of containers (so that later ones hit what earlier ones left), each remembered
    reading answers what the direct reading answers, errors included."""
    shared = ("example.com/thing",)
    for container in containers:
        for field in ("containers", "initContainers"):
            direct = _outcome(demand._read_amounts, container, field)
            assert _outcome(demand._amounts, container, field) == direct
        question = (is_accelerator, shared)
        assert resources._any_name(container, *question) == resources._read_any_name(container, question)
        assert resources.asked_names(container) == resources._read_names(container, ())
        assert _outcome(builtin._container_quantities, container, shared) == _outcome(
            builtin._read_quantities, container, shared
        )
