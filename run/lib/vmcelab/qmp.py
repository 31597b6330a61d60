"""A small synchronous QMP client."""
import json
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
        self.file = self.sock.makefile("rw", encoding="utf-8", newline="\n")
        greeting = self._read()
        if "QMP" not in greeting:
            raise QmpError(f"{path}: not a QMP monitor: {greeting}")
        self.execute("qmp_capabilities")

    def _read(self):
        line = self.file.readline()
        if not line:
            raise QmpError(f"{self.path}: monitor closed the connection")
        return json.loads(line)

    def execute(self, command, **arguments):
        msg = {"execute": command}
        if arguments:
            msg["arguments"] = arguments
        self.file.write(json.dumps(msg) + "\n")
        self.file.flush()
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
        every monitor, unasked); returns all seen so far"""
        import select
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([self.sock], [], [], left)[0]:
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
            self.file.close()
            self.sock.close()
        except OSError:
            pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
