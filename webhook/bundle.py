"""The policy files an install ships: the default security bundle, plus a team's own directories.

The package carries the bundle (`webhook/security_policies`, a symlink to policies/security in
a checkout, real files in a wheel), so `gpu-webhook manifests` ships it from any directory.
Only what the server loads is shipped: `*.yaml`/`*.yml` files, never test suites
(`*.test.yaml`, or files that hold only PolicyTest or Gatekeeper Suite documents), never the
demo policies of policies/examples. The whole set is compiled before it is rendered, so an
install cannot carry a policy set its server would refuse.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from webhook.errors import ConfigError, PolicyError
from webhook.policy.loader import NOT_POLICIES, POLICY_SUFFIXES, load_sources
from webhook.policy.model import PolicySet
from webhook.policy.source import YamlError, parse_documents
from webhook.policy.sources import bundle_directory

BUNDLE_PREFIX = "security"
KEY_SEPARATOR = "__"
CONFIGMAP_MAX_BYTES = 1024 * 1024
TEST_SUFFIXES = (".test.yaml", ".test.yml")
CONFIGMAP_FILE = Path("manifests/base/policies-configmap.yaml")
REGENERATE = "make policies-configmap"
_CONFIGMAP_KEY = re.compile(r"^[-._a-zA-Z0-9]{1,253}$")
_CHECKOUT_EXAMPLES = Path(__file__).resolve().parents[1] / "policies" / "examples"


@dataclass
class Shipment:
    """ConfigMap data (flattened key -> text), where each key came from, and what was left out."""

    data: dict[str, str] = field(default_factory=dict)
    origins: dict[str, Path] = field(default_factory=dict)
    skipped: list[str] = field(default_factory=list)

    def add(self, key: str, path: Path) -> None:
        if key in self.data:
            raise ConfigError(
                f"{path} and {self.origins[key]} both become the ConfigMap key {key!r}; rename one"
            )
        self.data[key] = _read_text(path)
        self.origins[key] = path


def ship(directories: Sequence[Path], *, bundle: bool = True) -> Shipment:
    """The bundle (keys under `security__`) and every policy file of `directories`, flattened."""
    shipment = Shipment()
    if bundle:
        _add_directory(shipment, bundle_directory(), (BUNDLE_PREFIX,), quiet=True)
    for directory in directories:
        _refuse_demo(directory)
        _add_directory(shipment, directory, ())
    _check_size(shipment)
    return shipment


def compile_shipment(shipment: Shipment) -> PolicySet:
    """Compile what would be shipped, naming the original files; ConfigError with every problem."""
    sources = [(str(shipment.origins[key]), text.encode()) for key, text in shipment.data.items()]
    try:
        return load_sources(sources)
    except PolicyError as e:
        listed = "\n".join(f"  {problem}" for problem in e.problems)
        raise ConfigError(f"the policy set does not compile ({len(e.problems)} problem(s)):\n{listed}") from e


def is_empty(policies: PolicySet) -> bool:
    return not (policies.sharing or policies.quotas or policies.constraints)


def configmap_key(parts: tuple[str, ...]) -> str:
    """ConfigMap keys cannot hold `/`: a/b/c.yaml becomes a__b__c.yaml."""
    key = KEY_SEPARATOR.join(parts)
    if not _CONFIGMAP_KEY.fullmatch(key):
        raise ConfigError(f"{'/'.join(parts)}: a ConfigMap key may hold only letters, digits, '-', '_', '.'")
    return key


def _add_directory(
    shipment: Shipment, directory: Path, prefix: tuple[str, ...], *, quiet: bool = False
) -> None:
    """`quiet`: the bundle's own README needs no note."""
    if not directory.is_dir():
        raise ConfigError(f"policy directory {directory} does not exist")
    for path, relative in _files(directory):
        if not path.name.endswith(POLICY_SUFFIXES):
            if not quiet:
                shipment.skipped.append(f"{path}: not a policy file (only .yaml and .yml files are read)")
        elif path.name.endswith(TEST_SUFFIXES) or _holds_only_tests(path):
            shipment.skipped.append(f"{path}: a test suite, run by `gpu-webhook test`, not shipped")
        else:
            shipment.add(configmap_key((*prefix, *relative)), path)


def _files(directory: Path) -> Iterator[tuple[Path, tuple[str, ...]]]:
    """Regular files below `directory`, hidden entries (ConfigMap `..data` links) left out."""
    for path in sorted(directory.rglob("*")):
        relative = path.relative_to(directory).parts
        if path.is_file() and not any(part.startswith(".") for part in relative):
            yield path, relative


def _holds_only_tests(path: Path) -> bool:
    """True for a file of PolicyTest or Suite documents; a file that mixes them with policies is refused."""
    try:
        documents = parse_documents(_read_text(path), str(path))
    except YamlError:
        return False  # compile_shipment reports it, located
    tests = [(d.api_version, d.kind) in NOT_POLICIES for d in documents]
    if any(tests) and not all(tests):
        raise ConfigError(
            f"{path} holds policies and test suites together; move the tests into a *.test.yaml file, "
            "which `gpu-webhook test` runs and installs leave out"
        )
    return bool(tests) and all(tests)


def _refuse_demo(directory: Path) -> None:
    """The checkout's policies/ and policies/examples/ are a demo for `make run`, not an install."""
    resolved = directory.resolve()
    examples = _CHECKOUT_EXAMPLES.resolve()
    if resolved == examples or resolved.is_relative_to(examples) or examples.is_relative_to(resolved):
        raise ConfigError(
            f"{directory} holds the demo policies of policies/examples, which are not for a cluster; "
            "give a directory of your own policies (the security bundle is included without one)"
        )


def _check_size(shipment: Shipment) -> None:
    size = sum(len(k) + len(v.encode()) for k, v in shipment.data.items())
    if size > CONFIGMAP_MAX_BYTES:
        raise ConfigError(f"the policies take {size} bytes; a ConfigMap holds at most 1 MiB")


def _read_text(path: Path) -> str:
    try:
        return path.read_bytes().decode("utf-8")
    except UnicodeDecodeError as e:
        raise ConfigError(f"{path}: policy files must be UTF-8 text") from e
    except OSError as e:
        raise ConfigError(f"cannot read {path}: {e.strerror}") from e


# The base's policies ConfigMap is generated from the bundle, because kustomize may not read
# files outside the kustomization's directory. `make policies-configmap` runs this.

_CONFIGMAP_HEADER = f"""\
# GENERATED by `{REGENERATE}` from policies/security: do not edit; edit the bundle and run it.
# The policy set, mounted whole at /etc/gpu-webhook/policies and hot-reloaded when it changes:
# the default security bundle, nested files flattened (security/a/b.yaml -> security__a__b.yaml).
# `gpu-webhook manifests --policies DIR` adds a team's own policies; an overlay adds them with a
# configMapGenerator (`behavior: merge`), see docs/operations.md.
"""


def configmap_yaml() -> str:
    """manifests/base/policies-configmap.yaml as it must read for the bundle in this package."""
    configmap = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": "gpu-webhook-policies",
            "namespace": "gpu-system",
            "labels": {"app.kubernetes.io/name": "gpu-webhook"},
        },
        "data": ship([]).data,
    }
    return _CONFIGMAP_HEADER + yaml.dump(
        configmap, Dumper=_BlockDumper, sort_keys=False, width=100, allow_unicode=True
    )


class _BlockDumper(yaml.SafeDumper):
    """Multi-line strings as `|` blocks, so the generated file reads like the policies it holds."""


def _block_strings(dumper: yaml.SafeDumper, text: str) -> yaml.ScalarNode:
    style = "|" if "\n" in text else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", text, style=style)


_BlockDumper.add_representer(str, _block_strings)


def main(argv: Sequence[str] | None = None) -> int:
    """python -m webhook.bundle FILE: write the base's policies ConfigMap."""
    (target,) = argv if argv is not None else sys.argv[1:]
    Path(target).write_text(configmap_yaml(), encoding="utf-8")
    print(f"wrote {target} from {bundle_directory()}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
