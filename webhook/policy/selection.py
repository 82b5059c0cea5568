"""`gpu-webhook test --run REGEX`: which tests and cases to run, as `gator verify --run` selects them.

A test is a named group of cases: a Gatekeeper Suite's test, or a PolicyTest document. The
pattern is searched for (not anchored) in names:

- `A` selects a case when A matches its name or its test's name;
- `A//B` selects a case when A matches its test's name and B its own (either side may be empty);
- more than one `//` is an error.

Cases left out are reported as skipped and never run; a test none of whose cases is selected
is not even compiled.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from webhook.errors import ConfigError

SEPARATOR = "//"


@dataclass(frozen=True)
class Selection:
    test: re.Pattern[str] | None = None
    case: re.Pattern[str] | None = None
    either: re.Pattern[str] | None = None  # `A` alone: test or case name

    def selects_case(self, test: str, case: str) -> bool:
        if self.either is not None:
            return bool(self.either.search(case) or self.either.search(test))
        return _found(self.test, test) and _found(self.case, case)

    def selects_test(self, test: str, cases: Iterable[str]) -> bool:
        """Whether any of the test's cases may run; a test with no cases, by its name alone."""
        names = list(cases)
        if self.either is not None and not names:
            return bool(self.either.search(test))
        if self.either is None and not names:
            return _found(self.test, test)
        return any(self.selects_case(test, case) for case in names)


EVERYTHING = Selection()


def parse_run(pattern: str) -> Selection:
    """The selection `--run PATTERN` names; ConfigError (a usage error) when it is not valid."""
    if not pattern:
        return EVERYTHING
    parts = pattern.split(SEPARATOR)
    if len(parts) > 2:
        raise ConfigError(f"--run {pattern!r}: at most one {SEPARATOR!r} may separate test and case")
    if len(parts) == 1:
        return Selection(either=_compile(pattern, parts[0]))
    return Selection(test=_compile(pattern, parts[0]), case=_compile(pattern, parts[1]))


def _compile(pattern: str, part: str) -> re.Pattern[str]:
    try:
        return re.compile(part)
    except re.error as e:
        raise ConfigError(f"--run {pattern!r}: invalid regular expression {part!r}: {e}") from e


def _found(regex: re.Pattern[str] | None, name: str) -> bool:
    return regex is None or regex.search(name) is not None
