"""What one device request can get: its class's and its own CEL selectors judged against devices. Pure.

Kubernetes' allocator gives a request a device that every selector of its DeviceClass and of
the request itself accepts (dynamic-resource-allocation structured/internal/stable
allocator_stable.go, `selectorsMatch`). Counting needs the largest such device, since the
allocator may hand out any of them: a whole GPU counts more than any MIG slice, a larger slice
more than a smaller one, then more memory more. So devices are grouped by what they count as,
largest group first, and the first group with a device that both selector sets accept decides.

The devices are the ones the cluster publishes in ResourceSlices. Where it publishes none that
the selectors accept (no driver yet, slices not listed, offline without them, a class for cards
not installed yet), NVIDIA's driver's catalog stands in: the devices it would publish for every
GPU model known here (webhook/dra/catalog.py), without the attributes only a machine knows, so
that a selector testing those fails on a catalog device and counts it. A request that no device
accepts is counted as the largest device its class alone could select, and a class configured
as a GPU class that selects nothing known counts as one whole GPU. A class that selects only
other drivers' devices (NICs, IMEX channels) is no GPU.

Where CEL cannot decide, counting errs on the side of more:
- a selector the engine cannot compile (a feature it lacks) accepts every device;
- a runtime error on a device accepts it (the allocator would fail the claim; counting it is safe);
- one judgement evaluates at most EVALUATIONS devices; the group it runs out on is taken as
  matching (groups come largest first), which bounds the work for a request on clusters with
  tens of thousands of devices, and for a claim no one has judged before.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction

from webhook.dra import catalog, weights
from webhook.dra.cel import Outcome, Selector, SelectorError, compile_selector
from webhook.dra.published import Device
from webhook.gpu import MigProfile

EVALUATIONS = 512


@dataclass(frozen=True)
class Reading:
    """What one device of a request counts as: a whole GPU (`profile` None) or a MIG slice,
    `memory_mib` per device (0: not known), whether the device may be shared between claims
    (`allowMultipleAllocations`) and whether this was judged against published devices."""

    profile: MigProfile | None
    memory_mib: int
    shareable: bool
    published: bool


@dataclass(frozen=True)
class _Group:
    """Devices that count the same, largest first when sorted by `rank`."""

    reading: Reading
    devices: tuple[Device, ...]

    @property
    def rank(self) -> tuple[bool, int, int]:
        profile = self.reading.profile
        return (profile is None, profile.slices if profile else 0, self.reading.memory_mib)


class _Pool:
    """Devices, grouped once: GPU devices by what they count as, then every other device."""

    def __init__(self, devices: Iterable[Device], published: bool) -> None:
        by_reading: dict[Reading, list[Device]] = {}
        others: list[Device] = []
        for device in devices:
            reading = _reading(device, published)
            if reading is None:
                others.append(device)
            else:
                by_reading.setdefault(reading, []).append(device)
        groups = [_Group(reading, tuple(found)) for reading, found in by_reading.items()]
        self.groups = tuple(sorted(groups, key=lambda g: g.rank, reverse=True))
        self.others = tuple(others)
        self.published = published

    def __bool__(self) -> bool:
        return bool(self.groups or self.others)


def _reading(device: Device, published: bool) -> Reading | None:
    weight = weights.device_weight(device)
    if weight is None:
        return None
    profile = weight.mig_profile
    # The catalog's whole GPUs are every model at once: their memory says nothing of the card.
    memory = (weight.memory_mib or 0) if published or profile is not None else 0
    return Reading(profile, memory, device.allow_multiple_allocations, published)


NOT_A_GPU = None


class DeviceJudge:
    """Judges requests against one set of device classes and published devices. Immutable once
    built, so a snapshot can share it; what it judged is remembered per (class, selectors)."""

    def __init__(
        self,
        classes: Mapping[str, Sequence[str]],
        published: Iterable[Device] = (),
        gpu_classes: Iterable[str] = (),
    ) -> None:
        self._classes = {name: tuple(selectors) for name, selectors in classes.items()}
        self._gpu_classes = frozenset(gpu_classes)
        self._published = _Pool(published, published=True)
        self._memo: dict[tuple[str, tuple[str, ...]], Reading | None] = {}

    @property
    def publishes(self) -> bool:
        """Whether any device is published: else every reading comes from the catalog."""
        return bool(self._published)

    def knows_class(self, name: str) -> bool:
        return name in self._classes or name in catalog.NVIDIA_DEVICE_CLASSES

    def judge(self, class_name: str, selectors: Sequence[str] = ()) -> Reading | None:
        """The largest device a request on `class_name` with `selectors` can get; None when it
        can get no GPU (the class selects other devices, or is not known and not a GPU class)."""
        key = (class_name, tuple(selectors))
        if key not in self._memo:
            self._memo[key] = self._judge(class_name, key[1])
        return self._memo[key]

    def _judge(self, class_name: str, selectors: tuple[str, ...]) -> Reading | None:
        class_selectors = self._class_selectors(class_name)
        configured = class_name in self._gpu_classes
        if class_selectors is None:
            return _whole_gpu() if configured else NOT_A_GPU
        both = (*class_selectors, *selectors)
        budget = _Budget()
        for pool in (self._published, _catalog_pool()):
            if not pool:
                continue
            found = _largest(pool, both, configured, budget)
            if not isinstance(found, _NoMatch):
                return found
        for pool in (self._published, _catalog_pool()):
            found = _largest(pool, class_selectors, configured, budget) if pool else _NO_MATCH
            if not isinstance(found, _NoMatch):
                return found
        return _whole_gpu() if configured else NOT_A_GPU

    def _class_selectors(self, name: str) -> tuple[str, ...] | None:
        if name in self._classes:
            return self._classes[name]
        if name in catalog.NVIDIA_DEVICE_CLASSES:
            return tuple(catalog.NVIDIA_DEVICE_CLASSES[name])
        return () if name in self._gpu_classes else None


class _NoMatch:
    pass


_NO_MATCH = _NoMatch()


class _Budget:
    """Device evaluations one judgement may spend; CEL costs tens to hundreds of microseconds each."""

    def __init__(self, evaluations: int = EVALUATIONS) -> None:
        self.left = evaluations

    def spend(self) -> bool:
        """Take one evaluation; False once none is left."""
        self.left -= 1
        return self.left >= 0


def _largest(
    pool: _Pool, selectors: Sequence[str], configured: bool, budget: _Budget
) -> Reading | _NoMatch | None:
    compiled = [_compiled(s) for s in selectors]
    for group in pool.groups:
        if _any_accepted(group.devices, compiled, budget):
            return group.reading
    for device in pool.others:
        if not budget.spend():
            return _NO_MATCH  # undecided: the class alone, or a whole GPU, counts instead
        if _accepts(compiled, device):
            # A class configured as a GPU class counts whatever it selects as whole GPUs.
            return Reading(None, 0, False, pool.published) if configured else NOT_A_GPU
    return _NO_MATCH


def _any_accepted(devices: Sequence[Device], compiled: Sequence[_Selector], budget: _Budget) -> bool:
    """Some device of the group is accepted; a group the budget runs out on counts as accepted:
    groups come largest first, so that is never less than the answer."""
    return any(not budget.spend() or _accepts(compiled, device) for device in devices)


# A compiled selector, or None for one the engine cannot compile (it then accepts every device).
_Selector = Selector | None


def _compiled(expression: str) -> _Selector:
    try:
        return compile_selector(expression)
    except SelectorError:
        return None


def _accepts(compiled: Sequence[_Selector], device: Device) -> bool:
    """Every selector accepts the device, or cannot say it refuses it (a runtime error, beyond the
    engine's limits): counting then takes the device, the larger answer."""
    return all(s is None or s.evaluate(device).outcome is not Outcome.NOT_MATCHED for s in compiled)


def _whole_gpu() -> Reading:
    return Reading(None, 0, False, False)


_CATALOG_POOL: list[_Pool] = []


def _catalog_pool() -> _Pool:
    if not _CATALOG_POOL:
        _CATALOG_POOL.append(_Pool(catalog.unknowns_absent(), published=False))
    return _CATALOG_POOL[0]


def share_of(reading: Reading, requested_mib: int) -> Fraction:
    """GPU-equivalents of one device when a request asks for `requested_mib` of its memory: a
    share only where the device may be allocated to several claims, else the whole device."""
    if not reading.shareable or not reading.memory_mib or requested_mib <= 0:
        return Fraction(1)
    return min(Fraction(1), Fraction(requested_mib, reading.memory_mib))
