"""`gpu-webhook test PATH…`: run PolicyTest suites and Gatekeeper Suites; report `N passed, N failed`."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from webhook.errors import ConfigError
from webhook.policy import suite as gatekeeper_suite
from webhook.policytest import run_suite, suites_in


@dataclass(frozen=True)
class Outcome:
    label: str
    passed: bool
    reasons: tuple[str, ...] = ()
    skipped: bool = False


def add_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = commands.add_parser("test", help="run PolicyTest suites and Gatekeeper Suites")
    parser.add_argument("paths", nargs="+", type=Path, metavar="PATH", help="test files or directories")
    parser.add_argument("-v", "--verbose", action="store_true", help="list passing cases too")
    parser.set_defaults(command=command)


def command(args: argparse.Namespace) -> int:
    for path in args.paths:
        if not path.exists():
            raise ConfigError(f"{path}: no such file or directory")
    outcomes = list(_policy_tests(args.paths)) + list(_gatekeeper_suites(args.paths))
    if not outcomes:
        named = ", ".join(str(path) for path in args.paths)
        print(f"no PolicyTest or Gatekeeper Suite cases in {named}", file=sys.stderr)
        return 1
    for outcome in outcomes:
        if args.verbose or not outcome.passed:
            print(_line(outcome))
    passed = sum(o.passed and not o.skipped for o in outcomes)
    failed = sum(not o.passed for o in outcomes)
    print(f"{passed} passed, {failed} failed")
    return 0 if outcomes and not failed else 1


def _policy_tests(paths: list[Path]) -> Iterator[Outcome]:
    for document in suites_in(paths):
        for result in run_suite(document):
            yield Outcome(f"{result.suite} / {result.case}", result.passed, result.failures)


def _gatekeeper_suites(paths: list[Path]) -> Iterator[Outcome]:
    files = [f for f in gatekeeper_suite.find_suites(paths) if gatekeeper_suite.is_suite_file(f)]
    for result in gatekeeper_suite.run_paths(files).results:
        yield Outcome(result.label, result.passed, (result.reason,) if result.reason else (), result.skipped)


def _line(outcome: Outcome) -> str:
    state = "SKIP" if outcome.skipped else ("PASS" if outcome.passed else "FAIL")
    return "\n    ".join([f"{state} {outcome.label}", *outcome.reasons])
