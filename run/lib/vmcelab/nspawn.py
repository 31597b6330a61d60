"""A Debian host in a container: systemd-nspawn --boot on an overlay of a
clean root (images/mkroot), so that a package is installed and run under
systemd as on an operator's host, and the root stays clean for the next run.

This machine's PID 1 is not systemd and there is no machined, so the
container is not registered (--register=no --keep-unit) and is driven with
nsenter. It shares the machine's network (apt reaches the mirror) and
nothing else but the directories bound in.

A process started from start_in_pid_ns() runs in the container's PID
namespace with the machine's own files: QEMU, say, which a daemon inside the
container can then see and ptrace as one of its host's processes.
"""
import contextlib
import ctypes
import os
import signal
import subprocess
import time

from . import procfs

CLONE_NEWPID = 0x20000000
PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


class ContainerError(RuntimeError):
    pass


def inner_pid(pid):
    """@pid (a machine pid) as the container it runs in numbers it"""
    ids = procfs.status_numbers(pid, "NSpid")
    return ids[-1] if ids else None


class Container:
    def __init__(self, name, root, work, binds=(), netns=None, hostname=None):
        """@root: the clean root (read only, the overlay's lower layer);
        @work: a directory of the test's own for the overlay and the log;
        @binds: (machine path, container path) pairs, or triples whose
        third is "ro" for a read-only bind; @netns: a network
        namespace of `ip netns` to live in (default: the machine's network)"""
        self.name = name
        self.netns = netns
        self.hostname = hostname
        self.root = root
        self.work = work
        self.binds = list(binds)
        self.merged = os.path.join(work, "merged")
        self.log_path = os.path.join(work, "nspawn.log")
        self.leader = None
        self.nspawn_pid = None
        self._proc = None

    def to_dict(self):
        """What another process needs to drive or stop this container"""
        return {"name": self.name, "root": self.root, "work": self.work, "binds": self.binds,
                "netns": self.netns, "hostname": self.hostname, "leader": self.leader,
                "nspawn_pid": self.nspawn_pid}

    @classmethod
    def from_dict(cls, d):
        c = cls(d["name"], d["root"], d["work"], [tuple(b) for b in d["binds"]], d.get("netns"),
                d.get("hostname"))
        c.leader, c.nspawn_pid = d.get("leader"), d.get("nspawn_pid")
        return c

    def running(self):
        return self.leader is not None and procfs.alive(self.leader)

    # -- life
    def start(self, timeout=90.0):
        """Boots the container; returns what `systemctl is-system-running`
        said once systemd had finished starting it"""
        for d in ("upper", "ovl-work", "merged"):
            os.makedirs(os.path.join(self.work, d), exist_ok=True)
        opts = (f"lowerdir={self.root},upperdir={self.work}/upper,"
                f"workdir={self.work}/ovl-work")
        r = subprocess.run(["mount", "-t", "overlay", "overlay", "-o", opts, self.merged],
                           capture_output=True, text=True)
        if r.returncode != 0:
            raise ContainerError(f"cannot mount the overlay on {self.merged}: {r.stderr.strip()}")
        args = ["systemd-nspawn", "--quiet", "--boot", "--register=no", "--keep-unit",
                "--machine", self.name, "--directory", self.merged, "--console=passive"]
        args += [f"--bind{'-ro' if b[2:] == ('ro',) else ''}={b[0]}:{b[1]}" for b in map(tuple, self.binds)]
        if self.netns:
            args.append(f"--network-namespace-path=/run/netns/{self.netns}")
        if self.hostname:
            args.append(f"--hostname={self.hostname}")
        with open(self.log_path, "w") as log:
            self._proc = subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=log,
                                          stderr=subprocess.STDOUT, start_new_session=True)
        self.nspawn_pid = self._proc.pid
        deadline = time.monotonic() + timeout
        while self.leader is None:
            self.leader = self._find_leader()
            if self._proc.poll() is not None:
                raise ContainerError(f"systemd-nspawn exited ({self._proc.returncode}): "
                                     f"{self.log_tail()}")
            if time.monotonic() > deadline:
                raise ContainerError(f"the container's systemd did not start: {self.log_tail()}")
            time.sleep(0.05)
        # systemctl answers nothing until systemd listens: ask again until it
        # says a state; degraded is still a booted system, the caller judges
        while True:
            left = max(deadline - time.monotonic(), 5)
            state = self.run("systemctl", "is-system-running", "--wait", check=False,
                             timeout=left).stdout.strip()
            if state not in ("", "offline", "initializing", "starting"):
                return state
            if time.monotonic() > deadline:
                raise ContainerError(f"the container did not finish booting ({state or 'no answer'}): "
                                     f"{self.log_tail()}")
            time.sleep(0.1)

    def _find_leader(self):
        """The container's PID 1: nspawn's child (or grandchild, as nspawn
        versions differ) whose pid in its own namespace is 1"""
        for entry in os.listdir("/proc"):
            if not entry.isdigit():
                continue
            ids = procfs.status_numbers(entry, "NSpid")
            if len(ids) < 2 or ids[-1] != 1:
                continue
            pid = int(entry)
            for _ in range(3):
                pid = procfs.status(pid, "PPid")
                if pid == self.nspawn_pid:
                    return int(entry)
        return None

    def stop(self, timeout=60.0):
        """Halts the container (SIGTERM to nspawn: a clean shutdown; timeout
        0: at once, as a host that loses its power), then takes the overlay
        away; the work directory is left for a post-mortem"""
        if self.nspawn_pid is not None and procfs.alive(self.nspawn_pid):
            if timeout > 0:
                os.kill(self.nspawn_pid, signal.SIGTERM)
                deadline = time.monotonic() + timeout
                while procfs.alive(self.nspawn_pid) and time.monotonic() < deadline:
                    time.sleep(0.1)
            # the namespace's init: with it goes every process of the
            # container (killing nspawn would leave them running)
            if self.leader is not None and procfs.alive(self.leader):
                os.kill(self.leader, signal.SIGKILL)
            elif procfs.alive(self.nspawn_pid):
                os.kill(self.nspawn_pid, signal.SIGKILL)  # no container yet
            deadline = time.monotonic() + 30
            while procfs.alive(self.nspawn_pid) and time.monotonic() < deadline:
                time.sleep(0.05)
        if self._proc is not None:
            self._proc.wait()
        self.leader = None
        if os.path.ismount(self.merged):
            subprocess.run(["umount", "-l", self.merged], capture_output=True)

    def log_tail(self, n=15):
        try:
            with open(self.log_path, errors="replace") as f:
                return "".join(f.readlines()[-n:])
        except OSError:
            return ""

    # -- inside
    def run(self, *argv, check=True, timeout=120.0, env=None, input=None):
        """Runs @argv inside the container (its mounts, PID namespace, host
        name); returns the CompletedProcess"""
        if self.leader is None:
            raise ContainerError("the container is not running")
        environ = {"PATH": PATH, "LANG": "C.UTF-8", "SYSTEMD_PAGER": "", "SYSTEMD_COLORS": "0"}
        environ.update(env or {})
        cmd = ["nsenter", f"--target={self.leader}", "--mount", "--uts", "--ipc", "--pid",
               "--root", "--wd", "--", "env", "-i", *[f"{k}={v}" for k, v in environ.items()],
               *argv]
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, input=input)
        if check and r.returncode != 0:
            raise ContainerError(f"{' '.join(argv)} failed ({r.returncode}) in {self.name}: "
                                 f"{(r.stderr.strip() or r.stdout.strip())[-2000:]}")
        return r

    def path(self, inside):
        """Where the machine sees a path of the container's"""
        return os.path.join(self.merged, inside.lstrip("/"))

    @contextlib.contextmanager
    def pid_ns(self):
        """Within it, processes this one starts are born in the container's
        PID namespace (with the machine's files and mounts)"""
        libc = ctypes.CDLL(None, use_errno=True)
        own = os.open("/proc/self/ns/pid", os.O_RDONLY)
        theirs = os.open(f"/proc/{self.leader}/ns/pid", os.O_RDONLY)
        try:
            if libc.setns(theirs, CLONE_NEWPID) != 0:
                err = ctypes.get_errno()
                raise ContainerError(f"setns into {self.name}'s PID namespace: {os.strerror(err)}")
            try:
                yield
            finally:
                libc.setns(own, CLONE_NEWPID)
        finally:
            os.close(own)
            os.close(theirs)
