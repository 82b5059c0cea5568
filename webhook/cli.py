"""The gpu-webhook command line. Parses arguments into Settings and hands off; no logic here."""

from __future__ import annotations

import argparse
import datetime as dt
import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, NoReturn, cast

from webhook import __version__, certs, kubeversion, manifests
from webhook.audit.commands import add_audit_commands, add_audit_serve_options, audit_settings
from webhook.commands import advise, dra, policies, probe, review, scan, test
from webhook.commands.quota import add_quota_commands
from webhook.config import (
    DEFAULT_MAX_STALENESS_SECONDS,
    DEFAULT_NAMESPACE,
    DEFAULT_RESERVATION_TTL_SECONDS,
    DEFAULT_SERVICE,
    DEV_CERT_DIR,
    EXEMPT_NAMESPACES,
    Settings,
)
from webhook.errors import ConfigError, WebhookError
from webhook.policy.sources import PolicySources, resolve
from webhook.utilization.options import add_serve_options, serve_settings

ENV_PREFIX = "GPU_WEBHOOK_"
Command = Callable[[argparse.Namespace], int]


# A reader that closed the pipe (`gpu-webhook … | head`) ends the command as SIGPIPE would.
EXIT_CLOSED_PIPE = 128 + 13
EXIT_INTERNAL = 70  # sysexits' EX_SOFTWARE: a defect of ours, not of the input
TRACEBACK_VARIABLE = "GPU_WEBHOOK_TRACEBACK"


class Parser(argparse.ArgumentParser):
    """No abbreviations: `--name` must never silently become `--namespace`. Subcommands inherit
    the class (argparse builds them with the parser's own type)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("allow_abbrev", False)
        super().__init__(*args, **kwargs)


class _CheckingParser(Parser):
    """Raises instead of printing usage and exiting: for checking arguments we do not run."""

    def error(self, message: str) -> NoReturn:
        raise ConfigError(message)


def main(argv: Sequence[str] | None = None) -> int:
    try:
        return _main(argv)
    except BrokenPipeError:
        _discard_stdout()
        return EXIT_CLOSED_PIPE


def _main(argv: Sequence[str] | None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    command: Command = args.command
    try:
        code = command(args)
        sys.stdout.flush()  # here, not at exit, so a closed pipe is caught by main()
        return code
    except WebhookError as e:
        print(f"gpu-webhook: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        raise  # main() ends the command as SIGPIPE would
    except OSError as e:
        print(f"gpu-webhook: {describe_os_error(e)}", file=sys.stderr)
        return 2
    except Exception as e:  # the last net: one line, never a traceback, unless asked for
        if os.environ.get(TRACEBACK_VARIABLE):
            raise
        print(
            f"gpu-webhook: unexpected {type(e).__name__}: {e} (set {TRACEBACK_VARIABLE}=1 for the traceback)",
            file=sys.stderr,
        )
        return EXIT_INTERNAL


def describe_os_error(error: OSError) -> str:
    """`PATH: reason`, the way shell tools say it, rather than Python's `[Errno N] ...`."""
    reason = error.strerror or str(error)
    if error.filename is None:
        return reason
    if error.filename2 is not None:
        return f"{error.filename} -> {error.filename2}: {reason}"
    return f"{error.filename}: {reason}"


def _discard_stdout() -> None:
    """Point stdout at /dev/null so the interpreter's final flush cannot raise again."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(prog="gpu-webhook", description="Admission webhook for GPU workloads.")
    parser.add_argument("--version", action="version", version=f"gpu-webhook {__version__}")
    # Typed as plain ArgumentParser subparsers for the modules that add to them; they are Parsers.
    commands = cast(
        "argparse._SubParsersAction[argparse.ArgumentParser]",
        parser.add_subparsers(title="commands", required=True, metavar="COMMAND"),
    )
    _add_serve(commands)
    _add_certs(commands)
    review.add_parser(commands)
    scan.add_parser(commands)
    test.add_parser(commands)
    policies.add_parser(commands)
    manifests.add_command(commands, check_serve_args=check_serve_args)
    add_audit_commands(commands)
    add_quota_commands(commands)
    advise.add_parser(commands)
    probe.add_parser(commands)
    dra.add_parser(commands)
    _refuse_empty_paths(parser)
    return parser


def _refuse_empty_paths(parser: argparse.ArgumentParser) -> None:
    """Every `type=Path` argument of every command refuses "": Path("") is the current directory,
    which no one means by an empty `--audit-log ""` (an unset shell variable, usually)."""
    for action in parser._actions:
        if action.type is Path:
            action.type = _path
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                _refuse_empty_paths(sub)


def _path(text: str) -> Path:
    if not text:
        raise argparse.ArgumentTypeError("an empty path")
    return Path(text)


def env(name: str, default: str | None = None) -> str | None:
    """Every serve flag can come from GPU_WEBHOOK_<FLAG>; the command line wins."""
    return os.environ.get(ENV_PREFIX + name.upper().replace("-", "_"), default)


def check_serve_args(args: Sequence[str]) -> None:
    """ConfigError if `gpu-webhook serve ARGS` would stop at its argument parsing."""
    parser = _CheckingParser(prog="gpu-webhook serve")
    _add_serve_options(parser)
    try:
        parser.parse_args(list(args))
    except ConfigError as e:
        raise ConfigError(
            f"the server would not start, `gpu-webhook serve` refuses its arguments: {e}"
        ) from e


def _add_serve(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    serve = commands.add_parser("serve", help="serve /mutate and /validate over HTTPS")
    _add_serve_options(serve)
    serve.set_defaults(command=_serve)


def _add_serve_options(serve: argparse.ArgumentParser) -> None:
    serve.add_argument("--host", default=env("host", "127.0.0.1"))
    serve.add_argument("--port", type=int, default=env("port", "8443"))
    serve.add_argument("--cert-dir", type=Path, default=env("cert-dir"), help="reads tls.crt and tls.key")
    serve.add_argument(
        "--policies",
        type=Path,
        action="append",
        metavar="PATH",
        help="a policy directory or file, added to the security bundle (repeatable; GPU_WEBHOOK_POLICIES "
        f"takes several, separated by {os.pathsep!r}; default: ./policies if there is one)",
    )
    serve.add_argument(
        "--no-bundle",
        type=_boolean,
        nargs="?",
        const=True,
        default=env("no-bundle", "false"),
        help="leave the packaged security bundle out: only --policies is enforced",
    )
    serve.add_argument("--audit-log", type=Path, default=env("audit-log"), help="decision log file")
    serve.add_argument("--workers", type=_positive, default=env("workers", "1"))
    serve.add_argument(
        "--log-level",
        choices=["debug", "info", "warning", "error"],
        default=env("log-level", "info"),
    )
    serve.add_argument(
        "--cert-check-seconds",
        type=float,
        default=env("cert-check-seconds", "1"),
        help="how often a handshake may look for rotated certificate files",
    )
    serve.add_argument(
        "--policy-check-seconds",
        type=float,
        default=env("policy-check-seconds", "2"),
        help="how often to look for changed policy files",
    )
    serve.add_argument(
        "--exclude-namespaces",
        type=_csv,
        default=env("exclude-namespaces", ",".join(EXEMPT_NAMESPACES)),
        help="comma-separated namespace globs never reviewed (avoid deadlocks)",
    )
    serve.add_argument(
        "--dra-gpu-classes",
        type=_csv,
        default=env("dra-gpu-classes", ""),
        help="comma-separated DRA device classes counted as GPUs, besides gpu.nvidia.com and mig.nvidia.com",
    )
    serve.add_argument(
        "--own-username",
        default=env("own-username"),
        help="our service account's username, whose own requests are never reviewed",
    )
    serve.add_argument(
        "--advisory-webhook",
        type=_boolean,
        default=env("advisory-webhook", "false"),
        help="a separate webhook calls /validate-advisory, so /validate answers only deny policies",
    )
    serve.add_argument(
        "--client-ca",
        type=Path,
        default=env("client-ca"),
        help="require client certificates signed by this CA (kube-apiserver's admission kubeconfig)",
    )
    serve.add_argument(
        "--body-timeout-seconds",
        type=_positive_seconds,
        default=env("body-timeout-seconds", "10"),
        help="a client must send its whole body within this time, or gets 408",
    )
    serve.add_argument(
        "--max-inflight",
        type=int,
        default=env("max-inflight", "256"),
        help="reviews a worker runs at once; beyond it, requests are answered by --failure-mode at once",
    )
    serve.add_argument(
        "--review-threads",
        type=_positive,
        default=env("review-threads", "2"),
        help="threads per worker for reviews that run Rego (or strict quota): about one per CPU for "
        "regopy, more for --engine opa, whose reviews wait on the network",
    )
    serve.add_argument(
        "--quota-failure-mode",
        choices=["closed", "open"],
        default=env("quota-failure-mode", "closed"),
        help="when the cluster cache is older than --max-staleness: closed denies GPU pods under a quota",
    )
    serve.add_argument(
        "--enforcement",
        choices=["policy", "warn"],
        default=env("enforcement", "policy"),
        help="warn: constraints that would deny only warn (roll out with this, list offenders with scan)",
    )
    _add_engine_options(serve)
    serve.add_argument("--failure-mode", choices=["closed", "open"], default=env("failure-mode", "closed"))
    add_audit_serve_options(serve, env)
    _add_cluster_options(serve)
    add_serve_options(serve, env)


def _add_engine_options(serve: argparse.ArgumentParser) -> None:
    engine = serve.add_argument_group("Rego engine for Gatekeeper constraints")
    engine.add_argument("--engine", choices=["regopy", "opa"], default=env("engine", "regopy"))
    engine.add_argument(
        "--opa-url", default=env("opa-url", "http://127.0.0.1:8181"), help="with --engine opa"
    )
    engine.add_argument("--opa-timeout", type=_positive_seconds, default=env("opa-timeout", "1.5"))
    engine.add_argument("--opa-retries", type=int, default=env("opa-retries", "2"))
    engine.add_argument(
        "--opa-failure-mode",
        choices=["closed", "open"],
        default=env("opa-failure-mode", "closed"),
        help="an unreachable OPA: closed denies by deny constraints, open records them unevaluated",
    )
    engine.add_argument("--opa-token-file", type=Path, default=env("opa-token-file"), help="bearer token")
    engine.add_argument("--opa-ca-file", type=Path, default=env("opa-ca-file"), help="CA for an https OPA")


def _add_cluster_options(serve: argparse.ArgumentParser) -> None:
    cluster = serve.add_argument_group("cluster state and quotas")
    cluster.add_argument(
        "--inventory", type=Path, default=env("inventory"), help="cluster objects from a file, no API access"
    )
    cluster.add_argument(
        "--quota-consistency",
        choices=["per-replica", "strict"],
        default=env("quota-consistency", "per-replica"),
        help="strict: admissions in flight are shared by all replicas through a ledger in the API",
    )
    cluster.add_argument("--kubeconfig", type=Path, default=env("kubeconfig"), help="default: in-cluster")
    cluster.add_argument(
        "--kubernetes-version",
        type=_kubernetes_version,
        default=env("kubernetes-version"),
        help="the cluster's version, e.g. 1.28 (default: asked of the API server; unknown offline)",
    )
    cluster.add_argument("--namespace", default=env("namespace"), help="our own namespace, for the ledger")
    cluster.add_argument(
        "--reservation-ttl",
        type=_positive_seconds,
        default=env("reservation-ttl", str(DEFAULT_RESERVATION_TTL_SECONDS)),
        help="seconds an admitted pod counts before the watch shows it",
    )
    cluster.add_argument(
        "--scan-interval",
        type=_non_negative_seconds,
        default=env("scan-interval", "0"),
        help="seconds between background scans of existing objects (one replica, by Lease); 0: off",
    )
    cluster.add_argument(
        "--emit-denial-events",
        type=_boolean,
        default=env("emit-denial-events", "false"),
        help="write a Kubernetes Event (reason FailedAdmission) in our namespace for each denial, "
        "rate-limited and aggregated; needs RBAC to create and patch events there",
    )
    cluster.add_argument(
        "--scan-publish",
        choices=["none", "policyreport", "openreports"],
        default=env("scan-publish", "none"),
        help="after each complete background scan, write its findings as wgpolicyk8s.io PolicyReports "
        "or openreports.io Reports, one per namespace (needs the CRD and the rendered RBAC)",
    )
    cluster.add_argument(
        "--dra-templates-interval",
        type=_non_negative_seconds,
        default=env("dra-templates-interval", "60"),
        help="seconds between passes that create mode dra's ResourceClaimTemplates (one replica, by "
        "Lease; sooner when policies or namespaces change); 0: off, the templates come from elsewhere",
    )
    cluster.add_argument(
        "--max-staleness",
        type=_positive_seconds,
        default=env("max-staleness", str(DEFAULT_MAX_STALENESS_SECONDS)),
        help="seconds without word from the API before /readyz calls the cache stale",
    )


def _kubernetes_version(text: str) -> str:
    try:
        kubeversion.parse(text)
    except kubeversion.VersionError as e:
        raise argparse.ArgumentTypeError(str(e)) from e
    return text


def serve_policies(args: argparse.Namespace) -> PolicySources:
    """The flags, else GPU_WEBHOOK_POLICIES: the command line wins over the environment."""
    from_env = [Path(part) for part in (env("policies") or "").split(os.pathsep) if part]
    return resolve(args.policies or from_env, no_bundle=args.no_bundle)


def _serve(args: argparse.Namespace) -> int:
    from webhook.server import serve

    sources = serve_policies(args)
    settings = Settings(
        host=args.host,
        port=args.port,
        cert_dir=args.cert_dir or DEV_CERT_DIR,
        dev_certs=args.cert_dir is None,
        policy_paths=sources.paths,
        security_bundle=sources.bundle,
        audit_log=args.audit_log,
        workers=args.workers,
        log_level=args.log_level,
        failure_mode=args.failure_mode,
        cert_check_seconds=args.cert_check_seconds,
        policy_check_seconds=args.policy_check_seconds,
        excluded_namespaces=args.exclude_namespaces,
        dra_gpu_classes=args.dra_gpu_classes,
        own_username=args.own_username,
        advisory_webhook=args.advisory_webhook,
        client_ca=args.client_ca,
        body_timeout_seconds=args.body_timeout_seconds,
        max_inflight=args.max_inflight,
        review_threads=args.review_threads,
        quota_failure_mode=args.quota_failure_mode,
        enforcement=args.enforcement,
        engine=args.engine,
        opa_url=args.opa_url,
        opa_timeout_seconds=args.opa_timeout,
        opa_retries=args.opa_retries,
        opa_failure_mode=args.opa_failure_mode,
        opa_token_file=args.opa_token_file,
        opa_ca_file=args.opa_ca_file,
        inventory=args.inventory,
        quota_consistency=args.quota_consistency,
        kubeconfig=args.kubeconfig,
        kubernetes_version=args.kubernetes_version,
        namespace=args.namespace,
        reservation_ttl_seconds=args.reservation_ttl,
        max_staleness_seconds=args.max_staleness,
        scan_interval_seconds=args.scan_interval,
        emit_denial_events=args.emit_denial_events,
        scan_publish=args.scan_publish,
        dra_templates_interval_seconds=args.dra_templates_interval,
        **audit_settings(args),
        utilization=serve_settings(args),
    )
    serve(settings)
    return 0


def _add_certs(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    group = commands.add_parser("certs", help="create, rotate and inspect TLS certificates")
    actions = group.add_subparsers(title="actions", required=True, metavar="ACTION")
    generate = actions.add_parser("generate", help="write a new CA and serving certificate")
    generate.add_argument("--out", type=Path, required=True)
    generate.add_argument("--service", default=DEFAULT_SERVICE)
    generate.add_argument("--namespace", default=DEFAULT_NAMESPACE)
    generate.add_argument("--days", type=_positive, default=365)
    generate.add_argument("--force", action="store_true", help="replace an existing CA")
    generate.set_defaults(command=_certs_generate)
    rotate = actions.add_parser("rotate", help="issue a new serving certificate from the existing CA")
    rotate.add_argument("--dir", type=Path, required=True)
    rotate.add_argument("--days", type=_positive, default=365)
    rotate.add_argument("--service", help="rename the certificate; default: keep the current names")
    rotate.add_argument("--namespace", help="with --service")
    rotate.set_defaults(command=_certs_rotate)
    client = actions.add_parser("client", help="issue a client certificate from a CA, for --client-ca")
    client.add_argument("--ca-dir", type=Path, required=True, help="holds ca.crt and ca.key")
    client.add_argument("--out", type=Path, required=True, help="where client.crt and client.key go")
    client.add_argument("--name", default="kube-apiserver", help="the certificate's common name")
    client.add_argument("--days", type=_positive, default=365)
    client.set_defaults(command=_certs_client)
    show = actions.add_parser("show", help="print subjects, SANs, expiry and the caBundle")
    show.add_argument("--dir", type=Path, required=True)
    show.set_defaults(command=_certs_show)


def _certs_generate(args: argparse.Namespace) -> int:
    certs.generate(args.out, args.service, args.namespace, days=args.days, force=args.force)
    print(f"wrote {args.out}/ca.crt, ca.key, tls.crt, tls.key")
    return 0


def _certs_rotate(args: argparse.Namespace) -> int:
    certs.rotate(args.dir, days=args.days, service=args.service, namespace=args.namespace)
    print(f"rotated {args.dir}/tls.crt and tls.key; the CA is unchanged")
    return 0


def _certs_client(args: argparse.Namespace) -> int:
    certs.issue_client(args.ca_dir, args.out, args.name, days=args.days)
    print(f"wrote {args.out}/client.crt and client.key for {args.name!r}")
    return 0


def _certs_show(args: argparse.Namespace) -> int:
    now = dt.datetime.now(dt.UTC)
    for name, info in certs.describe(args.dir).items():
        days_left = (info.not_after - now).days
        print(f"{name}:")
        print(f"  subject:   {info.subject}")
        print(f"  issuer:    {info.issuer}")
        print(f"  dns names: {', '.join(info.dns_names) or '-'}")
        print(f"  ip:        {', '.join(info.ip_addresses) or '-'}")
        print(f"  valid:     {info.not_before:%Y-%m-%d} to {info.not_after:%Y-%m-%d} ({days_left} days left)")
    print(f"caBundle: {certs.ca_bundle(args.dir)}")
    return 0


def _boolean(text: str) -> bool:
    if text.lower() in ("true", "1", "yes"):
        return True
    if text.lower() in ("false", "0", "no"):
        return False
    raise argparse.ArgumentTypeError(f"expected true or false, got {text!r}")


def _csv(text: str) -> tuple[str, ...]:
    return tuple(part.strip() for part in text.split(",") if part.strip())


def _positive_seconds(text: str) -> float:
    value = float(text)
    if not value > 0:
        raise argparse.ArgumentTypeError(f"must be a positive number of seconds, got {text}")
    return value


def _non_negative_seconds(text: str) -> float:
    value = float(text)
    if not value >= 0:
        raise argparse.ArgumentTypeError(f"must be 0 (off) or a positive number of seconds, got {text}")
    return value


def _positive(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value
