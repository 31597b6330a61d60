"""A private sshd (Debian's openssh-server) for reaching a vmced the way an
operator reaches another host: its own host key, a user key made for the
run, listening on 127.0.0.1 (or an address of the caller's network
namespace) and on nothing else. For tests and the fleet on one machine
(run/fleet); it never touches the machine's own sshd or keys."""
import os
import shutil
import socket
import subprocess
import time
from urllib.parse import quote

SSHD = "/usr/sbin/sshd"


def available():
    """None, or why there is no sshd to start"""
    if not os.path.exists(SSHD):
        return f"{SSHD} is missing (apt-get install openssh-server; run/install-deps installs it)"
    if not shutil.which("ssh") or not shutil.which("ssh-keygen"):
        return "ssh or ssh-keygen is missing (apt-get install openssh-client)"
    return None


def free_port(host="127.0.0.1"):
    with socket.socket() as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def keygen(path):
    if not os.path.exists(path):
        subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "vmce", "-f", path], check=True)
    return path


class Sshd:
    def __init__(self, workdir, address="127.0.0.1", port=None, user_key=None, netns=None):
        """sshd on @address:@port (a free one by default) accepting @user_key
        (made in @workdir by default) for root; in network namespace @netns
        if given"""
        self.dir = workdir
        os.makedirs(workdir, exist_ok=True)
        self.address = address
        self.port = port or free_port(address if netns is None else "127.0.0.1")
        self.user_key = user_key or keygen(os.path.join(workdir, "user_key"))
        host_key = keygen(os.path.join(workdir, "host_key"))
        with open(os.path.join(workdir, "authorized_keys"), "w") as f:
            with open(self.user_key + ".pub") as k:
                f.write(k.read())
        self.config = os.path.join(workdir, "sshd_config")
        self.pidfile = os.path.join(workdir, "sshd.pid")
        self.log = os.path.join(workdir, "sshd.log")
        with open(self.config, "w") as f:
            f.write(f"Port {self.port}\nListenAddress {address}\nHostKey {host_key}\n"
                    f"AuthorizedKeysFile {os.path.join(workdir, 'authorized_keys')}\n"
                    "PermitRootLogin prohibit-password\nPasswordAuthentication no\n"
                    "KbdInteractiveAuthentication no\nStrictModes no\nUsePAM no\n"
                    f"PidFile {self.pidfile}\n"
                    # Sessions skip the login user's ~/.bashrc (bash reads it
                    # for ssh only at SHLVL 0): this machine's runs pyenv
                    # rehash under a lock, and a session killed with its host
                    # (run/fleet kill) left the lock behind, so every later
                    # session waited 60 s for it.
                    "SetEnv SHLVL=1\n")
        os.makedirs("/run/sshd", exist_ok=True)  # its privilege-separation directory
        argv = [SSHD, "-f", self.config, "-E", self.log]
        if netns:
            argv = ["ip", "netns", "exec", netns, *argv]
        r = subprocess.run(argv, capture_output=True, text=True, timeout=30)
        if r.returncode != 0:
            raise RuntimeError(f"sshd did not start: {r.stderr.strip() or self._log_tail()}")
        deadline = time.monotonic() + 10
        while not os.path.exists(self.pidfile):
            if time.monotonic() > deadline:
                raise RuntimeError(f"sshd wrote no pid file: {self._log_tail()}")
            time.sleep(0.02)

    def _log_tail(self):
        try:
            with open(self.log) as f:
                return " / ".join(f.read().splitlines()[-3:])
        except OSError:
            return "(no log)"

    def target(self, socket_path, vmcectl=None, key=None, user="root"):
        """the vmcectl --connect URI of a vmced at @socket_path behind this sshd"""
        params = [f"socket={quote(socket_path, safe='/')}", f"keyfile={quote(key or self.user_key, safe='/')}",
                  "no_verify=1"]
        if vmcectl:
            params.append(f"vmcectl={quote(vmcectl, safe='/')}")
        return f"ssh://{user}@{self.address}:{self.port}?{'&'.join(params)}"

    @property
    def label(self):
        return f"{self.address}:{self.port}"

    def stop(self, sessions=True):
        """stops listening; with @sessions, every session it serves goes too
        (the host is gone, not just its sshd)"""
        try:
            with open(self.pidfile) as f:
                pid = int(f.read())
        except (OSError, ValueError):
            return
        doomed = [pid] + (descendants(pid) if sessions else [])
        for p in doomed:
            try:
                os.kill(p, 15)
            except OSError:
                pass


def descendants(pid):
    """every process below @pid (an sshd's sessions and what they run)"""
    children = {}
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                with open(f"/proc/{d}/stat") as f:
                    ppid = int(f.read().rsplit(") ", 1)[1].split()[1])
            except (OSError, ValueError, IndexError):
                continue
            children.setdefault(ppid, []).append(int(d))
    out, todo = [], [pid]
    while todo:
        for c in children.get(todo.pop(), []):
            out.append(c)
            todo.append(c)
    return out
