"""A real server whose audit log's disk fills up and is freed again, with nothing acknowledged lost.

Two real ways to fill a disk without root, each a kernel refusal of the log's own write:
- `tmpfs`: the log on a 1 MiB tmpfs, mounted in a user and mount namespace (unshare -Urm)
  and filled by a file beside it: write(2) fails with ENOSPC. Skipped where unprivileged
  user namespaces may not mount (some CI kernels restrict them).
- `fsize`: the server's RLIMIT_FSIZE lowered to the log's size (prlimit, allowed on one's own
  processes): write(2) fails with EFBIG. Works wherever Linux does.
The test waits for what the server logs, never for a time.
"""

from __future__ import annotations

import contextlib
import errno
import os
import resource
import shutil
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import orjson
import pytest

from tests.audit.test_server import every_record, logged
from tests.conftest import BUNDLED_POLICIES
from tests.support.apiserver import check_reply
from tests.support.patience import PATIENCE
from tests.support.reviews import load_example, make_review
from tests.support.server import LogEntry, ServerProcess, start_server
from webhook.audit.files import expand
from webhook.audit.verify import verify

REFUSAL = "cannot write its audit log"


class Disk(Protocol):
    @property
    def log(self) -> Path: ...  # the log's path as the server sees it
    @property
    def prefix(self) -> list[str]: ...  # how the server is started on this disk
    @property
    def reason(self) -> str: ...  # what the kernel says when the log's write is refused

    def view(self) -> Path: ...  # the log's path as the test sees it
    def fill(self, server: ServerProcess) -> None: ...
    def free(self, server: ServerProcess) -> None: ...


@dataclass
class FileSizeLimit:
    root: Path
    prefix: list[str] = field(default_factory=list)
    reason: str = os.strerror(errno.EFBIG)

    @property
    def log(self) -> Path:
        return self.root / "audit.log"

    def view(self) -> Path:
        return self.log

    def fill(self, server: ServerProcess) -> None:
        for pid in _writers(server.process.pid):
            _, hard = resource.prlimit(pid, resource.RLIMIT_FSIZE)
            resource.prlimit(pid, resource.RLIMIT_FSIZE, (self.log.stat().st_size, hard))

    def free(self, server: ServerProcess) -> None:
        for pid in _writers(server.process.pid):
            _, hard = resource.prlimit(pid, resource.RLIMIT_FSIZE)
            resource.prlimit(pid, resource.RLIMIT_FSIZE, (hard, hard))


def _writers(pid: int) -> list[int]:
    """The server and its children: the journal helper writes the log (webhook/audit/remote.py)."""
    children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
    return [pid, *(int(child) for child in children)]


@dataclass
class SmallFilesystem:
    mount: Path
    holder: subprocess.Popen[str]
    reason: str = os.strerror(errno.ENOSPC)

    @property
    def log(self) -> Path:
        return self.mount / "audit.log"

    @property
    def prefix(self) -> list[str]:
        return ["nsenter", "-t", str(self.holder.pid), "-U", "-m", "--preserve-credentials"]

    def view(self) -> Path:
        """The namespace's tmpfs, seen from outside it through the holder's root."""
        return Path(f"/proc/{self.holder.pid}/root{self.log}")

    def fill(self, server: ServerProcess) -> None:
        fd = os.open(self.view().with_name("filler"), os.O_WRONLY | os.O_CREAT, 0o600)
        try:
            assert _write_until_refused(fd) == errno.ENOSPC
        finally:
            os.close(fd)

    def free(self, server: ServerProcess) -> None:
        self.view().with_name("filler").unlink()


def _write_until_refused(fd: int) -> int | None:
    while True:
        try:
            os.write(fd, b"\0" * 4096)
        except OSError as e:
            return e.errno


@contextlib.contextmanager
def small_filesystem(mount: Path) -> Iterator[SmallFilesystem]:
    mount.mkdir()
    if shutil.which("unshare") is None or shutil.which("nsenter") is None:
        pytest.skip("util-linux unshare and nsenter are not installed")
    script = f"mount -t tmpfs -o size=1m tmpfs {mount} && echo mounted && exec sleep infinity"
    holder = subprocess.Popen(
        ["unshare", "-Urm", "sh", "-c", script], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    assert holder.stdout is not None
    try:
        if holder.stdout.readline() != "mounted\n":
            pytest.skip(f"no tmpfs in a user namespace here: {holder.communicate(timeout=PATIENCE)[1]}")
        yield SmallFilesystem(mount, holder)
    finally:
        holder.kill()
        holder.wait(timeout=PATIENCE)


@pytest.fixture(params=["tmpfs", "fsize"])
def disk(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Disk]:
    if request.param == "fsize":
        yield FileSizeLimit(tmp_path)
        return
    with small_filesystem(tmp_path / "mnt") as found:
        yield found


@dataclass
class Ledger:
    """What kube-apiserver was told, by uid."""

    acknowledged: list[str] = field(default_factory=list)
    refused: list[str] = field(default_factory=list)

    def send(self, server: ServerProcess, index: int) -> bool:
        """One /validate; True when its decision was acknowledged (not the audit refusal)."""
        pod = load_example("pod-gpu-training.yaml")
        pod["metadata"]["name"] = f"trainer-{index}"
        review = make_review(pod)
        response = check_reply(review, server.client().post_json("/validate", review), "validate")
        uid = review["request"]["uid"]
        if REFUSAL in response.get("status", {}).get("message", ""):
            assert response["allowed"] is False and response["status"]["code"] == 500
            self.refused.append(uid)
            return False
        self.acknowledged.append(uid)
        return True


def readyz(server: ServerProcess) -> tuple[int, dict[str, Any]]:
    reply = server.client().request("GET", "/readyz")
    return reply.status, orjson.loads(reply.body)


def writable_gauge(server: ServerProcess) -> str:
    text = server.client().request("GET", "/metrics").body.decode()
    return next(line for line in text.splitlines() if line.startswith("gpu_webhook_audit_writable "))


def message(text: str) -> Any:
    return lambda entry: str(entry.get("msg", "")).startswith(text)


def serve(cert_dir: Path, disk: Disk, *extra: str) -> ServerProcess:
    args = ["--cert-dir", str(cert_dir), "--policies", str(BUNDLED_POLICIES), "--audit-log", str(disk.log)]
    return start_server([*args, *extra], ca_file=cert_dir / "ca.crt", prefix=disk.prefix)


def fill_until_refused(server: ServerProcess, disk: Disk, ledger: Ledger) -> LogEntry:
    """A full tmpfs still takes a few records, into the page the log already has: send until refused."""
    disk.fill(server)
    for index in range(100, 200):
        if not ledger.send(server, index):
            return server.wait_for_log(message("audit log unwritable"))
    raise AssertionError("the full disk took 100 records")


def test_a_full_disk_makes_the_replica_unready_until_it_is_freed_and_loses_nothing(
    cert_dir: Path, disk: Disk
) -> None:
    server = serve(cert_dir, disk)
    ledger = Ledger()
    try:
        assert all(ledger.send(server, index) for index in range(3))
        status, body = readyz(server)
        assert (status, body["checks"]["audit"]) == (200, "writable")

        failure = fill_until_refused(server, disk, ledger)
        assert failure["failure_mode"] == "closed" and failure["error"].endswith(disk.reason)
        status, body = readyz(server)
        assert (status, body["ready"]) == (503, False)
        assert body["checks"]["audit"].startswith("unwritable since ")
        assert writable_gauge(server) == "gpu_webhook_audit_writable 0.0"
        assert not any(ledger.send(server, index) for index in range(200, 203))

        disk.free(server)
        recovered = server.wait_for_log(message("audit log writable again"))
        assert recovered["unrecorded"] == len(ledger.refused) == 4
        assert readyz(server)[0] == 200
        assert writable_gauge(server) == "gpu_webhook_audit_writable 1.0"
        assert all(ledger.send(server, index) for index in range(300, 303))
    finally:
        server.stop_gracefully()

    result = verify(expand([disk.view()]), from_genesis=True)
    assert result.ok, result.describe()
    uids = [record["uid"] for record in logged(disk.view())]
    assert uids == ledger.acknowledged, "every acknowledged decision is in the log, in order, and no other"
    (outage,) = [record for record in every_record(disk.view()) if record["type"] == "outage"]
    assert outage["unrecorded"] == 4 and outage["failureMode"] == "closed"
    assert REFUSAL not in os.fsdecode(disk.view().read_bytes())


def test_in_open_mode_the_replica_stays_ready_and_the_log_counts_what_went_unrecorded(
    cert_dir: Path, tmp_path: Path
) -> None:
    disk = FileSizeLimit(tmp_path)
    server = serve(cert_dir, disk, "--audit-failure-mode", "open")
    ledger = Ledger()
    try:
        assert ledger.send(server, 0)
        disk.fill(server)
        assert ledger.send(server, 1)  # answered all the same, and unrecorded
        server.wait_for_log(message("audit log unwritable"))
        status, body = readyz(server)
        assert (status, body["ready"]) == (200, True)
        assert "1 decisions sent unrecorded (--audit-failure-mode open)" in body["checks"]["audit"]
        assert writable_gauge(server) == "gpu_webhook_audit_writable 0.0"
        disk.free(server)
        assert server.wait_for_log(message("audit log writable again"))["unrecorded"] == 1
    finally:
        server.stop_gracefully()
    result = verify(expand([disk.log]), from_genesis=True)
    assert result.ok, result.describe()
    assert [r["uid"] for r in logged(disk.log)] == ledger.acknowledged[:1]
    (outage,) = [record for record in every_record(disk.log) if record["type"] == "outage"]
    assert (outage["unrecorded"], outage["failureMode"]) == (1, "open")
