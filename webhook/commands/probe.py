"""`gpu-webhook probe`: an exec health check for a server that requires client certificates.

Kubelet's HTTPS probes send no client certificate, so a server started with --client-ca
refuses their handshake. This command makes the same request with a certificate of its own.
"""

from __future__ import annotations

import argparse
import ssl
import sys
import urllib.error
import urllib.request
from pathlib import Path

from webhook.certs import CLIENT_CERT, CLIENT_KEY

DEFAULT_URL = "https://127.0.0.1:8443/readyz"


def add_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = commands.add_parser("probe", help="GET a health endpoint over TLS; exit 0 only on HTTP 200")
    parser.add_argument("url", nargs="?", default=DEFAULT_URL, help=f"default: {DEFAULT_URL}")
    parser.add_argument("--ca-file", type=Path, required=True, help="the CA that signed the serving cert")
    parser.add_argument("--client-cert-dir", type=Path, help="holds client.crt and client.key")
    parser.add_argument("--timeout", type=float, default=2.0, help="seconds (default 2)")
    parser.set_defaults(command=_run)


def context(ca_file: Path, client_cert_dir: Path | None) -> ssl.SSLContext:
    """Verifies the server against our CA. The host name is not checked: the probe dials the pod's
    loopback address, which the serving certificate (issued for the Service) does not name."""
    found = ssl.create_default_context(cafile=str(ca_file))
    found.minimum_version = ssl.TLSVersion.TLSv1_2
    found.check_hostname = False
    if client_cert_dir is not None:
        found.load_cert_chain(client_cert_dir / CLIENT_CERT, client_cert_dir / CLIENT_KEY)
    return found


def _run(args: argparse.Namespace) -> int:
    try:
        tls = context(args.ca_file, args.client_cert_dir)
        with urllib.request.urlopen(args.url, context=tls, timeout=args.timeout) as reply:  # noqa: S310
            status = reply.status
    except urllib.error.HTTPError as e:
        status = e.code
    except (OSError, ssl.SSLError, ValueError) as e:
        print(f"gpu-webhook probe: {args.url}: {e}", file=sys.stderr)
        return 1
    if status != 200:
        print(f"gpu-webhook probe: {args.url}: HTTP {status}", file=sys.stderr)
        return 1
    return 0
