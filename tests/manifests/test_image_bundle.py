"""The image must carry what the package's symlinks point at, or it ships without the bundle."""

from __future__ import annotations

import re

from tests.manifests.objects import REPO

CONTAINERFILE = (REPO / "Containerfile").read_text()
BUILD = re.split(r"^FROM ", CONTAINERFILE, flags=re.MULTILINE)[1]


def test_every_symlink_of_the_package_has_its_target_in_the_build() -> None:
    links = [path for path in (REPO / "webhook").iterdir() if path.is_symlink()]
    assert {link.name for link in links} >= {"security_policies", "base_manifests"}
    copied = re.findall(r"^COPY (\S+) \./(\S+)$", BUILD, flags=re.MULTILINE)
    for link in links:
        target = (link.parent / link.readlink()).resolve().relative_to(REPO)
        assert (str(target), str(target)) in copied, f"{link.name} -> {target} is not copied"
