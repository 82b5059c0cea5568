"""docs/vendors.md tells the catalog as it is: every name, pattern and device variable."""

from __future__ import annotations

from pathlib import Path

import pytest

from webhook import vendors

PAGE = (Path(__file__).resolve().parents[2] / "docs" / "vendors.md").read_text()
NAMES = [name for family in vendors.FAMILIES for name in family.names()]


@pytest.mark.parametrize("name", NAMES)
def test_every_catalog_name_is_documented(name: str) -> None:
    assert f"`{name}`" in PAGE


@pytest.mark.parametrize("pattern", [p.regex.pattern for p in vendors.PATTERNS])
def test_every_pattern_is_documented(pattern: str) -> None:
    assert f"`{pattern}`" in PAGE


@pytest.mark.parametrize("variable", vendors.DEVICE_VARIABLES, ids=lambda v: v.name)
def test_every_device_variable_is_documented(variable: vendors.DeviceVariable) -> None:
    assert f"`{variable.name}{'*' if variable.prefix else ''}`" in PAGE


@pytest.mark.parametrize("family", vendors.FAMILIES, ids=lambda f: f.count)
def test_each_familys_row_says_whether_a_unit_may_be_a_share(family: vendors.Family) -> None:
    """`maybe_shared` is what the page tells users to set `sharedReplicas` for."""
    row = next(
        line
        for line in PAGE.splitlines()
        if line.startswith(f"| {family.vendor} |") and f"| `{family.count}` |" in line
    )
    assert ("a unit may be a share" in row) is family.maybe_shared
