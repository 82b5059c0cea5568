"""`gpu-webhook audit …` and the audit flags of `serve`. Parsing and printing only."""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeAlias

import orjson

from webhook.audit import output, signing
from webhook.audit.chain import Problem, Record
from webhook.audit.checked import CheckedRead
from webhook.audit.query import (
    DECISIONS,
    Filter,
    QueryError,
    follow,
    last,
    log_files,
    log_groups,
    parse_time,
    position,
    select_files,
)
from webhook.audit.verify import verify
from webhook.errors import ConfigError

Env = Callable[..., str | None]
Subparsers: TypeAlias = "argparse._SubParsersAction[argparse.ArgumentParser]"
MiB = 1024 * 1024
# summary, report and query print what they read, then exit with this when the log fails
# verification (as `audit verify` does); 2 is for a file they cannot read at all (cli.main).
EXIT_UNVERIFIED = 1


def add_audit_serve_options(serve: argparse.ArgumentParser, env: Env) -> None:
    group = serve.add_argument_group("audit log (--audit-log FILE turns it on)")
    group.add_argument(
        "--audit-fsync",
        choices=["always", "batch", "never"],
        default=env("audit-fsync", "batch"),
        help="always: one fsync per record; batch: concurrent records share one (default); "
        "never: leave it to the OS",
    )
    group.add_argument(
        "--audit-writer",
        choices=["helper", "worker"],
        default=env("audit-writer", "helper"),
        help="helper: each worker's records are built, sealed and written by a process of its own, "
        "on another core (default); worker: by the worker itself, which costs less CPU in all "
        "when the replica has one core",
    )
    group.add_argument(
        "--audit-max-bytes",
        type=_size,
        default=env("audit-max-bytes", "100Mi"),
        help="rotate when the file would pass this size, e.g. 100Mi; 0 never rotates",
    )
    group.add_argument(
        "--audit-keep", type=_positive, default=env("audit-keep", "5"), help="rotated files kept"
    )
    group.add_argument(
        "--audit-stdout",
        action="store_true",
        default=_true(env("audit-stdout")),
        help="also copy each record to stdout",
    )
    group.add_argument(
        "--audit-signing-key", type=Path, default=env("audit-signing-key"), help="Ed25519 PEM key"
    )
    group.add_argument(
        "--audit-checkpoint-records",
        type=_positive,
        default=env("audit-checkpoint-records", "1000"),
        help="write a signed checkpoint after this many records",
    )
    group.add_argument(
        "--audit-checkpoint-seconds",
        type=float,
        default=env("audit-checkpoint-seconds", "60"),
        help="or when this many seconds have passed since the last one",
    )
    group.add_argument(
        "--audit-replica",
        default=env("audit-replica", ""),
        help="this replica's stable name for the `start` record each worker writes (a StatefulSet "
        "pod's name); default: the hostname",
    )
    group.add_argument(
        "--audit-node", default=env("audit-node", ""), help="the node this replica runs on, for that record"
    )
    group.add_argument(
        "--audit-failure-mode",
        choices=["closed", "open"],
        default=env("audit-failure-mode", "closed"),
        help="when a decision cannot be recorded: closed answers with a failure decision, "
        "open sends it anyway",
    )


def audit_settings(args: argparse.Namespace) -> dict[str, Any]:
    if args.audit_log is None and (args.audit_stdout or args.audit_signing_key):
        raise QueryError("--audit-stdout and --audit-signing-key need --audit-log")
    return {
        "audit_fsync": args.audit_fsync,
        "audit_writer": args.audit_writer,
        "audit_max_bytes": args.audit_max_bytes,
        "audit_keep": args.audit_keep,
        "audit_stdout": args.audit_stdout,
        "audit_signing_key": args.audit_signing_key,
        "audit_checkpoint_records": args.audit_checkpoint_records,
        "audit_checkpoint_seconds": args.audit_checkpoint_seconds,
        "audit_failure_mode": args.audit_failure_mode,
        "audit_replica": args.audit_replica,
        "audit_node": args.audit_node,
    }


def add_audit_commands(commands: Subparsers) -> None:
    group = commands.add_parser("audit", help="read, check and report on the decision log")
    actions = group.add_subparsers(title="actions", required=True, metavar="ACTION")
    _add_tail(actions)
    _add_query(actions)
    _add_summary(actions)
    _add_verify(actions)
    _add_report(actions)
    _add_keygen(actions)


def _add_filters(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--since", help="RFC 3339 time, date, or age such as 15m, 2h, 7d")
    parser.add_argument("--until", help="RFC 3339 time, date, or age; exclusive")
    parser.add_argument("--namespace", help="namespace (globs allowed)")
    parser.add_argument("--user", help="username (globs allowed)")
    parser.add_argument("--decision", choices=DECISIONS)
    parser.add_argument("--policy", help="a policy with a finding on the record (globs allowed)")
    parser.add_argument("--kind", help="object kind, e.g. Pod")
    parser.add_argument("--uid", help="admission request uid")
    parser.add_argument("--endpoint", choices=["mutate", "validate"])
    parser.add_argument("--type", dest="record_type", default="decision", help="record type; 'all' for any")


def _filter(args: argparse.Namespace) -> Filter:
    return Filter(
        since=parse_time(args.since) if args.since else None,
        until=parse_time(args.until) if args.until else None,
        namespace=args.namespace,
        user=args.user,
        decision=args.decision,
        policy=args.policy,
        kind=args.kind,
        uid=args.uid,
        endpoint=args.endpoint,
        record_type=None if args.record_type == "all" else args.record_type,
    )


def _add_tail(actions: Subparsers) -> None:
    tail = actions.add_parser("tail", help="the latest records; -f follows new ones")
    tail.add_argument("file", type=Path)
    tail.add_argument("-n", "--lines", type=int, default=10, help="how many records first (default 10)")
    tail.add_argument("-f", "--follow", action="store_true")
    tail.add_argument("-o", "--output", choices=output.FORMATS, default="jsonl")
    _add_filters(tail)
    tail.set_defaults(command=_tail)


def _tail(args: argparse.Namespace) -> int:
    where = _filter(args)
    log_files([args.file])
    start = position(args.file)
    records = last([args.file], where, args.lines, upto=start) if args.lines > 0 else []
    stream: Iterator[Record] = iter(records)
    if args.follow:
        stream = _chain(records, follow(args.file, where, start=start))
    fmt = "jsonl" if args.follow and args.output == "json" else args.output
    _print(lambda: output.write(_flushing(stream), fmt, sys.stdout))
    return 0


def _add_query(actions: Subparsers) -> None:
    query = actions.add_parser("query", help="records that match every given filter")
    query.add_argument("files", type=Path, nargs="+", metavar="FILE")
    query.add_argument("-o", "--output", choices=output.FORMATS, default="table")
    query.add_argument("--limit", type=int, default=0, help="stop after this many records")
    _add_filters(query)
    _add_checks(query)
    query.set_defaults(command=_query)


def _add_checks(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--public-key", type=Path, help="also verify signed checkpoints with this Ed25519 public key"
    )
    parser.add_argument(
        "--no-verify",
        action="store_true",
        help="skip the hash-chain check that runs while reading (faster on large logs)",
    )


def _read(args: argparse.Namespace, groups: list[list[Path]]) -> tuple[Iterator[Record], CheckedRead | None]:
    """The matching records of each named log in turn, and the check that runs while they are
    read (None with --no-verify)."""
    if args.no_verify and args.public_key:
        raise QueryError("--public-key checks signatures while reading, which --no-verify turns off")
    if args.no_verify:
        return select_files([path for files in groups for path in files], _filter(args)), None
    public = signing.load_public(args.public_key) if args.public_key else None
    checked = CheckedRead(groups, _filter(args), public_key=public)
    return iter(checked), checked


def _problem(checked: CheckedRead | None) -> Problem | None:
    return checked.problem() if checked is not None else None


def _verdict(problem: Problem | None) -> int:
    """One line on stderr when the log fails verification; what was read has been printed."""
    if problem is None:
        return 0
    print(
        f"gpu-webhook: the audit log fails verification at {problem}; the output above includes "
        "records the chain cannot vouch for (`gpu-webhook audit verify` says more)",
        file=sys.stderr,
    )
    return EXIT_UNVERIFIED


def _query(args: argparse.Namespace) -> int:
    records, checked = _read(args, log_groups(args.files))
    if args.limit > 0:
        records = _limited(records, args.limit)
    if not _print(lambda: output.write(records, args.output, sys.stdout)):
        return 0
    return _verdict(_problem(checked))


def _add_summary(actions: Subparsers) -> None:
    summary = actions.add_parser(
        "summary", help="counts, denial reasons by rule, GPUs admitted and latency percentiles"
    )
    summary.add_argument("files", type=Path, nargs="+", metavar="FILE")
    summary.add_argument("-o", "--output", choices=["text", "json"], default="text")
    _add_filters(summary)
    _add_checks(summary)
    summary.set_defaults(command=_summary)


def _summary(args: argparse.Namespace) -> int:
    from webhook.audit.summary import as_json, collect, write_text

    records, checked = _read(args, log_groups(args.files))
    stats = collect(records)
    problem = _problem(checked)
    if args.output == "json":
        data = {**as_json(stats), "verification": _verification(checked, problem)}
        text = orjson.dumps(data, option=orjson.OPT_INDENT_2).decode() + "\n"
        written = _print(lambda: sys.stdout.write(text))
    else:
        written = _print(lambda: write_text(stats, sys.stdout))
    return _verdict(problem) if written else 0


def _verification(checked: CheckedRead | None, problem: Problem | None) -> str:
    """What the check found, in words: `ok`, `skipped` (--no-verify), or where it fails."""
    if checked is None:
        return "skipped"
    return "ok" if problem is None else f"failed at {problem}"


def _add_verify(actions: Subparsers) -> None:
    check = actions.add_parser("verify", help="check the hash chain (and checkpoint signatures)")
    check.add_argument(
        "files", type=Path, nargs="+", metavar="FILE", help="a log file; rotated siblings come along"
    )
    check.add_argument(
        "--public-key", type=Path, help="verify signed checkpoints with this Ed25519 public key"
    )
    check.add_argument("--from-start", action="store_true", help="the log must begin at seq 1")
    check.set_defaults(command=_verify)


def _verify(args: argparse.Namespace) -> int:
    public = signing.load_public(args.public_key) if args.public_key else None
    result = verify(log_files(args.files), public_key=public, from_genesis=args.from_start)
    print(result.describe())
    return 0 if result.ok else 1


def _add_report(actions: Subparsers) -> None:
    report = actions.add_parser("report", help="write a self-contained HTML report")
    report.add_argument("files", type=Path, nargs="+", metavar="FILE")
    report.add_argument("--out", type=Path, required=True)
    report.add_argument("--title", default="gpu-webhook audit report")
    _add_filters(report)
    _add_checks(report)
    report.set_defaults(command=_report)


def _report(args: argparse.Namespace) -> int:
    from webhook.audit.report import render
    from webhook.audit.summary import collect

    _writable(args.out)
    groups = log_groups(args.files)
    records, checked = _read(args, groups)
    stats = collect(records)
    problem = _problem(checked)
    sources = [path for files in groups for path in files]
    page = render(stats, sources=sources, title=args.title, verification=_verification(checked, problem))
    try:
        args.out.write_text(page, encoding="utf-8")
    except OSError as e:
        raise ConfigError(f"cannot write the report {args.out}: {e.strerror or e}") from e
    print(f"wrote {args.out}: {stats.total} records")
    return _verdict(problem)


def _writable(out: Path) -> None:
    """Say what is wrong with --out before a long read, not after it."""
    if out.is_dir():
        raise ConfigError(f"cannot write the report {out}: it is a directory; give a file name")
    if out.parent.exists() and not out.parent.is_dir():
        raise ConfigError(f"cannot write the report {out}: {out.parent} is not a directory")
    if not out.parent.is_dir():
        raise ConfigError(f"cannot write the report {out}: the directory {out.parent} does not exist")


def _add_keygen(actions: Subparsers) -> None:
    keygen = actions.add_parser("keygen", help="create an Ed25519 key pair for signed checkpoints")
    keygen.add_argument(
        "--out",
        type=Path,
        required=True,
        help=f"a directory for {signing.PRIVATE_NAME} and {signing.PUBLIC_NAME}",
    )
    keygen.add_argument("--force", action="store_true", help="replace a key pair that is already there")
    keygen.set_defaults(command=_keygen)


def _keygen(args: argparse.Namespace) -> int:
    private, public = signing.generate(args.out, force=args.force)
    print(f"wrote {private} (serve --audit-signing-key) and {public} (audit verify --public-key)")
    return 0


def _print(action: Callable[[], object]) -> bool:
    """Stop quietly when the reader goes away (`| head`); False then."""
    try:
        action()
        sys.stdout.flush()
    except BrokenPipeError:
        with contextlib.suppress(OSError):
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return False
    return True


def _chain(first: list[Record], rest: Iterator[Record]) -> Iterator[Record]:
    yield from first
    yield from rest


def _flushing(records: Iterator[Record]) -> Iterator[Record]:
    for record in records:
        yield record
        sys.stdout.flush()


def _limited(records: Iterator[Record], limit: int) -> Iterator[Record]:
    for index, record in enumerate(records):
        if index >= limit:
            return
        yield record


def _size(text: str) -> int:
    units = {"Ki": 1024, "Mi": MiB, "Gi": 1024 * MiB, "K": 1000, "M": 1000**2, "G": 1000**3}
    for suffix, factor in units.items():
        if text.endswith(suffix) and text[: -len(suffix)].isdigit():
            return int(text[: -len(suffix)]) * factor
    if text.isdigit():
        return int(text)
    raise argparse.ArgumentTypeError(f"not a size: {text!r} (bytes, or with Ki, Mi, Gi)")


def _positive(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def _true(text: str | None) -> bool:
    return (text or "").strip().lower() in ("1", "true", "yes", "on")
