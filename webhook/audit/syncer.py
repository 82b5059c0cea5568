"""fsync in a helper process, so that flushing a batch never waits for the interpreter lock.

In batch mode a group commit is written on the event loop and then fsynced. In a thread,
that fsync needs the GIL to start and again to report back, while the event loop holds it
serving requests, so every batch forced GIL switches: on a 2-CPU VM about 200 µs of CPU a
batch, for a 290 µs fsync (docs/audit.md, Durability). A helper process has its own interpreter:
the loop sends it the batch's descriptor over a Unix socket and reads the answer as an
ordinary I/O event.

The helper is fsyncd.py, which also describes the protocol. If it is gone, `fsync` raises
SyncerGone and the caller flushes another way.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import logging
import os
import socket
import subprocess
import sys

from webhook.audit.fsyncd import REQUEST

log = logging.getLogger("webhook.audit")
_STOP_SECONDS = 5.0


class SyncerGone(Exception):
    """The helper is not running (never started, exited or unreachable); flush another way."""


class FsyncHelper:
    """The event loop's side: starts the helper, sends it descriptors, settles the answers."""

    def __init__(self) -> None:
        self._socket: socket.socket | None = None
        self._process: subprocess.Popen[bytes] | None = None
        self._waiters: collections.deque[asyncio.Future[None]] = collections.deque()

    def start(self) -> None:
        """Start the helper; call on the event loop that will await `fsync`. A helper that cannot
        start is logged, not raised: the writer thread does the fsyncs then."""
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        with theirs:
            try:
                self._process = subprocess.Popen(
                    [sys.executable, "-m", "webhook.audit.fsyncd", str(theirs.fileno())],
                    pass_fds=(theirs.fileno(),),
                    stdin=subprocess.DEVNULL,
                    stdout=subprocess.DEVNULL,  # never writes; stderr stays, for a crash
                    env={**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)},
                )
            except OSError as e:
                ours.close()
                log.error("audit fsync helper cannot start; fsync runs in a thread", extra={"error": str(e)})
                return
        ours.setblocking(False)
        self._socket = ours
        asyncio.get_running_loop().add_reader(ours.fileno(), self._on_answers)

    @property
    def pid(self) -> int | None:
        return self._process.pid if self._process is not None else None

    async def fsync(self, fd: int) -> None:
        """Return once `fd` is fsynced. OSError: the fsync failed. SyncerGone: there is no helper."""
        if self._socket is None:
            raise SyncerGone("the fsync helper is not running")
        waiter = asyncio.get_running_loop().create_future()
        try:
            socket.send_fds(self._socket, [REQUEST], [fd])
        except OSError as e:
            self._gone(f"cannot reach the fsync helper: {e}")
            raise SyncerGone(str(e)) from e
        self._waiters.append(waiter)
        await waiter

    async def close(self) -> None:
        """Stop the helper: it exits when its socket closes; waits for it (kills it if it hangs)."""
        self._disconnect(SyncerGone("the audit log is closing"))
        process, self._process = self._process, None
        if process is None:
            return
        try:
            await asyncio.get_running_loop().run_in_executor(None, process.wait, _STOP_SECONDS)
        except subprocess.TimeoutExpired:
            process.kill()
            await asyncio.get_running_loop().run_in_executor(None, process.wait)

    def _on_answers(self) -> None:
        while self._socket is not None:  # _settle may give up on the helper
            try:
                answer = self._socket.recv(1)
            except BlockingIOError:
                return
            except OSError as e:
                self._gone(f"the fsync helper's socket failed: {e}")
                return
            if not answer:
                self._gone("the fsync helper exited")
                return
            self._settle(answer[0])

    def _settle(self, error: int) -> None:
        if not self._waiters:
            self._gone("the fsync helper answered a request it was not sent")
            return
        waiter = self._waiters.popleft()
        if waiter.done():  # its caller was cancelled (the server is stopping)
            return
        if error:
            waiter.set_exception(OSError(error, os.strerror(error)))
        else:
            waiter.set_result(None)

    def _gone(self, why: str) -> None:
        log.error("audit fsync helper unavailable; fsync runs in a thread", extra={"error": why})
        self._disconnect(SyncerGone(why))

    def _disconnect(self, error: SyncerGone) -> None:
        if self._socket is not None:
            with contextlib.suppress(RuntimeError):  # the loop may already be closed
                asyncio.get_running_loop().remove_reader(self._socket.fileno())
            self._socket.close()
            self._socket = None
        while self._waiters:
            waiter = self._waiters.popleft()
            if not waiter.done():
                waiter.set_exception(error)
