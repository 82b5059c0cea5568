"""`gpu-webhook test PATH…`: run PolicyTest suites and Gatekeeper Suites; report every case."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterator
from pathlib import Path

from webhook.errors import ConfigError
from webhook.policy import suite as gatekeeper_suite
from webhook.policy.selection import Selection, parse_run
from webhook.policytest import run_suite, suites_in
from webhook.testreport import FORMATS, Outcome, Result, Totals, render

EPILOG = """\
--run selects as `gator verify --run` does: REGEX alone selects the cases whose name, or whose
test's name, it matches; TEST//CASE selects the cases matching CASE in tests matching TEST. A
test is a Gatekeeper Suite's test or a PolicyTest document. Cases left out count as skipped.

exit codes: 0 every case selected passed; 1 a case failed, or no case was found or selected
(unlike gator, which passes a run that selects nothing: a mistyped --run should not pass CI);
2 usage error (an unknown option, an invalid --run, a path that does not exist, a file that
cannot be read).
"""


def add_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = commands.add_parser(
        "test",
        help="run PolicyTest suites and Gatekeeper Suites",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("paths", nargs="+", type=Path, metavar="PATH", help="test files or directories")
    parser.add_argument("-v", "--verbose", action="store_true", help="list passing and skipped cases too")
    parser.add_argument(
        "-o",
        "--output",
        choices=FORMATS,
        default="text",
        help="text (failures and a summary), json (every case and the totals), "
        "junit (JUnit XML, as CI systems read it)",
    )
    parser.add_argument(
        "-r",
        "--run",
        metavar="REGEX",
        default="",
        help="run only the matching tests and cases (see below)",
    )
    parser.set_defaults(command=command)


def command(args: argparse.Namespace) -> int:
    selection = parse_run(args.run)
    for path in args.paths:
        if not path.exists():
            raise ConfigError(f"{path}: no such file or directory")
    outcomes = list(_policy_tests(args.paths, selection)) + list(_gatekeeper_suites(args.paths, selection))
    named = ", ".join(str(path) for path in args.paths)
    if not outcomes:
        print(f"no PolicyTest or Gatekeeper Suite cases in {named}", file=sys.stderr)
        return 1
    print(render(args.output, outcomes, verbose=args.verbose))
    totals = Totals.of(outcomes)
    if args.run and not totals.passed and not totals.failed:
        print(f"no case in {named} is selected by --run {args.run!r}", file=sys.stderr)
        return 1
    return 1 if totals.failed else 0


def _policy_tests(paths: list[Path], selection: Selection) -> Iterator[Outcome]:
    for document in suites_in(paths):
        for result in run_suite(document, selection):
            state: Result = "skip" if result.skipped else ("pass" if result.passed else "fail")
            reasons = (result.skipped,) if result.skipped else result.failures
            label = f"{result.suite} / {result.case}"
            yield Outcome(document.file, result.suite, result.case, state, label, reasons)


def _gatekeeper_suites(paths: list[Path], selection: Selection) -> Iterator[Outcome]:
    files = [f for f in gatekeeper_suite.find_suites(paths) if gatekeeper_suite.is_suite_file(f)]
    for result in gatekeeper_suite.run_paths(files, selection=selection).results:
        state: Result = "skip" if result.skipped else ("pass" if result.passed else "fail")
        reasons = (result.reason,) if result.reason else ()
        yield Outcome(result.suite, result.test, result.case, state, result.label, reasons)
