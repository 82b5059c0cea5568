"""Run the HTTPS server: the only importer of uvicorn.

Each worker process builds its own Service from the same Settings (uvicorn pickles
the config into spawned workers), so nothing global is shared between them.
"""

from __future__ import annotations

import functools
import gc
import logging
import ssl
from collections.abc import Callable
from typing import Any

import uvicorn
from starlette.applications import Starlette

from webhook import certs
from webhook.app import build_app
from webhook.audit.setup import check_audit
from webhook.compose import build_service, engine_factory, policy_sources
from webhook.config import DEFAULT_NAMESPACE, DEFAULT_SERVICE, Settings
from webhook.errors import CertError
from webhook.logs import configure, logging_config
from webhook.policy.engines import vet
from webhook.policy.sources import load_policies
from webhook.tls import ReloadingContext, server_context
from webhook.workers import Workers, reuseport_sockets

log = logging.getLogger("webhook.server")
YOUNG_COLLECTION_THRESHOLD = 10_000


def serve(settings: Settings) -> None:
    """Check everything a worker needs, then serve until SIGTERM; in-flight requests drain."""
    configure(settings.log_level)
    _prepare_certs(settings)
    check_audit(settings)
    config = uvicorn.Config(
        app=_application(settings),
        factory=settings.workers > 1,
        host=settings.host,
        port=settings.port,
        workers=settings.workers,
        ssl_context_factory=functools.partial(tls_context, settings),
        log_config=logging_config(settings.log_level),
        access_log=False,
        http="httptools",
        loop="uvloop",
        lifespan="on",
        server_header=False,
        timeout_graceful_shutdown=settings.shutdown_grace_seconds,
    )
    log.info(
        "serving",
        extra={"url": f"https://{settings.host}:{settings.port}", "workers": settings.workers},
    )
    if settings.workers > 1:
        Workers(config, reuseport_sockets(settings.host, settings.port, settings.workers)).run()
    else:
        uvicorn.Server(config).run()


def _application(settings: Settings) -> Starlette | Callable[[], Starlette]:
    """One worker: the app itself, built (and its policies compiled) once, here, so a bad
    policy set stops the start. Several: a factory each worker calls, after this process
    has checked the policies once; the workers skip the crash check it made (vet.py)."""
    if settings.workers == 1:
        return create_app(settings)
    load_policies(policy_sources(settings), engine_factory(settings))
    vet.share_with_workers()
    return functools.partial(create_app, settings)


def create_app(settings: Settings) -> Starlette:
    app = build_app(build_service(settings))
    # What is built by now lives as long as the worker (compiled policies, schemas, the
    # kubernetes client): frozen, it is no longer walked by every full collection, whose
    # pauses otherwise show up in the tail latency.
    gc.collect()
    gc.freeze()
    # A review decodes, copies and diffs a pod: a few thousand short-lived containers, freed by
    # reference counting. At the default threshold (700) that still triggers several young
    # collections per request; at 10,000 they are rare (about 5% more /mutate throughput, bench/).
    gc.set_threshold(YOUNG_COLLECTION_THRESHOLD, *gc.get_threshold()[1:])
    return app


def tls_context(settings: Settings, _config: Any, _default: Callable[[], ssl.SSLContext]) -> ssl.SSLContext:
    reloading = ReloadingContext(
        settings.cert_dir, check_seconds=settings.cert_check_seconds, client_ca=settings.client_ca
    )
    return reloading.context


def _prepare_certs(settings: Settings) -> None:
    if settings.dev_certs and certs.ensure_dev_certs(settings.cert_dir, DEFAULT_SERVICE, DEFAULT_NAMESPACE):
        log.info("generated development certificates", extra={"dir": str(settings.cert_dir)})
    try:
        server_context(
            settings.cert_dir / certs.TLS_CERT, settings.cert_dir / certs.TLS_KEY, settings.client_ca
        )
    except (OSError, ssl.SSLError) as e:
        raise CertError(f"cannot load {settings.cert_dir}/tls.crt and tls.key: {e}") from e
