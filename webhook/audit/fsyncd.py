"""The fsync helper process (started by syncer.py): fsyncs the descriptors it is sent.

The protocol, over a SOCK_SEQPACKET Unix socket: one message per fsync, one byte carrying
one descriptor (SCM_RIGHTS); one answer per message, in order, a byte: 0 when the fsync
returned, else its errno. The helper ignores SIGINT and SIGTERM and exits when the socket
closes, so it never outlives its worker. Standard library only: it starts in milliseconds.
"""

from __future__ import annotations

import errno
import os
import signal
import socket
import sys

REQUEST = b"f"


def serve(channel: socket.socket) -> None:
    """The helper's loop: fsync each descriptor it is sent, answer, close it; stop at end of stream."""
    try:
        while True:
            message, fds, _, _ = socket.recv_fds(channel, 1, 1)
            if not message:
                return
            channel.send(bytes([_fsync(fds[0]) if fds else errno.EBADF]))
    except OSError:
        return  # the worker is gone: nobody is left to answer


def _fsync(fd: int) -> int:
    try:
        os.fsync(fd)
    except OSError as e:
        return e.errno if e.errno and 0 < e.errno < 256 else errno.EIO
    finally:
        os.close(fd)
    return 0


def main(argv: list[str]) -> int:
    # A Ctrl-C or a SIGTERM to the process group is for the server, which stops the helper
    # by closing the socket once the last batch is flushed.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    with socket.socket(fileno=int(argv[0])) as channel:
        serve(channel)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
