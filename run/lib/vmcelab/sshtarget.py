"""One host of a campaign across hosts: its ssh target
(ssh://[user@]host[:port][?keyfile=&no_verify=1&tree=&vmced=&build=]),
how ssh reaches it and where vmce is there. A campaign file's [hosts]
names them (campaign.py); hosts.py runs their shares of the cases."""
import os
import shlex
from urllib.parse import parse_qsl, urlsplit

from . import paths

PARAMS = ("keyfile", "no_verify", "tree", "vmced", "build")


class TargetError(ValueError):
    """a host target that cannot be used"""


class Host:
    """One host of a campaign: how ssh reaches it and where vmce is there"""

    def __init__(self, name, target, libvirt=None, vmced=None):
        """@name None: the host is named for its address (and port, if given)"""
        self.target, self.libvirt, self.vmced = target, libvirt, vmced
        try:
            u = urlsplit(target)
            port = u.port
        except ValueError as e:
            raise TargetError(f"{target}: {e}") from None
        if u.scheme != "ssh":
            raise TargetError(f"{target}: not an ssh target (ssh://[user@]host[:port][?keyfile=PATH"
                              "&no_verify=1&tree=PATH&vmced=PATH&build=PATH])")
        if not u.hostname:
            raise TargetError(f"{target}: names no host")
        if u.path not in ("", "/"):
            raise TargetError(f"{target}: a path means nothing here (where vmce is: ?tree=PATH)")
        params = dict(parse_qsl(u.query, keep_blank_values=True))
        for key in params:
            if key not in PARAMS:
                raise TargetError(f"{target}: unknown parameter {key} (known: {', '.join(PARAMS)})")
        self.address, self.port, self.user = u.hostname, port, u.username
        self.name = name or self.label
        self.keyfile = params.get("keyfile")
        self.no_verify = params.get("no_verify", "0") not in ("", "0")
        # the same path as here unless told: a fleet of machines set up alike
        self.tree = params.get("tree") or paths.ROOT
        # the vmced its worker runs: the tree's build unless told (a host
        # with vmce's package: /usr/sbin/vmced)
        self.vmced_path = params.get("vmced")
        # its build directory (guest kernels and images, its results): the
        # tree's unless told (tools installed by the vmce-lab package)
        self.build = params.get("build")
        self.refused = None  # why it could not take cases
        self.lost = None  # why it went on the way
        self.info = {}  # its hello

    @property
    def label(self):
        return f"{self.address}:{self.port}" if self.port else self.address

    def ssh_argv(self, *remote):
        """ssh as vmcectl --connect runs it ($VMCE_SSH replaces `ssh`)"""
        argv = shlex.split(os.environ.get("VMCE_SSH") or "ssh")
        # no password prompt to hang on, and a host gone quiet is noticed
        # in seconds, not at TCP's timeout
        argv += ["-T", "-o", "BatchMode=yes", "-o", "ConnectTimeout=10", "-o", "ServerAliveInterval=5",
                 "-o", "ServerAliveCountMax=3"]
        if self.port:
            argv += ["-p", str(self.port)]
        if self.user:
            argv += ["-l", self.user]
        if self.keyfile:
            argv += ["-i", self.keyfile, "-o", "IdentitiesOnly=yes"]
        if self.no_verify:
            argv += ["-o", "StrictHostKeyChecking=no", "-o", "UserKnownHostsFile=/dev/null",
                     "-o", "LogLevel=ERROR"]
        # ssh hands the far side one command line, for its shell to split
        return argv + ["--", self.address, shlex.join(remote)]

    def worker_argv(self, *args):
        env = ([f"VMCE_VMCED={self.vmced_path}"] if self.vmced_path else []) + \
              ([f"VMCE_BUILD_DIR={self.build}"] if self.build else [])
        worker = [os.path.join(self.tree, "run", "campaign"), "--worker", *args]
        return self.ssh_argv(*(["env", *env] if env else []), *worker)

    def to_dict(self):
        return {"name": self.name, "target": self.target, "libvirt": self.libvirt, "vmced": self.vmced,
                "refused": self.refused, "lost": self.lost, "qemu": self.info.get("qemu")}
