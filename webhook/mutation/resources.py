"""Reading and writing a container's GPU resources, keeping request == limit. Pure."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from webhook import gpu, quantity
from webhook.accounting import by_resources, names
from webhook.dra.index import IMPLICIT_PREFIX
from webhook.errors import AdmissionDenied
from webhook.fields import mapping

SECTIONS = ("limits", "requests")


@dataclass(frozen=True)
class WholeGpus:
    """A container's whole-GPU ask: how many, and in which sections it was written."""

    count: int
    sections: tuple[str, ...]


def sections(container: dict[str, Any]) -> dict[str, dict[str, Any]]:
    resources = container.get("resources")
    if not isinstance(resources, dict):
        return {}
    return {s: resources[s] for s in SECTIONS if isinstance(resources.get(s), dict)}


def whole_gpus(container: dict[str, Any]) -> WholeGpus | None:
    """The nvidia.com/gpu count, or None when the container asks for none. AdmissionDenied's
    message does not name the container: the caller does, only when there is an error."""
    # Asked of every container of every GPU review: no intermediate dicts.
    resources = container.get("resources")
    if not isinstance(resources, dict):
        return None
    counts: dict[str, int] = {}
    for section in SECTIONS:
        values = resources.get(section)
        if isinstance(values, dict) and gpu.GPU in values:
            counts[section] = _count(values[gpu.GPU])
    if not counts:
        return None
    if len(counts) > 1 and counts["limits"] != counts["requests"]:
        raise AdmissionDenied(
            f"{gpu.GPU} request ({counts['requests']}) must equal its limit ({counts['limits']})"
        )
    count = next(iter(counts.values()))
    return WholeGpus(count, tuple(counts)) if count else None


def _count(value: object) -> int:
    try:
        return quantity.parse_count(value, gpu.GPU)
    except quantity.QuantityError as e:
        raise AdmissionDenied(str(e)) from e


def put(container: dict[str, Any], name: str, value: str, where: tuple[str, ...]) -> bool:
    """Set `name` in the given sections, plus limits always (an extended resource needs one)."""
    changed = False
    resources = mapping(container, "resources")
    for section in dict.fromkeys(("limits", *where)):
        values = mapping(resources, section)
        if values.get(name) != value:
            values[name] = value
            changed = True
    return changed


def put_if_absent(container: dict[str, Any], name: str, value: str, where: tuple[str, ...]) -> bool:
    present = any(name in values for values in sections(container).values())
    return False if present else put(container, name, value, where)


def drop(container: dict[str, Any], name: str) -> bool:
    changed = False
    for values in sections(container).values():
        if name in values:
            del values[name]
            changed = True
    return changed


def uses_gpu(container: dict[str, Any], shared_names: tuple[str, ...] = ()) -> bool:
    """Any accelerator resource, from any vendor's device plugin."""
    return _any_name(container, names.is_accelerator, shared_names)


def uses_nvidia_gpu(container: dict[str, Any], shared_names: tuple[str, ...] = ()) -> bool:
    """A resource whose device plugin gives the container an NVIDIA GPU (and its environment)."""
    return _any_name(container, _nvidia, shared_names)


def reaches_devices(container: dict[str, Any], shared_names: tuple[str, ...] = ()) -> bool:
    """uses_nvidia_gpu or asks_device_class, in one look at the container's resources (void asks
    it of every container of every GPU pod)."""
    return _any_name(container, _reaches, shared_names)


def asks_device_class(container: dict[str, Any]) -> bool:
    """A DeviceClass's implicit extended resource, `deviceclass.resource.kubernetes.io/<class>`:
    kube-scheduler claims its devices through DRA."""
    return _any_name(container, _implicit, ())


def _implicit(name: str, _shared: tuple[str, ...]) -> bool:
    return name.startswith(IMPLICIT_PREFIX)


def _reaches(name: str, shared_names: tuple[str, ...]) -> bool:
    return names.gives_nvidia_gpu(name) or name in shared_names or name.startswith(IMPLICIT_PREFIX)


def _nvidia(name: str, shared_names: tuple[str, ...]) -> bool:
    return names.gives_nvidia_gpu(name) or name in shared_names


NameTest = Callable[[str, tuple[str, ...]], bool]


def _any_name(container: dict[str, Any], test: NameTest, shared_names: tuple[str, ...]) -> bool:
    # Asked of every container of every review (is_gpu_pod, void, the checkpoint, the checks).
    return _remembered_any_name(container, (test, shared_names))


def _read_any_name(container: dict[str, Any], question: tuple[NameTest, tuple[str, ...]]) -> bool:
    test, shared_names = question
    resources = container.get("resources")
    if not isinstance(resources, dict):
        return False
    for section in SECTIONS:
        values = resources.get(section)
        if isinstance(values, dict):
            for name in values:
                if test(name, shared_names):
                    return True
    return False


_remembered_any_name = by_resources.Remembered(_read_any_name, by_resources.always)


def asked_names(container: dict[str, Any]) -> tuple[str, ...]:
    """Every resource name in the container's limits and requests, sorted."""
    return _remembered_names(container, ())


def _read_names(container: dict[str, Any], _: tuple[()]) -> tuple[str, ...]:
    return tuple(sorted({name for section in sections(container).values() for name in section}))


_remembered_names = by_resources.Remembered(_read_names, by_resources.always)
