"""Kubernetes' CEL environment for DRA device selectors, in-process (webhook/dra/cel/).

Rules come from kubernetes/dynamic-resource-allocation cel/compile.go (the `device` variable, the
empty map for a missing domain, `DeviceMatches`) and structured/internal/stable/allocator_stable.go
(`selectorsMatch`: a runtime error fails the allocation), kubernetes/apiserver
pkg/cel/library/quantity.go and semverlib.go, kubernetes/api resource/v1/types.go (the limits),
and NVIDIA/k8s-dra-driver-gpu: its device classes, demo specs, and the devices
cmd/gpu-kubelet-plugin/deviceinfo.go and mig.go publish.
"""

from __future__ import annotations

from fractions import Fraction

import pytest
from hypothesis import given
from hypothesis import strategies as st

from webhook import quantity
from webhook.dra.cel import (
    MAX_DEPTH,
    MAX_EXPRESSION_BYTES,
    Outcome,
    Selector,
    SelectorError,
    UnsupportedSelector,
    compile_selector,
    match_all,
)
from webhook.dra.published import Attribute, Device, Version

NVIDIA = "gpu.nvidia.com"
COMPUTE_DOMAIN = "compute-domain.nvidia.com"
STANDARD = "resource.kubernetes.io"  # deviceattribute: pciBusID, pcieRoot
MiB = 2**20
A100 = "NVIDIA A100-SXM4-40GB"
H100 = "NVIDIA H100 80GB HBM3"
MATCHED, NOT_MATCHED, FAILED, UNDECIDED = (
    Outcome.MATCHED,
    Outcome.NOT_MATCHED,
    Outcome.FAILED,
    Outcome.UNDECIDED,
)


def driver_attributes(product: str, compute: str) -> dict[str, Attribute]:
    """What whole GPUs and MIG devices share (deviceinfo.go `Attributes`, mig.go
    `CommonAttributesMig`). Versions are published after Masterminds/semver's normalisation:
    compute capability "8.0" becomes "8.0.0", the CUDA driver "12.4" becomes "12.4.0"."""
    return {
        "productName": product,
        "brand": "Nvidia",
        "architecture": "Hopper" if "H100" in product else "Ampere",
        "cudaComputeCapability": Version(compute),
        "driverVersion": Version("550.54.15"),
        "cudaDriverVersion": Version("12.4.0"),
    }


def whole_gpu(
    product: str = A100, memory_mib: int = 40_960, compute: str = "8.0.0", **extra: Attribute
) -> Device:
    """A whole GPU as deviceinfo.go `GpuInfo.GetDevice` publishes it: unqualified attributes land
    in the driver's domain, the PCI bus ID in resource.kubernetes.io, memory in bytes
    (partitions.go `fullGpuCapacity`)."""
    return Device(
        driver=NVIDIA,
        pool="node-1",
        name="gpu-0",
        attributes={
            NVIDIA: {"type": "gpu", "uuid": "GPU-4cf8db2d-0000-0000-0000-000000000000"}
            | driver_attributes(product, compute)
            | extra,
            STANDARD: {"pciBusID": "0000:07:00.0"},
        },
        capacity={NVIDIA: {"memory": Fraction(memory_mib * MiB)}},
    )


def mig_device(profile: str = "1g.5gb", memory_mib: int = 4_864) -> Device:
    """A MIG device as deviceinfo.go `MigDeviceInfo.GetDevice` publishes it (mig.go
    `CommonAttributesMig`, `CommonCapacitiesMig`, one `memorySlice<i>` per slice)."""
    return Device(
        driver=NVIDIA,
        pool="node-1",
        name=f"gpu-0-mig-{profile.replace('.', '')}-19-0",
        attributes={
            NVIDIA: {"type": "mig", "parentUUID": "GPU-4cf8db2d", "profile": profile, "uuid": "MIG-2f7e"}
            | driver_attributes(A100, "8.0.0"),
            STANDARD: {"pciBusID": "0000:07:00.0"},
        },
        capacity={
            NVIDIA: {
                "multiprocessors": Fraction(14),
                "copyEngines": Fraction(1),
                "decoders": Fraction(0),
                "encoders": Fraction(0),
                "jpegEngines": Fraction(0),
                "ofaEngines": Fraction(0),
                "memory": Fraction(memory_mib * MiB),
                "memorySlice0": Fraction(1),
            }
        },
    )


def vfio_gpu() -> Device:
    """deviceinfo.go `VfioDeviceInfo.GetDevice`: a GPU handed to a VM."""
    attributes: dict[str, Attribute] = {
        "type": "vfio",
        "uuid": "GPU-4cf8db2d",
        "deviceID": "0x20b0",
        "vendorID": "0x10de",
        "numa": 0,
        "productName": A100,
        "iommuFDEnabled": False,
    }
    return Device(
        driver=NVIDIA,
        pool="node-1",
        name="gpu-vfio-0",
        attributes={NVIDIA: attributes},
        capacity={NVIDIA: {"addressableMemory": Fraction(40_960 * MiB)}},
    )


def compute_domain(kind: str, number: int) -> Device:
    """cmd/compute-domain-kubelet-plugin/deviceinfo.go: channels and daemons, `type` and `id`."""
    return Device(
        driver=COMPUTE_DOMAIN,
        pool="node-1",
        name=f"{kind}-{number}",
        attributes={COMPUTE_DOMAIN: {"type": kind, "id": number}},
    )


def outcome(expression: str, device: Device) -> Outcome:
    return compile_selector(expression).evaluate(device).outcome


GPU_CLASS = "device.driver == 'gpu.nvidia.com' && device.attributes['gpu.nvidia.com'].type == 'gpu'"
MIG_CLASS = "device.driver == 'gpu.nvidia.com' && device.attributes['gpu.nvidia.com'].type == 'mig'"
VFIO_CLASS = "device.driver == 'gpu.nvidia.com' && device.attributes['gpu.nvidia.com'].type == 'vfio'"
DAEMON_CLASS = (
    "device.driver == 'compute-domain.nvidia.com' && "
    "device.attributes['compute-domain.nvidia.com'].type == 'daemon'"
)
CHANNEL_CLASS = (
    "device.driver == 'compute-domain.nvidia.com' && "
    "device.attributes['compute-domain.nvidia.com'].type == 'channel' && "
    "device.attributes['compute-domain.nvidia.com'].id == 0"
)
MIG_1G12_CLASS = (
    "device.driver == 'gpu.nvidia.com' && device.attributes['gpu.nvidia.com'].type == 'mig' && "
    "device.attributes['gpu.nvidia.com'].profile == '1g.12gb'"
)
PROFILE_1G5 = "device.attributes['gpu.nvidia.com'].profile == '1g.5gb'"
TEST6_A100 = """device.attributes['gpu.nvidia.com'].productName.lowerAscii().matches('^.*a100.*$')
&&
(device.attributes['gpu.nvidia.com'].index == 0 ||
device.attributes['gpu.nvidia.com'].index == 2 ||
device.attributes['gpu.nvidia.com'].index == 4 ||
device.attributes['gpu.nvidia.com'].index == 6)
"""
# demo/specs/selectors/parameters.yaml, GpuClaimParameters of the alpha API, written as CEL.
INFERENCE = (
    "device.capacity['gpu.nvidia.com'].memory.compareTo(quantity('16G')) <= 0 && "
    "device.attributes['gpu.nvidia.com'].cudaComputeCapability.compareTo(semver('7.5', true)) >= 0"
)
TRAINING = "device.capacity['gpu.nvidia.com'].memory.compareTo(quantity('16G')) >= 0"
T4 = whole_gpu("Tesla T4", memory_mib=15_360, compute="7.5.0")  # 15360 MiB is more than 16G (10^9 bytes)
T1000 = whole_gpu("NVIDIA T1000 8GB", memory_mib=8_192, compute="7.5.0")
P4 = whole_gpu("Tesla P4", memory_mib=7_680, compute="6.1.0")


@pytest.mark.parametrize(
    ("expression", "device", "expected"),
    [
        pytest.param(GPU_CLASS, whole_gpu(), MATCHED, id="deviceclass-gpu.yaml/whole-gpu"),
        pytest.param(GPU_CLASS, mig_device(), NOT_MATCHED, id="deviceclass-gpu.yaml/mig"),
        pytest.param(GPU_CLASS, vfio_gpu(), NOT_MATCHED, id="deviceclass-gpu.yaml/vfio"),
        # another driver's device: `device.driver` is false first, so the missing domain's
        # lookup error is absorbed by && (cel-go's commutative logic)
        pytest.param(GPU_CLASS, compute_domain("channel", 0), NOT_MATCHED, id="deviceclass-gpu.yaml/channel"),
        pytest.param(MIG_CLASS, mig_device(), MATCHED, id="deviceclass-mig.yaml/mig"),
        pytest.param(MIG_CLASS, whole_gpu(), NOT_MATCHED, id="deviceclass-mig.yaml/whole-gpu"),
        pytest.param(VFIO_CLASS, vfio_gpu(), MATCHED, id="deviceclass-vfio-gpu.yaml/vfio"),
        pytest.param(VFIO_CLASS, whole_gpu(), NOT_MATCHED, id="deviceclass-vfio-gpu.yaml/whole-gpu"),
        pytest.param(
            DAEMON_CLASS, compute_domain("daemon", 3), MATCHED, id="deviceclass-compute-domain-daemon/daemon"
        ),
        pytest.param(DAEMON_CLASS, whole_gpu(), NOT_MATCHED, id="deviceclass-compute-domain-daemon/gpu"),
        pytest.param(
            CHANNEL_CLASS,
            compute_domain("channel", 0),
            MATCHED,
            id="deviceclass-compute-domain-default-channel/0",
        ),
        pytest.param(
            CHANNEL_CLASS,
            compute_domain("channel", 1),
            NOT_MATCHED,
            id="deviceclass-compute-domain-default-channel/1",
        ),
        pytest.param(
            CHANNEL_CLASS,
            compute_domain("daemon", 0),
            NOT_MATCHED,
            id="deviceclass-compute-domain-default-channel/d",
        ),
        pytest.param(
            MIG_1G12_CLASS, mig_device("1g.12gb", 11_008), MATCHED, id="extended-resources/mig-1g-12gb"
        ),
        pytest.param(
            MIG_1G12_CLASS, mig_device("1g.5gb"), NOT_MATCHED, id="extended-resources/mig-1g-12gb/1g.5gb"
        ),
        pytest.param(MIG_1G12_CLASS, whole_gpu(), NOT_MATCHED, id="extended-resources/mig-1g-12gb/whole-gpu"),
        pytest.param(PROFILE_1G5, mig_device("1g.5gb"), MATCHED, id="quickstart/v1/gpu-test4.yaml/1g.5gb"),
        pytest.param(
            PROFILE_1G5, mig_device("2g.10gb", 9_856), NOT_MATCHED, id="quickstart/v1/gpu-test4.yaml/2g"
        ),
        # a whole GPU has no `profile`: alone, the request's selector is a runtime error
        pytest.param(PROFILE_1G5, whole_gpu(), FAILED, id="quickstart/v1/gpu-test4.yaml/whole-gpu"),
        # deviceinfo.go publishes no `index`: on an A100 the selector fails at runtime ...
        pytest.param(TEST6_A100, whole_gpu(), FAILED, id="quickstart/v1/gpu-test6.yaml/a100-without-index"),
        # ... on another GPU the false product name absorbs the missing index
        pytest.param(
            TEST6_A100, whole_gpu(H100, 81_559, "9.0.0"), NOT_MATCHED, id="quickstart/v1/gpu-test6.yaml/h100"
        ),
        pytest.param(TEST6_A100, whole_gpu(index=2), MATCHED, id="quickstart/v1/gpu-test6.yaml/a100-index-2"),
        pytest.param(
            TEST6_A100, whole_gpu(index=1), NOT_MATCHED, id="quickstart/v1/gpu-test6.yaml/a100-index-1"
        ),
        pytest.param(INFERENCE, T1000, MATCHED, id="selectors/parameters.yaml/inference/t1000"),
        pytest.param(INFERENCE, T4, NOT_MATCHED, id="selectors/parameters.yaml/inference/t4"),
        pytest.param(INFERENCE, P4, NOT_MATCHED, id="selectors/parameters.yaml/inference/p4-compute-6.1"),
        pytest.param(INFERENCE, whole_gpu(), NOT_MATCHED, id="selectors/parameters.yaml/inference/a100"),
        pytest.param(TRAINING, whole_gpu(), MATCHED, id="selectors/parameters.yaml/training/a100"),
        pytest.param(TRAINING, T4, MATCHED, id="selectors/parameters.yaml/training/t4"),
        pytest.param(TRAINING, T1000, NOT_MATCHED, id="selectors/parameters.yaml/training/t1000"),
    ],
)
def test_nvidia_selectors_on_the_devices_the_driver_publishes(
    expression: str, device: Device, expected: Outcome
) -> None:
    """NVIDIA/k8s-dra-driver-gpu deployments/helm/dra-driver-nvidia-gpu/templates/deviceclass-*.yaml
    and demo/specs/**, against devices built as cmd/gpu-kubelet-plugin/deviceinfo.go does."""
    assert outcome(expression, device) is expected


@pytest.mark.parametrize(
    ("selectors", "device", "expected"),
    [
        # demo/specs/quickstart/v1/gpu-test4.yaml: class mig.nvidia.com first, so a whole GPU is
        # never matched and the request's selector never runs on it
        pytest.param([MIG_CLASS, PROFILE_1G5], whole_gpu(), NOT_MATCHED, id="class-first-skips-request"),
        pytest.param([MIG_CLASS, PROFILE_1G5], mig_device(), MATCHED, id="both-match"),
        pytest.param([GPU_CLASS, PROFILE_1G5], whole_gpu(), FAILED, id="class-matches-request-fails"),
        pytest.param([GPU_CLASS, "true", "false"], whole_gpu(), NOT_MATCHED, id="last-refuses"),
        pytest.param([], whole_gpu(), MATCHED, id="no-selectors"),
    ],
)
def test_match_all_stops_at_the_first_selector_that_does_not_match(
    selectors: list[str], device: Device, expected: Outcome
) -> None:
    """allocator_stable.go `isSelectable`: the class's selectors, then the request's; `selectorsMatch`
    returns at the first false and at the first error."""
    assert match_all([compile_selector(text) for text in selectors], device).outcome is expected


GPU = whole_gpu()
MIG = mig_device()
NV = "device.attributes['gpu.nvidia.com']"
CAP = "device.capacity['gpu.nvidia.com']"
SEMANTICS = [
    # quantities: apiserver pkg/cel/library/quantity.go
    (f"{CAP}.memory.compareTo(quantity('40Gi')) >= 0", GPU, MATCHED),
    (f"{CAP}.memory.compareTo(quantity('40Gi')) > 0", GPU, NOT_MATCHED),
    (f"{CAP}.memory.isGreaterThan(quantity('39Gi'))", GPU, MATCHED),
    (f"{CAP}.memory.isGreaterThan(quantity('40Gi'))", GPU, NOT_MATCHED),
    (f"{CAP}.memory.isLessThan(quantity('80Gi'))", GPU, MATCHED),
    (f"{CAP}.memory == quantity('40Gi')", GPU, MATCHED),
    (f"{CAP}.memory == quantity('42949672960')", GPU, MATCHED),
    (f"{CAP}.memory.asInteger() == 42949672960", GPU, MATCHED),
    (
        f"{CAP}.memory.sub(quantity('8Gi')).isGreaterThan(quantity('30Gi'))",
        GPU,
        MATCHED,
    ),
    (f"{CAP}.memory.add(1).isInteger()", GPU, MATCHED),
    ("quantity('200M').compareTo(quantity('0.2G')) == 0", GPU, MATCHED),
    ("quantity('50M').compareTo(quantity('50Mi')) == -1", GPU, MATCHED),
    ("quantity('50k').add(20).sub(quantity('100k')).sub(-50000).asInteger() == 20", GPU, MATCHED),
    ("quantity('50.703k').asApproximateFloat() == 50703.0", GPU, MATCHED),
    ("quantity('9999999999999999999999999999G').isInteger()", GPU, NOT_MATCHED),
    ("quantity('9999999999999999999999999999G').asInteger() > 0", GPU, FAILED),
    ("sign(quantity('-1')) == -1 && sign(quantity('0')) == 0", GPU, MATCHED),
    ("isQuantity('1.3G') && !isQuantity('200K') && !isQuantity('1,3G')", GPU, MATCHED),
    ("quantity('200K').isInteger()", GPU, FAILED),
    ("quantity(' 1').isInteger()", GPU, FAILED),
    (f"{CAP}.multiprocessors.asInteger() == 14", MIG, MATCHED),
    # semantic versions: apiserver pkg/cel/library/semverlib.go
    (f"{NV}.driverVersion.isGreaterThan(semver('550.0.0'))", GPU, MATCHED),
    (f"{NV}.driverVersion.isLessThan(semver('550.0.0'))", GPU, NOT_MATCHED),
    (f"{NV}.driverVersion.compareTo(semver('550.54.15')) == 0", GPU, MATCHED),
    (f"{NV}.driverVersion == semver('550.54.15+build.1')", GPU, MATCHED),
    (f"{NV}.driverVersion.major() == 550", GPU, MATCHED),
    (f"{NV}.driverVersion.minor() == 54", GPU, MATCHED),
    (f"{NV}.driverVersion.patch() == 15", GPU, MATCHED),
    (
        f"{NV}.cudaComputeCapability.compareTo(semver('8.0', true)) == 0",
        GPU,
        MATCHED,
    ),
    ("semver('1.0.0-alpha').isLessThan(semver('1.0.0'))", GPU, MATCHED),
    ("semver('1.0.0-alpha.1').isLessThan(semver('1.0.0-alpha.beta'))", GPU, MATCHED),
    ("semver('1.0.0-alpha.beta').isLessThan(semver('1.0.0-beta'))", GPU, MATCHED),
    ("semver('1.0.0-2').isLessThan(semver('1.0.0-11'))", GPU, MATCHED),
    ("semver('1.0.0-rc.1').isLessThan(semver('1.0.0-rc.1.1'))", GPU, MATCHED),
    ("semver('01.01.01', true) == semver('1.1.1') && semver('v1.2', true) == semver('1.2.0')", GPU, MATCHED),
    (
        "isSemver('1.0.0') && !isSemver('v1.0') && isSemver('v1.0', true) && !isSemver('1.0-rc', true)",
        GPU,
        MATCHED,
    ),
    ("semver('1.0').major() == 1", GPU, FAILED),
    ("semver('01.0.0').major() == 1", GPU, FAILED),
    # lists, logic, presence
    (
        f"{NV}.profile in ['1g.10gb', '2g.20gb']",
        mig_device("1g.10gb", 9_856),
        MATCHED,
    ),
    (f"{NV}.profile in ['1g.10gb', '2g.20gb']", MIG, NOT_MATCHED),
    (
        f"{NV}.type == 'gpu' || {NV}.profile == 'x'",
        GPU,
        MATCHED,
    ),
    (
        f"{NV}.profile == 'x' || {NV}.type == 'gpu'",
        GPU,
        MATCHED,
    ),
    (
        f"{NV}.profile == 'x' || {NV}.type == 'mig'",
        GPU,
        FAILED,
    ),
    (
        f"{NV}.profile == 'x' && {NV}.type == 'mig'",
        GPU,
        NOT_MATCHED,
    ),
    (
        f"{NV}.profile == 'x' && {NV}.type == 'gpu'",
        GPU,
        FAILED,
    ),
    (f"has({NV}.productName)", GPU, MATCHED),
    (f"has({NV}.profile)", GPU, NOT_MATCHED),
    (
        f"has({NV}.profile) && {NV}.profile == 'x'",
        GPU,
        NOT_MATCHED,
    ),
    (f"has({CAP}.memory)", GPU, MATCHED),
    # compile.go's default map: every domain "exists" for has(), none for `in` or size()
    ("has(device.attributes.nothing)", GPU, MATCHED),
    ("'nothing' in device.attributes", GPU, NOT_MATCHED),
    ("'resource.kubernetes.io' in device.attributes", GPU, MATCHED),
    ("size(device.attributes['nothing']) == 0", GPU, MATCHED),
    ("device.attributes['resource.kubernetes.io'].pciBusID.startsWith('0000:')", GPU, MATCHED),
    # a missing name, in a present domain or a missing one: a runtime error
    (f"{NV}.index == 0", GPU, FAILED),
    ("device.attributes['nothing'].index == 0", GPU, FAILED),
    ("device.capacity['nothing'].memory.isGreaterThan(quantity('1'))", GPU, FAILED),
    # types met at runtime: heterogeneous equality is false, other operators fail
    (f"{NV}.brand == 1", GPU, NOT_MATCHED),
    (f"{NV}.brand != 1", GPU, MATCHED),
    # ... but a quantity or a semver on the left refuses another type (apiserver pkg/cel/semver.go `Equal`)
    (f"{NV}.driverVersion == '550.54.15'", GPU, FAILED),
    (f"{NV}.driverVersion != '550.54.15'", GPU, FAILED),
    (f"'550.54.15' == {NV}.driverVersion", GPU, NOT_MATCHED),
    (f"{NV}.driverVersion == null", GPU, NOT_MATCHED),
    (f"{CAP}.memory == {NV}.productName", GPU, FAILED),
    (f"{NV}.brand > 1", GPU, FAILED),
    (
        f"{NV}.numa == 0.0 && {NV}.numa < 0.5",
        vfio_gpu(),
        MATCHED,
    ),
    (f"{NV}.iommuFDEnabled", vfio_gpu(), NOT_MATCHED),
    (f"{NV}.productName", GPU, FAILED),
    (f"{NV}.brand.startsWith(1)", GPU, FAILED),
    (f"{NV}.driverVersion.isGreaterThan(quantity('1'))", GPU, FAILED),
    # strings: cel-go's standard library and strings extension (version 2)
    (f"{NV}.productName.startsWith('NVIDIA A100')", GPU, MATCHED),
    (f"{NV}.productName.endsWith('40GB')", GPU, MATCHED),
    (f"{NV}.productName.contains('SXM4')", GPU, MATCHED),
    (f"{NV}.productName.matches('A100-[A-Z0-9]+-40GB')", GPU, MATCHED),
    (f"matches({NV}.productName, '^H100')", GPU, NOT_MATCHED),
    (f"{NV}.productName.upperAscii() == 'NVIDIA A100-SXM4-40GB'", GPU, MATCHED),
    (f"{NV}.productName.split(' ')[1] == 'A100-SXM4-40GB'", GPU, MATCHED),
    (
        f"{NV}.productName.split('-', 2) == ['NVIDIA A100', 'SXM4-40GB']",
        GPU,
        MATCHED,
    ),
    (f"{NV}.productName.find('[0-9]+GB') == '40GB'", GPU, MATCHED),
    ("'a1b22'.findAll('[0-9]+') == ['1', '22'] && 'a1b22'.findAll('[0-9]+', 1) == ['1']", GPU, MATCHED),
    ("'abc'.charAt(1) == 'b' && 'abc'.charAt(3) == '' && 'abcabc'.indexOf('c', 3) == 5", GPU, MATCHED),
    (
        "'abcabc'.lastIndexOf('b') == 4 && 'abcabc'.lastIndexOf('b', 3) == 1 && 'abc'.indexOf('') == 0",
        GPU,
        MATCHED,
    ),
    (
        "'abc'.substring(1) == 'bc' && 'abc'.substring(1, 2) == 'b' && ' \\t x \\n'.trim() == 'x'",
        GPU,
        MATCHED,
    ),
    ("'aaa'.replace('a', 'b') == 'bbb' && 'aaa'.replace('a', 'b', 2) == 'bba'", GPU, MATCHED),
    ("['a', 'b'].join('-') == 'a-b' && ['a', 'b'].join() == 'ab'", GPU, MATCHED),
    ("'Größe'.lowerAscii() == 'größe' && size('Größe') == 5", GPU, MATCHED),
    ("'abc'.substring(2, 1) == ''", GPU, FAILED),
    ("'abc'.charAt(4) == ''", GPU, FAILED),
    # Kubernetes' list library, macros, cel.bind, DRA's includes
    (
        "[3, 1, 2].min() == 1 && [3, 1, 2].max() == 3 && [1, 2].sum() == 3 && [1, 2, 2].isSorted()",
        GPU,
        MATCHED,
    ),
    ("[1, 2, 3].indexOf(2) == 1 && [1, 2, 1].lastIndexOf(1) == 2 && [1].indexOf(5) == -1", GPU, MATCHED),
    ("[].min() == 0", GPU, FAILED),
    (f"{NV}.exists(name, name == 'profile')", MIG, MATCHED),
    ("device.attributes.all(domain, domain.endsWith('.com') || domain.endsWith('.io'))", GPU, MATCHED),
    (f"{CAP}.exists_one(name, name.startsWith('memorySlice'))", MIG, MATCHED),
    ("[1, 2, 3].map(x, x * 2) == [2, 4, 6] && [1, 2, 3].filter(x, x > 1).size() == 2", GPU, MATCHED),
    ("[0, 1].exists(x, 1 / x == 1)", GPU, MATCHED),
    ("[0, 1].all(x, 1 / x == 1)", GPU, FAILED),
    ("[1, 0].all(x, x > 0 && 1 / x == 1)", GPU, NOT_MATCHED),
    ("[1, 0].map(x, 1 / x) == [1]", GPU, FAILED),
    (
        f"cel.bind(nv, {NV}, nv.type == 'mig' && nv.profile.startsWith('1g.'))",
        MIG,
        MATCHED,
    ),
    ("cel.bind(x, 1 / 0, true)", GPU, MATCHED),
    ("cel.bind(x, 1 / 0, x == 1)", GPU, FAILED),
    (f"{NV}.profile.includes('1g.5gb')", MIG, MATCHED),
    ("device.allowMultipleAllocations == false && device.driver == 'gpu.nvidia.com'", GPU, MATCHED),
    # arithmetic: 64-bit integers, no negative unsigned values, division by zero
    ("9223372036854775807 + 1 > 0", GPU, FAILED),
    ("-9223372036854775808 < 0", GPU, MATCHED),
    ("1u - 2u == 0u", GPU, FAILED),
    ("7 / 2 == 3 && -7 / 2 == -3 && 7 % 3 == 1", GPU, MATCHED),
    ("[1, 2][2] == 1", GPU, FAILED),
    ("dyn(1) == 1.0 && dyn(1u) == 1 && dyn(1) < 1.5 && 2 > 1.5", GPU, MATCHED),
    (f"true ? {NV}.type == 'gpu' : 1 / 0 == 1", GPU, MATCHED),
    (f"{NV}.brand ? true : false", GPU, FAILED),
    ("{'a': 1}['a'] == 1 && {'a': 1}.a == 1", GPU, MATCHED),
    # types as values, conversions
    (f"type({NV}.brand) == string && type({NV}.driverVersion) != string", GPU, MATCHED),
    (f"type({NV}.numa) == int && type({NV}.iommuFDEnabled) == bool", vfio_gpu(), MATCHED),
    ("int('12') == 12 && string(12) == '12' && double('1.5') == 1.5 && uint(3) == 3u", GPU, MATCHED),
    ("bool('true') && string(true) == 'true' && int(1.9) == 1", GPU, MATCHED),
    ("int('x') == 1", GPU, FAILED),
    ("{'a': 1}.b == 1", GPU, FAILED),
]


@pytest.mark.parametrize(
    ("expression", "device", "expected"), SEMANTICS, ids=[case[0][:80] for case in SEMANTICS]
)
def test_selector_semantics(expression: str, device: Device, expected: Outcome) -> None:
    """dynamic-resource-allocation cel/compile.go's environment: the quantity and semver libraries
    (apiserver pkg/cel/library/quantity.go, semverlib.go), cel-go's standard and strings libraries,
    heterogeneous equality, and the default empty map for a missing domain."""
    assert outcome(expression, device) is expected


def test_a_runtime_error_says_why() -> None:
    """compile.go `DeviceMatches` returns the error; the allocator fails with it."""
    match = compile_selector(PROFILE_1G5).evaluate(GPU)
    assert (match.outcome, match.reason) == (FAILED, "no such key: profile")
    result = compile_selector("device.attributes['gpu.nvidia.com'].productName").evaluate(GPU)
    assert result.reason == "CEL result of type string could not be converted to bool"


def test_an_unparsable_version_attribute_fails_every_selector_on_the_device() -> None:
    """compile.go `getAttributeValue`: versions are parsed before the expression runs."""
    broken = whole_gpu(driverVersion=Version("550.54"))
    match = compile_selector("true").evaluate(broken)
    assert match.outcome is FAILED
    assert match.reason.startswith("attribute gpu.nvidia.com/driverVersion: parse semantic version")
    assert outcome("true", GPU) is MATCHED


def test_matches_is_true_only_for_a_match() -> None:
    selector = compile_selector(PROFILE_1G5)
    assert (selector.matches(MIG), selector.matches(mig_device("2g.10gb")), selector.matches(GPU)) == (
        True,
        False,
        False,
    )


@pytest.mark.parametrize(
    ("expression", "error", "message"),
    [
        pytest.param(
            "device.driver = 'a'",
            SelectorError,
            "syntax error at line 1, column 15 near \"= 'a'\"",
            id="syntax",
        ),
        pytest.param(
            "device.driver == 'a' &&\n  (x ! y)",
            SelectorError,
            "line 2, column 6 near '! y)'",
            id="syntax-line-2",
        ),
        pytest.param(
            "device.driver == 'a' &&", SelectorError, "the expression ends too early", id="syntax-end"
        ),
        pytest.param(
            "foo(device.driver)", SelectorError, "undeclared reference to 'foo'", id="unknown-function"
        ),
        pytest.param(
            "device.driver.foo()", SelectorError, "undeclared reference to 'foo'", id="unknown-method"
        ),
        pytest.param(
            "gpu.type == 'gpu'", SelectorError, "undeclared reference to 'gpu'", id="unknown-variable"
        ),
        pytest.param(
            "device.name == 'gpu-0'", SelectorError, "undefined field 'name' of device", id="unknown-field"
        ),
        pytest.param("device.driver", SelectorError, "must evaluate to bool, not string", id="result-string"),
        pytest.param(
            "size(device.attributes)", SelectorError, "must evaluate to bool, not int", id="result-int"
        ),
        pytest.param(
            "device.capacity['gpu.nvidia.com'].memory",
            SelectorError,
            "must evaluate to bool, not kubernetes.Quantity",
            id="result-quantity",
        ),
        pytest.param(
            "device.attributes['gpu.nvidia.com']", SelectorError, "not map(string, dyn)", id="result-map"
        ),
        pytest.param(
            "quantity('1') > quantity('0')", SelectorError, "cannot be kubernetes.Quantity", id="quantity-<"
        ),
        pytest.param(
            "device.driver == 1", SelectorError, "must have one type, not int and string", id="string-==-int"
        ),
        pytest.param("['a', 1].size() == 2", SelectorError, "list literal elements", id="mixed-list"),
        pytest.param("{'a': 1, 'b': 'c'}.size() == 2", SelectorError, "map literal values", id="mixed-map"),
        pytest.param("'a'.matches('[')", SelectorError, "invalid regular expression '['", id="bad-regex"),
        pytest.param("has(device)", SelectorError, "invalid argument to has()", id="has-without-field"),
        pytest.param("[1].all(1, true)", SelectorError, "must be a simple name", id="macro-variable"),
        pytest.param(
            "'abc'[0] == 'a'", SelectorError, "no matching overload for [] applied to string", id="index"
        ),
        pytest.param("size(1) == 1", SelectorError, "the receiver of size() cannot be int", id="size-of-int"),
        pytest.param("'a'.startsWith()", SelectorError, "with 0 arguments", id="arity"),
        pytest.param(
            "compareTo(quantity('1'), quantity('2')) == 0", SelectorError, "function compareTo()", id="style"
        ),
        pytest.param("99999999999999999999 > 0", SelectorError, "out of range", id="int-literal"),
        pytest.param(42, SelectorError, "must be a string, not int", id="not-a-string"),
        pytest.param(
            "device.attributes['gpu.nvidia.com'].?profile == '1g.5gb'",
            UnsupportedSelector,
            "optional field syntax is not supported",
            id="optional-field",
        ),
        pytest.param(
            "[?device.driver].size() == 1", UnsupportedSelector, "optional field syntax", id="optional-list"
        ),
        pytest.param(
            "optional.of(1).hasValue()", UnsupportedSelector, "optional.of() is not supported", id="optional"
        ),
        pytest.param(
            "sets.contains([1], [1])", UnsupportedSelector, "sets.contains() is not supported", id="sets"
        ),
        pytest.param("isURL('https://a')", UnsupportedSelector, "isURL() is not supported", id="url"),
        pytest.param(
            "[1].all(i, v, v > 0)", UnsupportedSelector, "all() with three arguments", id="two-variable"
        ),
        pytest.param("[1].map(x, x > 0, x) == [1]", UnsupportedSelector, "map() with three", id="map-filter"),
        pytest.param(".device.driver == 'a'", UnsupportedSelector, "leading-dot names", id="leading-dot"),
    ],
)
def test_compile_errors(expression: str, error: type[SelectorError], message: str) -> None:
    """What cel/compile.go's `CompileCELExpression` refuses (cel-go's parser and type checker,
    Kubernetes' base environment), and what this engine cannot evaluate."""
    with pytest.raises(error) as raised:
        compile_selector(expression)
    assert message in str(raised.value)
    assert raised.type is error


def test_a_compile_error_is_one_line_quoting_a_bounded_prefix() -> None:
    expression = "device.driver == 'gpu.nvidia.com' &&\n" * 40 + "device.nothing"
    with pytest.raises(SelectorError) as raised:
        compile_selector(expression)
    message = str(raised.value)
    assert "\n" not in message
    assert message.startswith("CEL selector \"device.driver == 'gpu.nvidia.com' && device.driver ==")
    assert len(message) < 160
    assert message.endswith("undefined field 'nothing' of device")


def test_the_length_limit_is_kubernetes_own() -> None:
    """k8s.io/api resource/v1/types.go: CELSelectorExpressionMaxLength = 10 * 1024, in bytes."""
    assert MAX_EXPRESSION_BYTES == 10 * 1024
    at_limit = "true" + " " * (MAX_EXPRESSION_BYTES - 4)
    assert outcome(at_limit, GPU) is MATCHED
    with pytest.raises(SelectorError, match="too long: 10241 bytes, the limit is 10240"):
        compile_selector(at_limit + " ")
    with pytest.raises(SelectorError, match="too long"):
        compile_selector("'" + "é" * (MAX_EXPRESSION_BYTES // 2) + "' == ''")


def test_deep_nesting_is_refused_before_it_reaches_the_stack() -> None:
    shallow = "(" * MAX_DEPTH + "true" + ")" * MAX_DEPTH  # parentheses add no level
    assert outcome(shallow, GPU) is MATCHED
    nested = "!" * (MAX_DEPTH - 1) + "true"
    assert outcome(nested, GPU) is NOT_MATCHED
    with pytest.raises(UnsupportedSelector, match=f"nested more than {MAX_DEPTH} levels deep"):
        compile_selector("!" * (MAX_DEPTH + 1) + "true")
    with pytest.raises(UnsupportedSelector, match="nested more than"):
        compile_selector("[" * 2000 + "]" * 2000 + " == []")


def test_long_chains_of_or_stay_shallow() -> None:
    """A selector listing a hundred UUIDs with || evaluates: the chain is one n-ary node."""
    uuids = [f"GPU-{n:08x}" for n in range(120)]
    either = " || ".join(f"device.attributes['gpu.nvidia.com'].uuid == '{uuid}'" for uuid in uuids)
    assert outcome(either, whole_gpu(uuid="GPU-00000077")) is MATCHED
    assert outcome(either, GPU) is NOT_MATCHED


def test_runaway_evaluations_are_undecided() -> None:
    """Kubernetes stops at CELSelectorExpressionMaxCost; this engine at its step and size limits,
    and then does not guess."""
    hundred = "[" + ", ".join(str(n) for n in range(100)) + "]"
    cubic = f"{hundred}.all(a, {hundred}.all(b, {hundred}.all(c, true)))"
    match = compile_selector(cubic).evaluate(GPU)
    assert match.outcome is UNDECIDED
    assert "evaluation steps" in match.reason
    doubling = "cel.bind(s0, 'xxxxxxxx', " + "".join(f"cel.bind(s{n + 1}, s{n} + s{n}, " for n in range(30))
    doubling += "size(s30) > 0" + ")" * 31
    grown = compile_selector(doubling).evaluate(GPU)
    assert (grown.outcome, grown.reason) == (UNDECIDED, "a value longer than 100000")
    assert outcome("'ab'.replace('', 'xxxxxxxxxxxxxxxxxxxx').size() > 0", GPU) is MATCHED


def test_compiled_selectors_are_memoised_and_shared() -> None:
    first = compile_selector(GPU_CLASS)
    assert compile_selector(GPU_CLASS) is first
    assert isinstance(first, Selector)
    assert first.expression == GPU_CLASS
    for _ in range(2):  # a refused expression is refused again, with the same message
        with pytest.raises(SelectorError, match="undeclared reference to 'foo'"):
            compile_selector("foo()")


# Quantities within ranges that Kubernetes keeps exactly: no digits below a nano, and binary
# values below the int64 cap (apimachinery ParseQuantity rounds the one and caps the other).
SUFFIXES = ["", "m", "k", "M", "G", "T", "P", "Ki", "Mi", "Gi", "Ti", "e3", "e-3", "E6"]
QUANTITIES = st.builds(
    lambda sign, whole, fraction, suffix: f"{sign}{whole}{fraction}{suffix}",
    st.sampled_from(["", "-", "+"]),
    st.integers(0, 999_999),
    st.sampled_from(["", "."]).flatmap(
        lambda dot: st.just(dot) if not dot else st.from_regex(r"\.[0-9]{1,3}", fullmatch=True)
    ),
    st.sampled_from(SUFFIXES),
)


@given(QUANTITIES, QUANTITIES)
def test_quantity_comparison_agrees_with_webhook_quantity(a: str, b: str) -> None:
    """apiserver pkg/cel/library/quantity.go `compareTo`, `isGreaterThan`, `isLessThan` (resource.Quantity
    Cmp) order quantities as webhook.quantity.parse does."""
    expected = (quantity.parse(a) > quantity.parse(b)) - (quantity.parse(a) < quantity.parse(b))
    order = f"quantity('{a}').compareTo(quantity('{b}')) == {expected}"
    consistent = (
        f"quantity('{a}').isGreaterThan(quantity('{b}')) == ({expected} == 1) && "
        f"quantity('{a}').isLessThan(quantity('{b}')) == ({expected} == -1)"
    )
    assert outcome(order, GPU) is MATCHED
    assert outcome(consistent, GPU) is MATCHED


@pytest.mark.parametrize(
    "expression",
    [
        pytest.param("quantity('1e-10') == quantity('1n')", id="rounded-up-to-a-nano"),
        pytest.param("quantity('-1e-10') == quantity('-1n')", id="negative-rounded-away-from-zero"),
        pytest.param("quantity('16Ei') == quantity('9223372036854775807')", id="binary-capped-at-int64"),
        pytest.param(
            "quantity('10E').isGreaterThan(quantity('9223372036854775807'))", id="decimal-not-capped"
        ),
    ],
)
def test_quantities_are_parsed_as_kubernetes_parses_them(expression: str) -> None:
    """apimachinery pkg/api/resource/quantity.go `ParseQuantity`: a non-zero magnitude rounds up
    to a whole nano; a binary-suffixed one is capped at the int64 maximum."""
    assert outcome(expression, GPU) is MATCHED


def test_cel_python_and_regopy_share_one_process() -> None:
    """A native CEL library (cel-cpp) crashed beside regopy; cel-python, which selectors use
    in-process, must keep working with regopy loaded and used."""
    import celpy
    from regopy import Input, Interpreter

    rego = Interpreter()
    rego.add_module("gpus", "package gpus\nallow if input.gpus <= 2\n")
    rego.set_input(Input({"gpus": 1}))
    assert '"x":true' in str(rego.query("x := data.gpus.allow")).replace(" ", "")
    assert celpy.__name__ == "celpy"
    assert outcome(GPU_CLASS, GPU) is MATCHED
    assert outcome(MIG_CLASS, GPU) is NOT_MATCHED
