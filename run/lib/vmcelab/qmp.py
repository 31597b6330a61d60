"""A small synchronous QMP client."""
import json
import select
import time

from .sock import connect_unix


class QmpError(Exception):
    pass


class Qmp:
    def __init__(self, path, timeout=30.0, connect_timeout=10.0):
        self.path = path
        self.events = []
        self.sock = connect_unix(path, connect_timeout)
        self.sock.settimeout(timeout)
        # its own line buffer, not a file object's: poll_events() must see a
        # line that came in one read with an answer before it, which a
        # select() on the socket would not
        self.buf = b""
        greeting = self._read()
        # QEMU 7.2 resets a monitor to "not negotiated" only when the next
        # client's connection opens, so an event emitted in between (a STOP
        # from vmced pausing the VM, in e2e-forward's policy stop) can reach
        # the new client before its greeting: keep it, and read on
        while "event" in greeting and "QMP" not in greeting:
            self.events.append(greeting)
            greeting = self._read()
        if "QMP" not in greeting:
            raise QmpError(f"{path}: not a QMP monitor: {greeting}")
        self.execute("qmp_capabilities")

    def _read(self):
        while b"\n" not in self.buf:
            data = self.sock.recv(65536)
            if not data:
                raise QmpError(f"{self.path}: monitor closed the connection")
            self.buf += data
        line, self.buf = self.buf.split(b"\n", 1)
        return json.loads(line)

    def _send(self, msg):
        self.sock.sendall(json.dumps(msg).encode() + b"\n")

    def execute(self, command, **arguments):
        msg = {"execute": command}
        if arguments:
            msg["arguments"] = arguments
        self._send(msg)
        while True:
            reply = self._read()
            if "event" in reply:
                self.events.append(reply)
                continue
            if "error" in reply:
                raise QmpError(f"{command}: {reply['error'].get('desc')}")
            return reply.get("return")

    def poll_events(self, timeout=0.5):
        """Reads the events QEMU has sent meanwhile (QMP sends events to
        every monitor, unasked), waiting up to @timeout for more (0: only
        what is there); returns all seen so far"""
        deadline = time.monotonic() + timeout
        while True:
            left = max(0.0, deadline - time.monotonic())
            if b"\n" not in self.buf and not select.select([self.sock], [], [], left)[0]:
                return self.events
            try:
                msg = self._read()
            except (QmpError, ValueError, OSError):
                return self.events
            if "event" in msg:
                self.events.append(msg)

    def hmp(self, command_line):
        return self.execute("human-monitor-command", **{"command-line": command_line})

    def close(self):
        try:
            self.sock.close()
        except OSError:
            pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
