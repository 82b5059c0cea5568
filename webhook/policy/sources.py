"""Which policy files are in force: the packaged security bundle, then the user's own.

The bundle comes with the package, so every command enforces it from any directory. A user's
document of the same kind and name as a bundle document replaces it: a directory that carries
its own copy of the bundle (a checkout's policies/, the policies ConfigMap an install mounts)
loads exactly that copy, and a team tunes one bundle rule by shipping its edited copy. Leaving
the bundle out takes an explicit `--no-bundle`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from webhook.errors import ConfigError, PolicyError, PolicyProblem
from webhook.policy.loader import POLICY_SUFFIXES, EngineFactory, load_sources, policy_files, regopy_engine
from webhook.policy.model import PolicySet

# Without --policies, a `policies/` directory where the command runs is used (a checkout's).
DEFAULT_DIRECTORY = Path("policies")
BUNDLE_NAME = "the security bundle"
_PACKAGE = Path(__file__).resolve().parents[1]
_PACKAGED_BUNDLE = _PACKAGE / "security_policies"
_CHECKOUT_BUNDLE = _PACKAGE.parent / "policies" / "security"


@dataclass(frozen=True)
class PolicySources:
    """The bundle unless left out, then each path given (a directory, or one policy file)."""

    paths: tuple[Path, ...] = ()
    bundle: bool = True

    def describe(self) -> str:
        named = [BUNDLE_NAME] if self.bundle else []
        return " + ".join(named + [str(path) for path in self.paths]) or "no policies"


def resolve(given: Sequence[Path] | None, *, no_bundle: bool = False) -> PolicySources:
    """What a command enforces: the paths given, else ./policies if there is one; plus the bundle."""
    paths = tuple(given) if given else ((DEFAULT_DIRECTORY,) if DEFAULT_DIRECTORY.is_dir() else ())
    if no_bundle and not paths:
        raise ConfigError("--no-bundle leaves no policies: give --policies DIR as well")
    return PolicySources(paths, bundle=not no_bundle)


def bundle_directory() -> Path:
    """The default security bundle: packaged with the wheel (a symlink in a checkout), or the checkout's."""
    for candidate in (_PACKAGED_BUNDLE, _CHECKOUT_BUNDLE):
        if candidate.is_dir() and any(candidate.rglob("*.yaml")):
            return candidate
    raise ConfigError(
        f"the security bundle is missing from this installation; looked in {_PACKAGED_BUNDLE} "
        f"and {_CHECKOUT_BUNDLE}"
    )


def files_of(path: Path) -> list[Path]:
    """A directory's policy files, or the one file given; PolicyError naming the path otherwise."""
    if path.is_dir():
        return policy_files(path)
    if path.is_file() and path.suffix in POLICY_SUFFIXES:
        return [path]
    reason = "is not a .yaml or .yml policy file" if path.is_file() else "does not exist"
    raise PolicyError([PolicyProblem(str(path), 0, "", f"policy path {reason}")])


def watched_files(sources: PolicySources) -> list[Path]:
    """Every file the set is read from, for the hot reload's change check."""
    found = policy_files(bundle_directory()) if sources.bundle else []
    for path in sources.paths:
        found += files_of(path)
    return found


def load_policies(sources: PolicySources, engine: EngineFactory = regopy_engine) -> PolicySet:
    """Compile the set in force; PolicyError lists every problem of every file at once."""
    base = _read(policy_files(bundle_directory())) if sources.bundle else []
    own = [entry for path in sources.paths for entry in _read(files_of(path))]
    roots = tuple(str(path) for path in sources.paths if path.is_dir())
    base_root = str(bundle_directory()) if sources.bundle else ""
    return load_sources(own, engine, root=roots, base=base, base_root=base_root)


def _read(files: list[Path]) -> list[tuple[str, bytes]]:
    try:
        return [(str(path), path.read_bytes()) for path in files]
    except OSError as e:
        raise PolicyError([PolicyProblem(str(e.filename), 0, "", f"cannot read: {e.strerror}")]) from e
