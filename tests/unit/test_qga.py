#!/usr/bin/env python3
"""A guest driven through qemu-guest-agent alone (run/lib/vmcelab/qga.py),
against a scripted fake qga peer on a unix socket: the session sync and
stale answers, what qga refuses, the tools pushed into the first tmpfs
that runs them, a request relayed through guest-exec (and the agent
started again when it went), and a qga that stops answering."""
import base64
import json
import os
import socket
import sys
import tempfile
import threading
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "run", "lib"))

from vmcelab import qga  # noqa: E402
from vmcelab.agent import AgentError  # noqa: E402


class FakeQga:
    """qga's side of the socket: JSON lines in, JSON lines out, as scripted
    by the test: guest-exec runs handler(path, args) -> (exitcode, out, err)"""

    def __init__(self, path, commands=None, disabled=(), stale=(), exec_handler=None, silent=False):
        self.path = path
        self.commands = commands or (qga.NEEDED + ("guest-ping", "guest-info", "guest-get-osinfo"))
        self.disabled, self.stale, self.silent = set(disabled), list(stale), silent
        self.exec_handler = exec_handler or (lambda path, args: (0, "", ""))
        self.files, self.handles, self.execs, self.runs = {}, {}, {}, []
        self.srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.srv.bind(path)
        self.srv.listen(1)
        threading.Thread(target=self.serve, daemon=True).start()

    def serve(self):
        while True:
            try:
                conn, _ = self.srv.accept()
            except OSError:
                return
            with conn:
                buf = b""
                # answers a caller before gave up on
                for s in self.stale:
                    conn.sendall(json.dumps(s).encode() + b"\n")
                while True:
                    chunk = conn.recv(1 << 16)
                    if not chunk:
                        break
                    buf += chunk
                    while b"\n" in buf:
                        line, buf = buf.split(b"\n", 1)
                        reply = self.answer(json.loads(line.lstrip(b"\xff")))
                        if reply is not None and not self.silent:
                            conn.sendall(reply)

    def answer(self, msg):
        cmd, args = msg["execute"], msg.get("arguments", {})
        if cmd == "guest-sync-delimited":
            return b"\xff" + json.dumps({"return": args["id"]}).encode() + b"\n"

        def ret(value):
            out = {"return": value}
            if "id" in msg:
                out["id"] = msg["id"]
            return json.dumps(out).encode() + b"\n"
        if cmd in self.disabled:
            return json.dumps({"error": {"class": "GenericError", "desc": f"Command {cmd} has been disabled"},
                               "id": msg.get("id")}).encode() + b"\n"
        if cmd == "guest-info":
            return ret({"version": "7.2.22", "supported_commands": [
                {"name": c, "enabled": c not in self.disabled} for c in self.commands]})
        if cmd == "guest-get-osinfo":
            return ret({"pretty-name": "Fake Linux 1", "kernel-release": "6.1.0-9-amd64"})
        if cmd == "guest-ping":
            return ret({})
        if cmd == "guest-file-open":
            h = len(self.handles) + 1000
            self.handles[h] = args["path"]
            self.files[args["path"]] = b""
            return ret(h)
        if cmd == "guest-file-write":
            self.files[self.handles[args["handle"]]] += base64.b64decode(args["buf-b64"])
            return ret({"count": 1, "eof": False})
        if cmd == "guest-file-close":
            return ret({})
        if cmd == "guest-exec":
            pid = len(self.execs) + 100
            self.runs.append((args["path"], args.get("arg", [])))
            self.execs[pid] = self.exec_handler(args["path"], args.get("arg", []))
            return ret({"pid": pid})
        if cmd == "guest-exec-status":
            code, out, err = self.execs[args["pid"]]
            return ret({"exited": True, "exitcode": code,
                        "out-data": base64.b64encode(out.encode()).decode(),
                        "err-data": base64.b64encode(err.encode()).decode()})
        return json.dumps({"error": {"class": "CommandNotFound", "desc": f"command {cmd} not found"},
                           "id": msg.get("id")}).encode() + b"\n"

    def close(self):
        self.srv.close()


class QgaTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp()
        self.sock = os.path.join(self.dir, "qga.sock")
        self.tools = os.path.join(self.dir, "tools")
        os.makedirs(self.tools)
        for t in qga.TOOLS:
            with open(os.path.join(self.tools, t), "wb") as f:
                f.write(t.encode() * 40000)  # more than one guest-file-write

    def agent(self, fake, why=("hung", "the guest is hung")):
        self.addCleanup(fake.close)
        a = qga.QgaAgent(qga.QgaSocket(self.sock), why_silent=lambda: why, tools_dir=self.tools)
        self.addCleanup(a.close)
        return a

    def test_refusal_is_told_from_failure(self):
        for text, refused in (("Command guest-exec has been disabled", True),
                              ("The command guest-exec has been disabled for this instance", True),
                              ("Command guest-exec not found", True),
                              ("Failed to execute child process \"x\" (No such file or directory)", False),
                              ("Guest agent is not responding: timeout", False)):
            self.assertEqual(qga.refusal(text), refused, text)

    def test_stale_answers_are_skipped(self):
        fake = FakeQga(self.sock, stale=[{"return": {}}, {"return": {"pid": 7}, "id": 3}])
        a = self.agent(fake)
        info = a._qga("guest-info")
        self.assertIn("supported_commands", info, "the stale {} is not guest-info's answer")

    def test_refused_guest_exec(self):
        a = self.agent(FakeQga(self.sock, disabled={"guest-exec"}))
        with self.assertRaises(qga.QgaError) as e:
            a.wait_ready(5)
        self.assertEqual(e.exception.kind, "refused")
        self.assertIn("refuses guest-exec", str(e.exception))
        self.assertIn("disabled in its configuration", str(e.exception))

    def test_no_guest_exec_at_all(self):
        a = self.agent(FakeQga(self.sock, commands=("guest-ping", "guest-info")))
        with self.assertRaises(qga.QgaError) as e:
            a.wait_ready(5)
        self.assertIn("not in this qemu-ga", str(e.exception))

    def test_tools_go_to_the_first_tmpfs_that_runs_them(self):
        def handler(path, args):
            if path == "/bin/sh" and args[1].startswith("cd /dev/shm"):
                return 126, "", "sh: 1: ./vmce-agent: Permission denied\n"
            return 0, "", ""
        fake = FakeQga(self.sock, exec_handler=handler)
        a = self.agent(fake)
        a.wait_ready(5)
        self.assertEqual(a.dir, "/run")
        for t in qga.TOOLS:
            with open(os.path.join(self.tools, t), "rb") as f:
                self.assertEqual(fake.files[f"/run/{t}.new"], f.read(), f"{t} arrives whole")
        self.assertEqual(fake.runs[-1], ("/run/vmce-agent", ["--listen", "/run/vmce-agent.sock"]))

    def test_no_executable_tmpfs(self):
        fake = FakeQga(self.sock, exec_handler=lambda p, a: (1, "", "Permission denied\n"))
        a = self.agent(fake)
        with self.assertRaises(qga.QgaError) as e:
            a.wait_ready(5)
        self.assertEqual(e.exception.kind, "no-tmpfs")
        self.assertIn("/dev/shm: ", str(e.exception))
        self.assertIn("/run: ", str(e.exception))

    def test_call_relays_and_restarts_a_gone_agent(self):
        answers = [(3, "", "vmce-agent: no agent on /dev/shm/vmce-agent.sock: Connection refused\n"),
                   (0, '{"return":{"pid":42}}\n', "")]

        def handler(path, args):
            if args[:1] == ["--call"]:
                return answers.pop(0)
            return 0, "", ""
        fake = FakeQga(self.sock, exec_handler=handler)
        a = self.agent(fake)
        a.wait_ready(5)
        self.assertEqual(a.call("pages-start", type="anon-dirty"), {"pid": 42})
        calls = [r for r in fake.runs if r[0] == "/dev/shm/vmce-agent"]
        self.assertEqual(calls[-1][1], ["--call", "/dev/shm/vmce-agent.sock", "pages-start", "type=anon-dirty"])
        self.assertEqual(sum(1 for r in calls if r[1][0] == "--listen"), 2, "the agent started again")

    def test_agent_error_is_an_agent_error(self):
        fake = FakeQga(self.sock, exec_handler=lambda p, a: (
            0, '{"error":{"class":"NotSupported","desc":"needs hugepages"}}\n', "") if a[:1] == ["--call"]
            else (0, "", ""))
        a = self.agent(fake)
        a.wait_ready(5)
        with self.assertRaises(AgentError) as e:
            a.call("pages-start", type="hugetlb")
        self.assertEqual(str(e.exception), "pages-start: needs hugepages (NotSupported)")

    def test_silent_qga_is_told_hung_or_dead(self):
        fake = FakeQga(self.sock, silent=True)
        a = self.agent(fake, why=("dead", "QEMU exited with status 1"))
        with self.assertRaises(qga.QgaError) as e:
            a._qga("guest-info", timeout=0.5)
        self.assertEqual(e.exception.kind, "dead")
        self.assertIn("stopped answering guest-info: QEMU exited", str(e.exception))

    def test_no_qga_at_all(self):
        a = qga.QgaAgent(qga.QgaSocket(os.path.join(self.dir, "none.sock")), tools_dir=self.tools)
        with self.assertRaises(qga.QgaError) as e:
            a.wait_ready(1)
        self.assertEqual(e.exception.kind, "no-agent")
        self.assertIn("did not answer within 1 s", str(e.exception))


if __name__ == "__main__":
    unittest.main()
