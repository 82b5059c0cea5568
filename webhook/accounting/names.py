"""What a resource name or annotation stands for: the one place that reads GPU names. Pure.

Every rule asks here, so that a name one rule counts is a name every rule counts:
NVIDIA's device plugin names (whole GPUs, replicas, MIG slices and their `.shared`
replicas), and every family of the vendor catalog (webhook/vendors.py).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

from webhook import gpu, vendors
from webhook.dra.index import IMPLICIT_PREFIX

# What asks KAI for a share of a GPU (KAI-Scheduler pkg/common/constants/constants.go).
KAI_ANNOTATIONS = gpu.KAI_ANNOTATIONS


def is_accelerator(name: str, extra: Iterable[str] = ()) -> bool:
    """A resource that gives a container accelerator devices (or a share of one); `extra` are
    names a cluster adds (a policy's shared resource name, `extraGpuResources`)."""
    # Asked of every resource of every container the cluster creates: set lookups first.
    if name in _EXACT or name in extra:
        return True
    return "/" in name and (name.startswith(gpu.MIG_PREFIX) or _PATTERN.fullmatch(name) is not None)


def gives_nvidia_gpu(name: str) -> bool:
    """A resource whose device plugin hands the container an NVIDIA GPU with its own
    NVIDIA_VISIBLE_DEVICES: NVIDIA's own names, HAMi's, Volcano's vGPU and gpushare's."""
    return name in _NVIDIA_ENV or name.startswith(gpu.MIG_PREFIX)


def mig_profile(name: str) -> gpu.MigProfile | None:
    """The MIG profile a resource name asks for (a `.shared` replica included), or None."""
    return gpu.parse_mig_resource(name)


def is_mig(name: str) -> bool:
    """Any name in the MIG namespace, known profile or not (the quota refuses unknown ones)."""
    return name.startswith(gpu.MIG_PREFIX)


def other_nvidia_plugin(name: str) -> str | None:
    """The device plugin that hands out NVIDIA GPUs under its own names (Volcano's vGPU, gpushare),
    outside NVIDIA's device plugin and HAMi, which the sharing modes themselves drive."""
    found = vendors.family_of(name)
    if found is None or found[0] is vendors.NVIDIA or not found[0].nvidia_env:
        return None
    return found[0].plugin


def vendor(name: str) -> str | None:
    if name == gpu.SHARED_GPU or name.startswith(gpu.MIG_PREFIX):
        return "nvidia"
    return vendors.vendor_of(name)


def asks_kai(annotations: Mapping[str, Any]) -> bool:
    """KAI's fraction annotations; `gpu-fraction-num-devices` alone is a GPU ask too (one KAI refuses)."""
    return any(key in annotations for key in KAI_ANNOTATIONS)


def asks_kai_share(annotations: Mapping[str, Any]) -> bool:
    """A fraction or a memory size: the annotations that make KAI give a container a GPU share."""
    return gpu.KAI_FRACTION in annotations or gpu.KAI_MEMORY in annotations


def exact_names() -> tuple[str, ...]:
    """Every accelerator resource the catalog names exactly, sorted."""
    listed = {gpu.SHARED_GPU, *(name for family in vendors.FAMILIES for name in family.names())}
    return tuple(sorted(listed))


_EXACT = frozenset(exact_names())
_PATTERN = re.compile("|".join(f"(?:{p.regex.pattern})" for p in vendors.PATTERNS))
_NVIDIA_ENV = frozenset(
    {gpu.SHARED_GPU, *(name for family in vendors.FAMILIES for name in family.nvidia_env)}
)


def cel_name_test(variable: str) -> str:
    """The CEL that says `variable` is an accelerator resource name, for the webhook configurations'
    matchConditions (manifests/base/validatingwebhook.yaml holds it; a test keeps the two equal)."""
    # Every DeviceClass's implicit name routes too: whether it is a GPU depends on the class.
    exact = ", ".join(f"'{name}'" for name in exact_names())
    # `[.]`, not `\.`: a backslash would need escaping again inside a CEL string.
    patterns = "|".join(
        p.regex.pattern.removeprefix("^").removesuffix("$").replace("\\.", "[.]") for p in vendors.PATTERNS
    )
    return (
        f"{variable}.startsWith('{gpu.MIG_PREFIX}') || {variable}.startsWith('{IMPLICIT_PREFIX}') || "
        f"{variable} in [{exact}] || "
        f"{variable}.matches('^({patterns})$')"
    )
