"""review() alone, in this process: the judged requests timed without HTTP, TLS or audit.

    .venv/bin/python -m bench.inprocess [--rounds 7] [--calls 3000] [--case full-validate]

A loaded or shared machine moves wrk's figures by a third from one run to the next; CPU time of
one review() moves far less, so this is the benchmark to compare two versions of the request
path with. Each figure is the median of `--rounds` rounds of `--calls` calls, in microseconds
per call, and as a multiple of a trivial handler timed in the same process: parse the
AdmissionReview, answer it with a fixed patch, serialize the answer (what bench/trivial.py does
behind its HTTP stack).

For a count that no neighbour moves, run one case under `valgrind --tool=callgrind` twice,
with `--calls 0` and with `--calls N`, and divide the difference in instructions by N.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson

from bench.scenarios import BENCH_POLICIES, cpu_pod, mutated, review, training_pod
from bench.setups import full_policies

PATCH = [{"op": "add", "path": "/metadata/annotations", "value": {"bench": "1"}}]


def _deps(policies: Path) -> Any:
    from webhook.inventory import EMPTY

    try:
        from webhook.offline import offline_deps
    except ImportError:  # the code before offline_deps moved there
        from webhook.commands.common import offline_deps  # type: ignore[attr-defined,no-redef,unused-ignore]
    from webhook.policy.loader import load_directory

    return offline_deps(load_directory(policies), EMPTY)


def _trivial(body: bytes) -> bytes:
    request = orjson.loads(body)["request"]
    response = {"uid": request["uid"], "allowed": True, "patchType": "JSONPatch", "patch": PATCH}
    return orjson.dumps(
        {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "response": response}
    )


def _reviewer(policies: Path, endpoint: str) -> Callable[[bytes], object]:
    from webhook.review import review as run

    deps = _deps(policies)
    return lambda body: run(orjson.loads(body)["request"], endpoint, deps)  # type: ignore[arg-type]


def _time(call: Callable[[bytes], object], body: bytes, rounds: int, calls: int) -> float:
    found = []
    for _ in range(rounds):
        start = time.process_time()
        for _ in range(calls):
            call(body)
        found.append((time.process_time() - start) / calls * 1e6)
    return statistics.median(found)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--calls", type=int, default=3000)
    parser.add_argument("--case", action="append", help="only these requests (for valgrind --tool=callgrind)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as work:
        full = Path(full_policies(Path(work))[1])
        cases = [
            ("fast-path-mutate", BENCH_POLICIES, "mutate", review(cpu_pod())),
            ("fast-path-validate", BENCH_POLICIES, "validate", review(cpu_pod())),
            ("full-mutate", full, "mutate", review(training_pod("bench-mig"))),
            ("full-validate", full, "validate", review(mutated(training_pod("bench-mig")))),
        ]
        trivial = _time(_trivial, cases[-1][3], args.rounds, args.calls)
        print(f"{'request':<22}{'µs/call':>10}{'x trivial':>11}")
        print(f"{'trivial handler':<22}{trivial:>10.1f}{1.0:>11.1f}")
        for name, policies, endpoint, body in cases:
            if args.case and name not in args.case:
                continue
            spent = _time(_reviewer(policies, endpoint), body, args.rounds, args.calls)
            print(f"{name:<22}{spent:>10.1f}{spent / trivial:>11.1f}")


if __name__ == "__main__":
    main()
