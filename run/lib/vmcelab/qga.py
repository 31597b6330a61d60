"""A guest vmce did not build, driven through qemu-guest-agent (qga) alone.

An operator's image has qga and not vmce's agent. So the host pushes vmce's
static guest tools (vmce-agent, vmce-pages, vmce-victim) into a tmpfs of the
guest with guest-file-open/-write, starts `vmce-agent --listen SOCKET` with
guest-exec, and runs every request as `vmce-agent --call SOCKET REQUEST`
through guest-exec, its answer read back with guest-exec-status. The
requests, their answers and the state the agent keeps between them are
those of vmce's own guest (images/README.md), so a campaign's cases run
unchanged: QgaAgent is an agent.Agent to them.

qga is reached over QEMU's chardev socket (QgaSocket: a guest QEMU runs for
vmce) or through libvirt (QgaVirsh: `virsh qemu-agent-command`, on an
operator's domain as it is).
"""
import base64
import json
import os
import random
import socket
import subprocess
import time

from . import paths
from .agent import AgentCalls, AgentError
from .sock import connect_unix

# what a campaign's guest side needs of qga
NEEDED = ("guest-exec", "guest-exec-status", "guest-file-open", "guest-file-write",
          "guest-file-close")
TOOLS = ("vmce-agent", "vmce-pages", "vmce-victim")
# tmpfs first: an operator's disk gets nothing of vmce's but the data files
# of the page-cache cases (DATA_DIR), which need a real file system
TOOL_DIRS = ("/dev/shm", "/run")
DATA_DIR = "/var/lib/vmce"
# raw bytes per guest-file-write: base64 of it stays under the 128 KiB a
# single command-line argument may be (virsh qemu-agent-command's)
CHUNK = 48 * 1024
EXIT_NO_AGENT = 3  # vmce-agent --call: nobody listens on the socket


class QgaError(AgentError):
    """qga cannot do what vmce needs; why (one line), and which of:
    "no-agent" (the guest has no qga, or it never answered), "refused" (qga
    answers but refuses guest-exec or a file command), "no-tmpfs" (nowhere
    to put the tools), "hung" (it stopped answering, QEMU runs and the guest
    logged no panic), "dead" (QEMU exited or the guest's kernel panicked)"""

    def __init__(self, message, kind):
        super().__init__(message)
        self.kind = kind


def refusal(text):
    """A qga error that says the command is not allowed (a blocklist, as
    RHEL's qemu-ga ships with guest-exec in it), not that it failed"""
    low = text.lower()
    return "has been disabled" in low or "disabled" in low and "command" in low or \
        "not found" in low and "command" in low


class QgaSocket:
    """qga over the unix socket QEMU's chardev serves (-chardev socket,
    -device virtserialport,name=org.qemu.guest_agent.0)"""

    def __init__(self, path):
        self.path = path
        self.sock = None
        self.buf = b""
        self.serial = random.randrange(1, 1 << 30)

    def _connect(self, timeout):
        """A fresh connection, synced: qga answers requests it read before
        (a caller that gave up) first, so each session begins with
        guest-sync-delimited and reads up to its 0xff and its id"""
        self.close()
        self.sock = connect_unix(self.path, min(timeout, 10.0))
        self.buf = b""
        token = random.randrange(1, 1 << 31)
        self.sock.sendall(b"\xff" + json.dumps({"execute": "guest-sync-delimited",
                                                 "arguments": {"id": token}}).encode() + b"\n")
        deadline = time.monotonic() + timeout
        while True:
            while b"\xff" not in self.buf:
                self._recv(deadline)
            self.buf = self.buf.split(b"\xff", 1)[1]
            reply = self._line(deadline)
            if reply.get("return") == token:
                return

    def _recv(self, deadline):
        left = deadline - time.monotonic()
        if left <= 0:
            raise socket.timeout("no answer from qemu-guest-agent")
        self.sock.settimeout(min(left, 1.0))
        try:
            chunk = self.sock.recv(1 << 16)
        except socket.timeout:
            return
        if not chunk:
            raise ConnectionResetError("qemu-guest-agent's socket closed")
        self.buf += chunk

    def _line(self, deadline):
        while b"\n" not in self.buf:
            self._recv(deadline)
        line, self.buf = self.buf.split(b"\n", 1)
        line = line.strip(b"\xff \r")
        try:
            return json.loads(line) if line else self._line(deadline)
        except ValueError:
            return self._line(deadline)

    def execute(self, command, arguments=None, timeout=10.0):
        """The command's "return", or QgaError (kind "refused" where qga
        says it may not run it); socket.timeout/OSError when qga is silent"""
        if self.sock is None:
            self._connect(timeout)
        # answers to requests an earlier caller gave up on can still come
        # (the guest read them late): each answer is matched by its id
        self.serial += 1
        msg = {"execute": command, "id": self.serial}
        if arguments:
            msg["arguments"] = arguments
        deadline = time.monotonic() + timeout
        try:
            self.sock.sendall(json.dumps(msg).encode() + b"\n")
            reply = self._line(deadline)
            while reply.get("id") != self.serial:
                reply = self._line(deadline)
        except (OSError, ValueError):
            self.close()  # the next command syncs a new connection
            raise
        if "error" in reply:
            desc = reply["error"].get("desc", str(reply["error"]))
            raise QgaError(f"{command}: {desc}", "refused" if refusal(desc) else "failed")
        return reply.get("return")

    def close(self):
        if self.sock is not None:
            try:
                self.sock.close()
            except OSError:
                pass
        self.sock = None

    def where(self):
        return self.path


class QgaVirsh:
    """qga through libvirt: `virsh qemu-agent-command`, as an operator
    reaches a domain's agent on a host of theirs"""

    def __init__(self, domain, uri=None):
        self.domain, self.uri = domain, uri

    def execute(self, command, arguments=None, timeout=10.0):
        msg = {"execute": command}
        if arguments:
            msg["arguments"] = arguments
        cmd = ["virsh", "-q"] + (["-c", self.uri] if self.uri else []) + \
            ["qemu-agent-command", self.domain, json.dumps(msg), "--timeout", str(max(1, int(timeout)))]
        try:
            res = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout + 15)
        except subprocess.TimeoutExpired:
            raise socket.timeout(f"virsh qemu-agent-command {command}: no answer") from None
        if res.returncode != 0:
            err = res.stderr.strip().splitlines()
            # virsh's last word is the reason ("error: failed to ..." comes first)
            text = next((line for line in reversed(err) if line.startswith("error:")),
                        err[-1] if err else f"virsh exited with status {res.returncode}")
            text = text.removeprefix("error: ")
            low = text.lower()
            if "not responding" in low or "timeout" in low or "timed out" in low:
                raise socket.timeout(text)
            if "failed to get domain" in low or "domain not found" in low or "domain is not running" in low:
                # destroyed (a transient domain is then gone altogether) or shut off
                raise QgaError(f"domain {self.domain} is gone: {text}", "dead")
            if "not configured" in low or "not connected" in low:
                raise QgaError(f"{self.domain}: {text}", "no-agent")
            raise QgaError(f"{command}: {text}", "refused" if refusal(text) else "failed")
        try:
            reply = json.loads(res.stdout)
        except ValueError:
            raise QgaError(f"{command}: virsh printed no JSON: {res.stdout.strip()[:200]}", "failed") from None
        return reply.get("return")

    def close(self):
        pass

    def where(self):
        return f"{self.uri + ' ' if self.uri else ''}domain {self.domain}"


class QgaAgent(AgentCalls):
    """vmce's agent in a guest that has only qga: call(), send(), kmsg()
    as agent.Agent has them. why_silent(): called when qga stops
    answering, returns (kind, why): ("dead", "QEMU exited") or ("hung",
    "...") as the caller can tell (QEMU's process, the console)"""

    def __init__(self, transport, why_silent=None, tools_dir=None):
        self.qga = transport
        self.why_silent = why_silent
        self.tools_dir = tools_dir or os.path.join(paths.build_dir(), "meson", "images", "guest-tools")
        self.dir = None  # where the tools are in the guest
        self.alive = None  # as Agent.alive: asked while a call waits
        self.info = None  # guest-info, guest-get-osinfo: what the report names
        self.answered_s = None  # wait_ready(): seconds until qga first answered

    # -- qga itself
    def _qga(self, command, arguments=None, timeout=10.0):
        try:
            return self.qga.execute(command, arguments, timeout)
        except QgaError:
            raise
        except (OSError, ValueError) as e:
            kind, why = self.why_silent() if self.why_silent else ("hung", "")
            raise QgaError(f"qemu-guest-agent ({self.qga.where()}) stopped answering {command}: "
                           + (why or str(e) or type(e).__name__), kind) from None

    def wait_ready(self, timeout=180.0, alive=None):
        """qga answers, can do what vmce needs, the tools are in and the
        agent listens; returns the seconds it took"""
        start = time.monotonic()
        deadline = start + timeout
        while True:
            try:
                self.qga.execute("guest-ping", timeout=min(5.0, max(1.0, deadline - time.monotonic())))
                break
            except QgaError as e:
                if e.kind != "failed":
                    raise
            except (OSError, ValueError):
                pass
            if alive is not None and not alive():
                kind, why = self.why_silent() if self.why_silent else ("dead", "")
                raise QgaError(f"the guest went down before qemu-guest-agent answered: {why}", kind)
            if time.monotonic() > deadline:
                raise QgaError(f"qemu-guest-agent ({self.qga.where()}) did not answer within "
                               f"{timeout:.0f} s (no qemu-guest-agent in the guest, or it never started)",
                               "no-agent")
            time.sleep(0.5)
        # the boot's own part of it (run/hostlab prints it for an image)
        self.answered_s = time.monotonic() - start
        self.check_commands()
        self.push_tools()
        self.start_agent()
        return time.monotonic() - start

    def check_commands(self):
        info = self._qga("guest-info")
        self.info = {"qga_version": info.get("version")}
        enabled = {c["name"]: c.get("enabled", True) for c in info.get("supported_commands", [])}
        missing = [c for c in NEEDED if c not in enabled]
        off = [c for c in NEEDED if c in enabled and not enabled[c]]
        if missing or off:
            raise QgaError("qemu-guest-agent refuses " + ", ".join(off + missing) + " ("
                           + ("disabled in its configuration (block-rpcs, or an allow-list)"
                              if off else "not in this qemu-ga") + "): vmce runs its tools through them",
                           "refused")
        try:
            osinfo = self._qga("guest-get-osinfo")
            self.info.update(os=osinfo.get("pretty-name") or osinfo.get("name"),
                             release=osinfo.get("kernel-release"))
        except QgaError:
            pass  # an older qga: the agent's ping says the release too

    def push_tools(self):
        """The tools, into the first tmpfs that takes them and lets them run"""
        tried = []
        for d in TOOL_DIRS:
            try:
                for tool in TOOLS:
                    self._write_file(f"{d}/{tool}.new", os.path.join(self.tools_dir, tool))
                # side by side: the agent runs its tools from its own directory
                out = self._exec("/bin/sh", ["-c", f"cd {d} && for t in {' '.join(TOOLS)}; do "
                                              "mv -f $t.new $t && chmod 0755 $t || exit 1; done; "
                                              "./vmce-agent --help >/dev/null"], timeout=30)
                if out["exitcode"] != 0:
                    said = out["err"].strip().splitlines()
                    raise QgaError(said[-1] if said else f"exit status {out['exitcode']}", "failed")
                self.dir = d
                return
            except QgaError as e:
                if e.kind in ("hung", "dead", "refused"):
                    raise
                tried.append(f"{d}: {e}")
        raise QgaError("no writable, executable tmpfs for vmce's tools (" + "; ".join(tried) + ")",
                       "no-tmpfs")

    def _write_file(self, guest_path, host_path):
        with open(host_path, "rb") as f:
            data = f.read()
        handle = self._qga("guest-file-open", {"path": guest_path, "mode": "w"})
        try:
            for off in range(0, len(data), CHUNK):
                self._qga("guest-file-write", {"handle": handle,
                                               "buf-b64": base64.b64encode(data[off:off + CHUNK]).decode()},
                          timeout=30)
        finally:
            self._qga("guest-file-close", {"handle": handle})

    def read_file(self, path, limit=1 << 20):
        """A guest file's text (guest-file-read), or None where it cannot be read"""
        try:
            handle = self._qga("guest-file-open", {"path": path, "mode": "r"})
        except QgaError as e:
            if e.kind in ("hung", "dead"):
                raise
            return None
        data = b""
        try:
            while len(data) < limit:
                got = self._qga("guest-file-read", {"handle": handle, "count": 1 << 16})
                data += base64.b64decode(got.get("buf-b64", ""))
                if got.get("eof") or not got.get("count"):
                    break
        finally:
            self._qga("guest-file-close", {"handle": handle})
        return data.decode(errors="replace")

    @property
    def socket(self):
        return f"{self.dir}/vmce-agent.sock"

    def start_agent(self):
        out = self._exec(f"{self.dir}/vmce-agent", ["--listen", self.socket], timeout=30)
        if out["exitcode"] != 0:
            raise QgaError(f"vmce-agent --listen: {out['err'].strip() or 'exit status %d' % out['exitcode']}",
                           "failed")

    def _spawn(self, path, args, capture=True):
        return self._qga("guest-exec", {"path": path, "arg": list(args), "capture-output": capture})["pid"]

    def _exec(self, path, args, timeout=30.0):
        """A program run in the guest to its end: {"exitcode", "out", "err"}"""
        pid = self._spawn(path, args)
        deadline = time.monotonic() + timeout
        pause = 0.005
        while True:
            st = self._qga("guest-exec-status", {"pid": pid})
            if st.get("exited"):
                return {"exitcode": st.get("exitcode", -st.get("signal", 0) or -1),
                        "out": base64.b64decode(st.get("out-data", "")).decode(errors="replace"),
                        "err": base64.b64decode(st.get("err-data", "")).decode(errors="replace")}
            if self.alive is not None and not self.alive():
                raise AgentError(f"{path}: the guest is gone (QEMU exited or its kernel crashed)")
            if time.monotonic() > deadline:
                kind, why = self.why_silent() if self.why_silent else ("hung", "")
                raise QgaError(f"{os.path.basename(path)} {' '.join(args[:3])}: still running after "
                               f"{timeout:.0f} s" + (f" ({why})" if why else ""), kind)
            time.sleep(pause)
            pause = min(pause * 2, 0.1)

    # -- the agent's protocol, as agent.Agent speaks it
    def _words(self, command, args):
        return ["--call", self.socket, command] + [f"{k.replace('_', '-')}={v}" for k, v in args.items()]

    def call(self, command, timeout=30.0, **args):
        for attempt in (1, 2):
            out = self._exec(f"{self.dir}/vmce-agent", self._words(command, args), timeout)
            if out["exitcode"] == EXIT_NO_AGENT and attempt == 1:
                # the agent went (the guest's OOM killer, a qga restart that
                # took its cgroup with it): a new one, with no workloads
                self.start_agent()
                continue
            break
        line = out["out"].strip().splitlines()
        if out["exitcode"] != 0 or not line:
            raise AgentError(f"{command}: vmce-agent --call: "
                             f"{out['err'].strip() or 'exit status %d' % out['exitcode']}")
        reply = json.loads(line[-1])
        if "error" in reply:
            err = reply["error"]
            raise AgentError(f"{command}: {err.get('desc')} ({err.get('class')})")
        return reply["return"]

    def send(self, command, **args):
        """A request whose answer nobody waits for (the guest may go down under it)"""
        self._spawn(f"{self.dir}/vmce-agent", self._words(command, args), capture=False)

    def close(self):
        self.qga.close()
