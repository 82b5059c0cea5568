"""`gpu-webhook test PATH…`: run policy test suites and report `N passed, N failed`."""

from __future__ import annotations

import argparse
from pathlib import Path

from webhook.policytest import CaseResult, run_suite, suites_in


def add_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = commands.add_parser("test", help="run PolicyTest suites")
    parser.add_argument("paths", nargs="+", type=Path, metavar="PATH", help="test files or directories")
    parser.add_argument("-v", "--verbose", action="store_true", help="list passing cases too")
    parser.set_defaults(command=command)


def command(args: argparse.Namespace) -> int:
    results = [result for suite in suites_in(args.paths) for result in run_suite(suite)]
    for result in results:
        if args.verbose or not result.passed:
            print(_line(result))
    passed = sum(r.passed for r in results)
    print(f"{passed} passed, {len(results) - passed} failed")
    return 0 if results and passed == len(results) else 1


def _line(result: CaseResult) -> str:
    head = f"{'PASS' if result.passed else 'FAIL'} {result.suite} / {result.case}"
    return "\n    ".join([head, *result.failures])
