"""What one published device counts as: a whole GPU or a MIG slice, and its memory. Pure.

NVIDIA's DRA driver (`gpu.nvidia.com`) tells its kinds of device apart by the `type` attribute:
`gpu` (a whole GPU), `mig` (a MIG device, its profile in `profile`) and `vfio` (a whole GPU
handed to a VM); it publishes `memory` in bytes for GPUs and MIG devices
(k8s-dra-driver-gpu cmd/gpu-kubelet-plugin/deviceinfo.go, mig.go). A MIG profile is looked up in
our MIG tables on the model it is on (its slice of that name has the published memory, and the
`productName` names the model where several do), so that it carries the model's instance count;
a profile no table knows is read from its name, with the nominal size. A MIG device whose
profile is neither counts as a whole GPU, the most it can be. Devices of other drivers are no
NVIDIA GPU: they weigh nothing here.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from fractions import Fraction

from webhook import gpu
from webhook.dra.published import Device
from webhook.gpu import MigProfile
from webhook.quantity import MiB

DRIVER = "gpu.nvidia.com"
MIG_TYPE = "mig"


@dataclass(frozen=True)
class DeviceWeight:
    """One device: a whole GPU (`mig_profile` None) or a MIG slice; its memory in MiB, rounded
    up, or None where the driver publishes none (`vfio` devices)."""

    mig_profile: MigProfile | None
    memory_mib: int | None


def device_weight(device: Device) -> DeviceWeight | None:
    """What `device` counts as, or None for a device that is no NVIDIA GPU (another driver's)."""
    if device.driver != DRIVER:
        return None
    memory = _memory_mib(device.capacity_of("memory"))
    profile = device.attribute("profile")
    if device.attribute("type") != MIG_TYPE or not isinstance(profile, str):
        return DeviceWeight(None, memory)
    product = device.attribute("productName")
    return DeviceWeight(mig_profile(profile, memory, product if isinstance(product, str) else ""), memory)


def mig_profile(name: str, memory_mib: int | None, product_name: str = "") -> MigProfile | None:
    """Profile `name` from the table of the model it is on, else as its name describes it (None if
    it describes none). The model is the one whose slice of that name holds `memory_mib`, and among
    several (A100-40GB's and A100-80GB's 1g.10gb are both 9,856 MiB, with 4 and 7 instances) the
    one `product_name` names best ("NVIDIA A100-SXM4-80GB"; the first in table order on a tie);
    without a memory match, the profile on a model the product names, or the only profile of that
    name the tables hold."""
    holders = [(model, p) for model in gpu.GPU_MODELS for p in gpu.MIG_PROFILES[model] if p.name == name]
    exact = [(model, p) for model, p in holders if p.memory_mib == memory_mib]
    pool = exact or holders
    best = max((_naming(product_name, model) for model, _ in pool), default=0)
    chosen = [p for model, p in pool if _naming(product_name, model) == best]
    if chosen and (exact or best or len(set(chosen)) == 1):
        return chosen[0]
    parsed = gpu.parse_mig_resource(gpu.MIG_PREFIX + name.replace("+", "."))
    return parsed if parsed is not None and not parsed.shared else None


def _naming(product_name: str, model: str) -> int:
    """How well a product name ("NVIDIA H100 80GB HBM3") names a model: 2 for its family and
    size as words, 1 for its family alone, else 0."""
    words = set(re.findall(r"[a-z0-9]+", product_name.lower()))
    family, _, size = model.lower().rpartition("-")
    if not set(re.findall(r"[a-z0-9]+", family)) <= words:
        return 0
    return 2 if size in words else 1


def _memory_mib(amount: Fraction | None) -> int | None:
    if amount is None or amount <= 0:
        return None
    return -(-amount.numerator // (amount.denominator * MiB))
