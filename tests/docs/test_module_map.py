"""The README's module map is the import-linter contract, in words: the same modules, in the same
order from the edges in (pyproject.toml holds the contract that `make lint` runs)."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
PACKAGE = REPO / "webhook"


def _contract_layers() -> list[set[str]]:
    config = tomllib.loads((REPO / "pyproject.toml").read_text())
    contract = next(c for c in config["tool"]["importlinter"]["contracts"] if c["type"] == "layers")
    return [set(re.split(r"\s*[|:]\s*", layer)) for layer in contract["layers"]]


def _map_modules() -> list[str]:
    """The modules the README's map names in its second column, top to bottom, left to right."""
    text = (REPO / "README.md").read_text()
    table = text.split("| layer | modules | what |", 1)[1].split("\n\n", 1)[0]
    rows = table.strip().splitlines()[1:]  # below the header's rule
    assert rows, "the README has no module map"
    found = []
    for row in rows:
        cell = row.split(" | ", 2)[1]  # `\|` inside a cell is no column break
        found += [name.rstrip("/").removesuffix(".py") for name in re.findall(r"`([a-z_]+(?:\.py|/))`", cell)]
    return found


def _top_level() -> set[str]:
    modules = {p.stem for p in PACKAGE.glob("*.py")} | {p.parent.name for p in PACKAGE.glob("*/__init__.py")}
    return modules - {"__init__", "__main__"}


def test_the_map_names_only_modules_that_exist() -> None:
    assert set(_map_modules()) <= _top_level()


def test_the_contract_places_every_module() -> None:
    placed = set().union(*_contract_layers())
    assert _top_level() <= placed


def test_the_map_lists_modules_in_the_contracts_order() -> None:
    layer_of = {module: index for index, layer in enumerate(_contract_layers()) for module in layer}
    order = [layer_of[module] for module in _map_modules()]
    assert order == sorted(order), list(zip(_map_modules(), order, strict=True))


def test_the_map_names_every_layer_above_the_base() -> None:
    named = set(_map_modules())
    layers = _contract_layers()
    base = layers[-1]
    for layer in layers[1:-1]:  # __main__ is the command's entry point, and the base is elided
        assert layer & named or layer <= base, layer
