"""The Kubernetes version of the cluster, as far as a rule needs it. Pure.

Native sidecars (an init container with `restartPolicy: Always`) are on by default from
1.29 (the SidecarContainers feature gate went beta); older API servers drop the field
without an error, and the agent then blocks the pod in Init forever.
"""

from __future__ import annotations

import re

Version = tuple[int, int]
NATIVE_SIDECARS: Version = (1, 29)
_VERSION = re.compile(r"^v?([0-9]+)\.([0-9]+)")


class VersionError(ValueError):
    pass


def parse(text: str) -> Version:
    """'v1.28.3', '1.30', 'v1.29.1-gke.100' -> (major, minor)."""
    match = _VERSION.match(text.strip())
    if match is None:
        raise VersionError(f"{text!r} is not a Kubernetes version like 1.29 or v1.29.3")
    return int(match[1]), int(match[2])


def has_native_sidecars(version: Version | None) -> bool:
    """Unknown (offline, no flag): assume a supported cluster, as every maintained release is."""
    return version is None or version >= NATIVE_SIDECARS


def show(version: Version) -> str:
    return f"{version[0]}.{version[1]}"
