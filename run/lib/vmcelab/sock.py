"""Connecting to a UNIX socket that may not exist yet."""
import socket
import time


def connect_unix(path, timeout=10.0):
    """Retries until @path accepts a connection or @timeout passes: QEMU
    creates its sockets a moment after it starts."""
    deadline = time.monotonic() + timeout
    while True:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            sock.connect(path)
            return sock
        except OSError:
            sock.close()
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)
