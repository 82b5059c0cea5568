"""`--workers N`: each worker accepts on its own socket, a worker that dies is replaced, SIGTERM stops all."""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import BUNDLED_POLICIES, REPO
from tests.support.apiserver import check_reply
from tests.support.cli import gpu_webhook
from tests.support.patience import PATIENCE
from tests.support.reviews import load_example, make_review
from tests.support.server import ServerProcess, start_server
from webhook.workers import reap_orphans, reuseport_sockets

_STARTED = re.compile(r"Started server process \[(\d+)\]")


def _workers(cert_dir: Path, count: int) -> tuple[ServerProcess, list[int]]:
    server = start_server(
        ["--cert-dir", str(cert_dir), "--policies", str(BUNDLED_POLICIES), "--workers", str(count)],
        ca_file=cert_dir / "ca.crt",
    )
    return server, _await_started(server, count)


def _await_started(server: ServerProcess, count: int) -> list[int]:
    """The pids of `count` more workers, once each has completed its start-up."""
    pids: list[int] = []
    complete = 0
    while len(pids) < count or complete < count:
        entry = server.wait_for_log(
            lambda e: (
                bool(_STARTED.match(e.get("msg", ""))) or e.get("msg") == "Application startup complete."
            ),
        )
        started = _STARTED.match(entry["msg"])
        if started:
            pids.append(int(started.group(1)))
        else:
            complete += 1
    return pids


def _answers(server: ServerProcess, requests: int) -> None:
    for _ in range(requests):
        review = make_review(load_example("pod-gpu-training.yaml"))
        check_reply(review, server.client().post_json("/validate", review), "validate")


def test_the_sockets_share_one_port() -> None:
    sockets = reuseport_sockets("127.0.0.1", 0, 3)
    try:
        ports = {s.getsockname()[1] for s in sockets}
        assert len(sockets) == 3 and len(ports) == 1 and ports != {0}
    finally:
        for sock in sockets:
            sock.close()


def test_a_worker_that_dies_is_replaced_and_sigterm_stops_them_all(cert_dir: Path) -> None:
    server, pids = _workers(cert_dir, 2)
    try:
        _answers(server, 5)
        os.kill(pids[0], signal.SIGKILL)
        [replacement] = _await_started(server, 1)
        assert replacement not in pids
        _answers(server, 20)  # connections hash over both sockets: the new worker takes its share
    finally:
        assert server.stop(signal.SIGTERM) == 0
    for pid in pids[1:]:
        assert not Path(f"/proc/{pid}").exists() or "zombie" in Path(f"/proc/{pid}/status").read_text()


def _listening_inodes(port: int) -> set[str]:
    """Inodes of the sockets listening on `port`, from the kernel's table (state 0A is LISTEN)."""
    found = set()
    for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
        fields = line.split()
        if fields[1].endswith(f":{port:04X}") and fields[3] == "0A":
            found.add(fields[9])
    return found


def _await_listening(port: int, count: int) -> set[str]:
    """The listening sockets once there are `count`: uvicorn logs its start-up before it calls
    listen(), and nothing else tells us when it has, so the kernel's table is polled."""
    deadline = time.monotonic() + PATIENCE
    while len(found := _listening_inodes(port)) < count and time.monotonic() < deadline:
        time.sleep(0.05)
    return found


def _socket_inodes(pid: int) -> set[str]:
    links = (os.readlink(fd) for fd in Path(f"/proc/{pid}/fd").iterdir())
    return {link[len("socket:[") : -1] for link in links if link.startswith("socket:[")}


def test_each_worker_listens_on_its_own_socket(cert_dir: Path) -> None:
    """With one shared socket, the worker that wakes first takes the connection, and kube-apiserver
    keeps it open: measured, 52-61% on one of two. A socket each lets the kernel hash them."""
    server, pids = _workers(cert_dir, 2)
    try:
        listening = _await_listening(server.port, 2)
        owned = [_socket_inodes(pid) & listening for pid in pids]
        assert len(listening) == 2
        assert all(len(inodes) == 1 for inodes in owned) and owned[0] != owned[1]
    finally:
        server.stop_gracefully()


def test_a_port_in_use_is_a_clear_error(cert_dir: Path) -> None:
    """Without the check, SO_REUSEPORT would let the workers share the port with whoever holds it."""
    with socket.socket() as taken:
        taken.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)  # as another multi-worker server's
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = gpu_webhook(
            "serve",
            "--cert-dir",
            str(cert_dir),
            "--policies",
            str(BUNDLED_POLICIES),
            "--workers",
            "2",
            "--port",
            str(port),
        )
    assert result.returncode == 2
    assert f"cannot listen on 127.0.0.1:{port}" in result.stderr and "Traceback" not in result.stderr


def _fork(pipe: tuple[int, int] | None = None) -> int:
    """A child that exits at once, or once the parent closes its end of `pipe`."""
    pid = os.fork()
    if pid == 0:  # pragma: no cover (the child)
        if pipe is not None:
            os.close(pipe[1])
            os.read(pipe[0], 1)
        os._exit(0)
    return pid


def _exited(pid: int) -> None:
    """Return once `pid` has exited, leaving its status to be collected."""
    os.waitid(os.P_PID, pid, os.WEXITED | os.WNOWAIT)


def orphans_scenario() -> None:
    """Run in a fresh interpreter: no other child of the test process can be collected by mistake."""
    read, write = os.pipe()
    worker = _fork((read, write))
    orphan = _fork()
    _exited(orphan)
    assert reap_orphans({worker}) == [orphan]
    with pytest.raises(ChildProcessError):  # collected, not merely seen
        os.waitpid(orphan, os.WNOHANG)
    os.close(write)
    _exited(worker)
    assert reap_orphans({worker}) == []  # a worker's status is multiprocessing's to collect
    assert os.waitpid(worker, 0)[0] == worker


def test_the_supervisor_collects_orphans_but_not_workers() -> None:
    script = "from tests.admission.test_workers import orphans_scenario; orphans_scenario()"
    result = subprocess.run(
        [sys.executable, "-c", script],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
