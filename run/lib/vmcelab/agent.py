"""Client of the vmce guest agent (images/guest-tools/vmce-agent.c).

Requests are `COMMAND key=value ...` lines, answers one JSON line each;
images/README.md has the protocol.
"""
import json
import os
import random
import socket
import time

from .sock import connect_unix


class AgentError(Exception):
    pass


class AgentCalls:
    """What every agent client offers on top of call(): vmce's own port
    (Agent) and qemu-guest-agent's guest-exec (qga.QgaAgent)"""

    def kmsg(self, since=0):
        ret = self.call("kmsg", since=since)
        return [r["text"] for r in ret["lines"]], ret["next"]

    def hardware_corrupted_kb(self):
        return self.call("meminfo")["hardware_corrupted_kb"]


class Agent(AgentCalls):
    def __init__(self, path, connect_timeout=10.0):
        self.path = path
        self.buf = b""
        self.sock = connect_unix(path, connect_timeout)
        # asked while a call waits: False ends the wait at once (a campaign
        # sets it to "QEMU runs and the guest kernel has not crashed")
        self.alive = None

    def send(self, command, **args):
        words = [command] + [f"{k.replace('_', '-')}={v}" for k, v in args.items()]
        self.sock.sendall((" ".join(words) + "\n").encode())

    def read(self, timeout=30.0, alive=None):
        """One answer line; @alive() is asked while waiting, so a dead QEMU
        is reported at once instead of after the timeout."""
        deadline = time.monotonic() + timeout
        while b"\n" not in self.buf:
            left = deadline - time.monotonic()
            if left <= 0:
                raise AgentError(f"{self.path}: no answer from the guest agent within {timeout:.0f} s")
            if alive is not None and not alive():
                raise AgentError(f"{self.path}: the guest is gone (QEMU exited or its kernel crashed)")
            self.sock.settimeout(min(left, 0.5))
            try:
                chunk = self.sock.recv(65536)
            except socket.timeout:
                continue
            if not chunk:
                raise AgentError(f"{self.path}: the guest agent connection closed")
            self.buf += chunk
        line, self.buf = self.buf.split(b"\n", 1)
        return json.loads(line)

    def call(self, command, timeout=30.0, **args):
        self.send(command, **args)
        reply = self.read(timeout, self.alive)
        if "error" in reply:
            err = reply["error"]
            raise AgentError(f"{command}: {err.get('desc')} ({err.get('class')})")
        return reply["return"]

    def close(self):
        try:
            self.sock.close()
        except OSError:
            pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

def wait_ready(path, timeout=60.0, alive=None):
    """Waits for the guest agent's first answer; returns (Agent, seconds).

    One connection and one ping: QEMU holds what the host writes until the
    guest opens its port, so the ping is answered as soon as the agent runs.
    """
    start = time.monotonic()
    deadline = start + timeout
    agent = Agent(path, connect_timeout=timeout)
    token = f"{os.getpid()}-{random.randrange(1 << 30)}"
    try:
        agent.send("ping", token=token)
        # answers to requests sent before this connection (the port keeps
        # what a guest that went down had not read, and its next boot's
        # agent answers them) come first: read up to this ping's own
        while True:
            reply = agent.read(max(0.1, deadline - time.monotonic()), alive)
            if (reply.get("return") or {}).get("token") == token:
                break
            # an agent of before the token (an older image) says so
            if "token" in ((reply.get("error") or {}).get("desc") or ""):
                break
    except Exception:
        agent.close()
        raise
    return agent, time.monotonic() - start
