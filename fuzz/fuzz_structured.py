"""Structure-aware fuzzing: valid reviews with one part replaced by fuzzer-chosen JSON.

Raw bytes rarely get past the parser; this target starts from the corpus reviews (every
sharing mode) and lets atheris choose where to cut and what to put there, so review(),
the mutators and the checks see hostile shapes. `make fuzz FUZZ_TARGET=structured`.
"""

from __future__ import annotations

import copy
from typing import Any

import atheris
import orjson
from harness import ROOT, fuzz, review_everywhere

with atheris.instrument_imports():
    from webhook.admission import check_request
    from webhook.errors import MalformedReview

SEEDS = [orjson.loads(p.read_bytes()) for p in sorted((ROOT / "fuzz" / "corpus").glob("*.json"))]


def _paths(node: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    found = [prefix]
    children = node.items() if isinstance(node, dict) else enumerate(node) if isinstance(node, list) else ()
    for key, child in children:
        found += _paths(child, (*prefix, key))
    return found


def _value(data: atheris.FuzzedDataProvider, depth: int = 0) -> Any:
    choice = data.ConsumeIntInRange(0, 8 if depth < 4 else 5)
    if choice == 0:
        return None
    if choice == 1:
        return data.ConsumeBool()
    if choice == 2:
        return data.ConsumeInt(8)
    if choice == 3:
        return data.ConsumeFloat()
    if choice in (4, 5):
        return data.ConsumeUnicodeNoSurrogates(data.ConsumeIntInRange(0, 64))
    if choice == 6:
        return [_value(data, depth + 1) for _ in range(data.ConsumeIntInRange(0, 4))]
    keys = ["nvidia.com/gpu", "limits", "requests", "containers", "metadata", "annotations", "x"]
    return {data.PickValueInList(keys): _value(data, depth + 1) for _ in range(data.ConsumeIntInRange(0, 4))}


def test_one_input(raw: bytes) -> None:
    data = atheris.FuzzedDataProvider(raw)
    document = copy.deepcopy(data.PickValueInList(SEEDS))
    for _ in range(data.ConsumeIntInRange(1, 3)):
        path = data.PickValueInList(_paths(document["request"])[1:])  # again: an edit reshapes the tree
        parent = document["request"]
        for key in path[:-1]:
            parent = parent[key]
        parent[path[-1]] = _value(data)
    try:
        request = check_request(orjson.loads(orjson.dumps(document["request"])))
    except (MalformedReview, TypeError):
        return  # TypeError: a value orjson cannot encode (NaN, a huge integer) is not JSON
    review_everywhere(request)


if __name__ == "__main__":
    fuzz(test_one_input)
