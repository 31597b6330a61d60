"""Run vmced and vmcectl from the build tree."""
import json
import os
import signal
import socket
import subprocess
import time

from . import paths


class Vmced:
    """A vmced of its own: private control socket and journal."""

    def __init__(self, workdir, args=(), binary=None):
        os.makedirs(workdir, exist_ok=True)
        self.workdir = workdir
        self.socket = os.path.join(workdir, "vmced.sock")
        self.journal = os.path.join(workdir, "journal.jsonl")
        self.log_path = os.path.join(workdir, "vmced.log")
        binary = binary or paths.require(paths.vmced(), "vmced", "run `make build`")
        self.args = list(args)
        self.argv = [binary, "--socket", self.socket, "--journal", self.journal, *args]
        self.log = open(self.log_path, "a")
        self.proc = subprocess.Popen(self.argv, stdin=subprocess.DEVNULL, stdout=self.log,
                                     stderr=subprocess.STDOUT, start_new_session=True)
        deadline = time.monotonic() + 10
        while not self._listening():
            if self.proc.poll() is not None:
                raise RuntimeError(f"vmced exited with {self.proc.returncode}: {self.log_text()}")
            if time.monotonic() > deadline:
                raise RuntimeError(f"vmced did not listen on {self.socket}: {self.log_text()}")
            time.sleep(0.02)

    def _listening(self):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            s.connect(self.socket)
            return True
        except OSError:
            return False
        finally:
            s.close()

    def log_text(self):
        self.log.flush()
        with open(self.log_path, errors="replace") as f:
            return f.read()

    def ctl_argv(self):
        """vmcectl, pointed at this vmced"""
        return [paths.require(paths.vmcectl(), "vmcectl", "run `make build`"), "--socket", self.socket]

    def ctl(self, *args, check=True, timeout=60):
        """Runs vmcectl against this vmced; returns the CompletedProcess."""
        cmd = [*self.ctl_argv(), *args]
        res = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
        if check and res.returncode != 0:
            raise RuntimeError(f"{' '.join(cmd[1:])} failed ({res.returncode}): "
                               f"{res.stderr.strip() or res.stdout.strip()}")
        return res

    def ctl_json(self, *args, **kw):
        res = self.ctl("--json", *args, **kw)
        return json.loads(res.stdout) if res.stdout.strip().startswith(("{", "[")) else None

    def poison(self, vm, *args):
        """vmcectl poison: the memory-error record, whatever became of it
        (vmcectl exits 1 unless the guest got its machine check)"""
        res = self.ctl("--json", "poison", vm, *args, check=False)
        if not res.stdout.startswith("{"):
            raise RuntimeError(f"vmcectl poison {vm}: {res.stderr.strip()}")
        return json.loads(res.stdout)

    def wait_attached(self, name, timeout=30.0):
        """The VM's description once vmced has finished attaching to it."""
        deadline = time.monotonic() + timeout
        while True:
            res = self.ctl("--json", "vm", name, check=False)
            if res.returncode == 0:
                vm = json.loads(res.stdout)
                if vm["state"] == "attached":
                    return vm
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"vmced did not attach to {name}: {self.log_text()}")
            time.sleep(0.05)

    def journal_records(self):
        return self.records(self.journal)

    @staticmethod
    def records(path):
        """The records of journal file @path: complete lines only. vmced
        appends as it goes (io_uring), and a reader can meet the last record
        half written (seen while 511 huge-page records went in): it is
        read next time, whole"""
        try:
            with open(path) as f:
                return [json.loads(line) for line in f if line.endswith("\n") and line.strip()]
        except FileNotFoundError:
            return []

    def rss_kb(self):
        with open(f"/proc/{self.proc.pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
        return None

    def alive(self):
        return self.proc.poll() is None

    def stop(self, timeout=15):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()
        return self.proc.returncode


class VmcedCtl(Vmced):
    """A vmced that runs already (the host's, in libvirt mode), reached as
    an operator reaches it: vmcectl, over its default socket or --connect
    TARGET (an ssh:// host)"""

    def __init__(self, target=None, socket_path=None):
        self.target, self.socket = target, socket_path
        self.journal = None

    def ctl_argv(self):
        where = ["--connect", self.target] if self.target else \
            ["--socket", self.socket] if self.socket else []
        return [paths.require(paths.vmcectl(), "vmcectl", "run `make build`"), *where]

    def journal_records(self):
        """The host's journal is the host's to read: the cases that need it
        (inject = host-real) run with a vmced of the campaign's own"""
        return []

    def alive(self):
        return self.ctl("status", check=False).returncode == 0

    def stop(self, timeout=15):
        return None  # not ours to stop


class ControlConnection:
    """vmced's control protocol spoken directly, requests pipelined on one
    connection (vmcectl waits for each answer): for storms"""

    def __init__(self, path):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.connect(path)
        self.file = self.sock.makefile("rwb")
        json.loads(self.file.readline())  # the greeting

    def send(self, command, rid, **args):
        self.file.write(json.dumps({"execute": command, "arguments": args, "id": rid}).encode() + b"\n")

    def flush(self):
        self.file.flush()

    def replies(self, n, timeout):
        """Up to @n answers (dicts by id) within @timeout"""
        got = {}
        self.sock.settimeout(timeout)
        try:
            while len(got) < n:
                line = self.file.readline()
                if not line:
                    break
                msg = json.loads(line)
                if "id" in msg:
                    got[msg["id"]] = msg
        except (socket.timeout, OSError):
            pass
        return got

    def close(self):
        try:
            self.file.close()
            self.sock.close()
        except OSError:
            pass
