"""Several worker processes on one port, each accepting on its own socket (SO_REUSEPORT).

uvicorn's supervisor gives every worker the same listening socket, and whichever worker
wakes first accepts the connection. kube-apiserver keeps its connections to a webhook open,
as the benchmark's load generator does, so an uneven split lasts: measured with 16
connections and two workers, one worker took 52 to 61% of the requests. With a socket each,
the kernel hashes new connections across the workers (48 to 57%). Supervision is uvicorn's,
cut to what we use: start, restart a worker that dies (stop if one cannot start at all), and
stop every worker on SIGTERM. Added: collecting orphans (`reap_orphans`), which falls to us as
PID 1 in a container.
"""

from __future__ import annotations

import logging
import os
import signal
import socket
import threading
from collections.abc import Collection
from types import FrameType

import uvicorn
from uvicorn.config import STARTUP_FAILURE
from uvicorn.supervisors.multiprocess import Process

from webhook.errors import ConfigError

log = logging.getLogger("webhook.server")


def reuseport_sockets(host: str, port: int, count: int) -> list[socket.socket]:
    """`count` sockets bound to one port (with port 0, a free one); ConfigError if it is taken.

    A plain socket binds first: SO_REUSEPORT would otherwise let a second server on this
    machine share the port with us, each answering a share of the connections.
    """
    try:
        with _socket(host) as probe:
            probe.bind((host, port))
            port = probe.getsockname()[1]
        sockets = []
        for _ in range(count):
            sock = _socket(host)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
            sock.bind((host, port))
            sock.set_inheritable(True)
            sockets.append(sock)
    except OSError as e:
        raise ConfigError(f"cannot listen on {host}:{port}: {e.strerror or e}") from e
    return sockets


def _socket(host: str) -> socket.socket:
    sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    return sock


def reap_orphans(workers: Collection[int | None]) -> list[int]:
    """Collect the exit status of children that are not workers; return their pids.

    As PID 1 in a container the supervisor inherits every orphan: a worker killed outright
    (by the OOM killer, say) leaves its audit fsync helper behind, which exits on its own
    but stays a zombie, holding a process-table entry, until its parent collects it. A
    worker's status is left to multiprocessing, which must see it to replace the worker:
    the scan stops at the first exited worker, which `_keep_alive` has usually collected.
    """
    reaped: list[int] = []
    while True:
        try:
            exited = os.waitid(os.P_ALL, 0, os.WEXITED | os.WNOHANG | os.WNOWAIT)
        except ChildProcessError:
            return reaped
        if exited is None or exited.si_pid in workers:
            return reaped
        os.waitpid(exited.si_pid, 0)
        reaped.append(exited.si_pid)
        log.info("collected an orphaned process", extra={"pid": exited.si_pid})


class Workers:
    def __init__(self, config: uvicorn.Config, sockets: list[socket.socket]) -> None:
        self.config = config
        self.sockets = sockets
        self.processes: list[Process] = []
        self.should_exit = threading.Event()

    def run(self) -> None:
        for sig in (signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, self._exit)
        host, port = self.sockets[0].getsockname()[:2]
        # uvicorn's own line, which it writes only when it binds the socket itself.
        logging.getLogger("uvicorn.error").info("Uvicorn running on https://%s:%d", host, port)
        self.processes = [self._start(sock) for sock in self.sockets]
        while not self.should_exit.wait(0.5):
            self._keep_alive()
            reap_orphans({process.pid for process in self.processes})
        for process in self.processes:
            process.terminate()
        for process in self.processes:
            process.join()

    def _exit(self, signum: int, _: FrameType | None) -> None:
        log.info("stopping workers", extra={"signal": signal.Signals(signum).name})
        self.should_exit.set()

    def _start(self, sock: socket.socket) -> Process:
        process = Process(self.config, [sock])
        process.start()
        return process

    def _keep_alive(self) -> None:
        for index, process in enumerate(self.processes):
            if self.should_exit.is_set() or process.is_alive(timeout=self.config.timeout_worker_healthcheck):
                continue
            process.kill()  # hung, or already gone
            process.join()
            if process.exitcode == STARTUP_FAILURE:
                log.error("a worker failed to start; stopping", extra={"pid": process.pid})
                self.should_exit.set()
                return
            log.warning("a worker died; starting another", extra={"pid": process.pid})
            self.processes[index] = self._start(self.sockets[index])
